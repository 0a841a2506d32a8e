/* cmd_npu_monitor: `dyno npu-monitor` — start/stop/retune the msPTI monitor on the node
 * (docs/design/cli.md#npu-monitor). Its flags, defaults, checks and the config text it sends are the
 * contract's npu-monitor rules (cfgrules.def): every key is always sent, so an omitted flag
 * resets its setting. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli_outcome.h"
#include "cli/cli_val.h"
#include "cli/cmd.h"
#include "common/strutil.h"
#include "contract/cfgkeys.h"
#include "contract/cfgrules.h"
#include "contract/outputs.h"

/* The exportable rows of the output table (contract/outputs.h), as the plugin accepts them. */
static const char *const export_types[] = {MSMON_OUTPUT_EXPORT_VALUES NULL};

/* The flags: one per npu-monitor rule of the contract (cfgrules.def gives its name, default
 * and help; a BOOL key is a flag without value), then this command's own. --help lists them
 * by name. */
#define NPU_FLAG_NPU_MONITOR(type, dflt, flag, help)                                                          \
    {flag, CFGRULES_##type == CFGRULES_BOOL ? CLI_FLAG_BOOL : CLI_FLAG_VALUE, false,                          \
     CFGRULES_##type == CFGRULES_BOOL ? NULL : dflt, help},
#define RULE(key, type, dflt, min, max, minus_one, command, flag, help) NPU_FLAG_##command(type, dflt, flag, help)
static const struct cli_flag npu_monitor_flags[] = {
#include "contract/cfgrules.def"
    CLI_OUTCOME_FLAG_NO_WAIT,
    CMD_FLAG_NAMESPACE,
    CMD_FLAG_POD,
    {"process-limit", CLI_FLAG_VALUE, false, "0", "Most processes to trigger; 0 = every matching process"},
    CLI_OUTCOME_FLAG_WAIT_S,
};
#undef RULE
#undef NPU_FLAG_NPU_MONITOR

/* Trimmed view copied into out (cap bytes); returns out. */
static const char *trimmed(const char *s, char *out, size_t cap)
{
    size_t n = strlen(s);
    str_trim_view(&s, &n, " \t");
    str_copy(out, cap, s, n);
    return out;
}

/* The value rule r's flag sends (docs/design/contract.md#npu-monitor-keys), checked by the rule,
 * into out (cap bytes, room for a whole path); -EINVAL with the one-line error in err. */
static int rule_value(const struct cli_args *a, const struct cfgrules_rule *r, char *out, size_t cap, char *err,
                      size_t errcap)
{
    const char *v = r->type == CFGRULES_BOOL ? cli_flags_bool_text(a, r->flag) : cli_flags_get(a, r->flag);
    char why[256];
    int64_t n;

    switch (r->type) {
    case CFGRULES_INT:
        if (r->dflt[0]) { /* a number is required: sent as the number it reads */
            if (cfgrules_int(r, v, &n) < 0)
                goto bad;
            snprintf(out, cap, "%lld", (long long)n);
            return 0;
        }
        /* may be left empty: sent trimmed, as typed (no number of a range needs 32 bytes) */
        if (strlen(v) >= 32 || (trimmed(v, out, cap)[0] && cfgrules_int(r, out, &n) < 0))
            goto bad;
        return 0;
    case CFGRULES_SECONDS:
        return cli_val_nonneg_f32(r->flag, v, out, cap, err, errcap);
    case CFGRULES_KINDS:
        if (cli_val_kinds(r->flag, v, err, errcap) < 0)
            return -EINVAL;
        break;
    case CFGRULES_DIR:
        if (cli_val_log_dir(r->flag, v, false, err, errcap) < 0)
            return -EINVAL;
        break;
    case CFGRULES_EXPORT:
        if (cli_val_enum(r->flag, v, export_types, err, errcap) < 0)
            return -EINVAL;
        break;
    case CFGRULES_FILTER:
        if (cli_val_filter(r->flag, v, err, errcap) < 0)
            return -EINVAL;
        break;
    case CFGRULES_BOOL:
        break;
    }
    str_copy(out, cap, v, strlen(v));
    return 0;
bad:
    cfgrules_reason(r, why, sizeof(why));
    cli_val_err(err, errcap, r->flag, v, why);
    return -EINVAL;
}

static int npu_monitor_prepare(const struct cli_args *a, struct cmd_req *req, char *err,
                               size_t errcap)
{
    const struct cfgrules_rule *r;
    const char *log_file = "";
    char v[CLI_VAL_PATH_MAX + 1];
    int64_t limit = 0;
    bool first = true;

    /* every key, in the table's order: an omitted flag sends its default */
    for (size_t i = 0; (r = cfgrules_at(i)); i++) {
        if (strcmp(r->command, CFGRULES_COMMAND_NPU_MONITOR) != 0)
            continue;
        if (rule_value(a, r, v, sizeof(v), err, errcap) < 0)
            return -EINVAL;
        cli_buf_printf(&req->config, "%s%s=%s", first ? "" : "\n", r->key, v);
        first = false;
        if (r->type == CFGRULES_DIR)
            log_file = cli_flags_get(a, r->flag);
    }
    if (cli_val_i64("process-limit", cli_flags_get(a, "process-limit"), 0, CMD_PROCESS_LIMIT_ALL,
                    "Must be an integer in [0, 4096] (0 = every matching process)", &limit, err, errcap) < 0 ||
        cli_outcome_prepare(a, req, err, errcap) < 0 || cmd_pod_prepare(a, req, err, errcap) < 0)
        return -EINVAL;

    bool start = cli_flags_bool(a, cfgrules_of(CFGKEY_NPU_MONITOR_START)->flag);
    cmd_build_kineto_body(req, 0, "0", (unsigned long long)limit);
    if (log_file[0])
        cli_val_path_warnings(log_file, &req->echo);
    cli_buf_printf(&req->echo, "Npu monitor config = \n%s\n", cli_buf_str(&req->config));
    /* The report hint names the directory a start writes to; a stop or a status names none. */
    req->log_file = start ? log_file : "";
    return req->config.err ? req->config.err : req->body.err;
}

static void npu_monitor_render(const struct cmd_req *req, const char *reply, size_t len,
                               const cJSON *json, struct cli_buf *out, bool *ret_failed,
                               char *err, size_t errcap)
{
    (void)len;
    cmd_render_reply_line(reply, out);
    cmd_render_note(json, out);
    cmd_pod_check(req, json, out, ret_failed, err, errcap);
    /* Files on the node are read back with SQL or jq otherwise: point at the report. */
    if (req->log_file && req->log_file[0])
        cli_buf_printf(out, "Hint: once the session has stopped, `python3 -m msmonitor report %s` on "
                            "the node renders its files as one HTML page (docs/report.md)\n",
                       req->log_file);
}

static void npu_monitor_run_host(const struct cmd_req *req, const char *target, uint16_t port, int timeout_s,
                                 struct cli_buf *out, bool *ret_failed, char *err, size_t errcap)
{
    cli_outcome_run_host(req, target, port, timeout_s, out, ret_failed, err, errcap, npu_monitor_render);
}

const struct cli_cmd cmd_npu_monitor = {
    .name = "npu-monitor",
    .about = "Start, stop or retune msPTI monitoring of the registered training processes",
    .flags = npu_monitor_flags,
    .nflags = sizeof(npu_monitor_flags) / sizeof(npu_monitor_flags[0]),
    .prepare = npu_monitor_prepare,
    .render = npu_monitor_render,
    .run_host = npu_monitor_run_host,
};
