/* cmd_npu_monitor: `dyno npu-monitor` — start/stop/retune the msPTI monitor on the node
 * (docs/design/cli.md#npu-monitor). All ten keys are always sent, so an omitted flag resets its setting. */
#include <errno.h>
#include <inttypes.h>
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

static const struct cli_flag npu_monitor_flags[] = {
    {"duration", CLI_FLAG_VALUE, false, "0", "Seconds to run (fractions allowed); 0 = until --npu-monitor-stop"},
    {"export-type", CLI_FLAG_VALUE, false, "DB", "Output format with --log-file, one of:" MSMON_OUTPUT_EXPORT_HELP},
    {"filter", CLI_FLAG_VALUE, false, "", "Kind:Name[,Name...][;Kind:Name...] (replaces the node's filter)"},
    {"json-rotate-log-files", CLI_FLAG_VALUE, false, "", "Jsonl files to keep: -1 or >= 2"},
    {"json-rotate-log-lines", CLI_FLAG_VALUE, false, "", "Jsonl lines per file: 100..500000"},
    {"log-file", CLI_FLAG_VALUE, false, "", "Directory for DB/Jsonl output on the node (empty = metrics to dynolog)"},
    {"mspti-activity-kind", CLI_FLAG_VALUE, false, "Marker", "Comma list of msPTI activity kinds"},
    CMD_FLAG_NAMESPACE,
    CLI_OUTCOME_FLAG_NO_WAIT,
    {"npu-monitor-start", CLI_FLAG_BOOL, false, NULL, "Start monitoring (a start with another --log-file, "
                                                      "--export-type or --duration restarts a running session)"},
    {"npu-monitor-stop", CLI_FLAG_BOOL, false, NULL, "Stop monitoring (wins over start)"},
    CMD_FLAG_POD,
    {"process-limit", CLI_FLAG_VALUE, false, "0", "Most processes to trigger; 0 = every matching process"},
    {"report-interval-s", CLI_FLAG_VALUE, false, "60", "Report/flush period in seconds; 0 = keep current"},
    CLI_OUTCOME_FLAG_WAIT_S,
};

/* Trimmed view copied into out (cap bytes); returns out. */
static const char *trimmed(const char *s, char *out, size_t cap)
{
    size_t n = strlen(s);
    str_trim_view(&s, &n, " \t");
    str_copy(out, cap, s, n);
    return out;
}

static int npu_monitor_prepare(const struct cli_args *a, struct cmd_req *req, char *err,
                               size_t errcap)
{
    const char *interval = cli_flags_get(a, "report-interval-s");
    const char *duration = cli_flags_get(a, "duration");
    const char *kinds = cli_flags_get(a, "mspti-activity-kind");
    const char *log_file = cli_flags_get(a, "log-file");
    const char *export_type = cli_flags_get(a, "export-type");
    const char *lines = cli_flags_get(a, "json-rotate-log-lines");
    const char *files = cli_flags_get(a, "json-rotate-log-files");
    const char *filter = cli_flags_get(a, "filter");
    char dur[CLI_VAL_F32_LEN], lines_t[32], files_t[32];
    uint64_t interval_v;
    int64_t v, limit = 0;

    if (cli_val_u64("report-interval-s", interval, "Must be an integer in [0, 4294967295]",
                    &interval_v, err, errcap) < 0 || interval_v > UINT32_MAX) {
        cli_val_err(err, errcap, "report-interval-s", interval,
                    "Must be an integer in [0, 4294967295]");
        return -EINVAL;
    }
    if (cli_val_nonneg_f32("duration", duration, dur, sizeof(dur), err, errcap) < 0 ||
        cli_val_kinds("mspti-activity-kind", kinds, err, errcap) < 0 ||
        cli_val_log_dir("log-file", log_file, false, err, errcap) < 0 ||
        cli_val_enum("export-type", export_type, export_types, err, errcap) < 0)
        return -EINVAL;
    /* the rotation ranges are the contract's (cfgrules.def), the plugin reads them by the same rule */
    const struct cfgrules_rule *lr = cfgrules_of(CFGKEY_JSONL_ROTATE_LOG_LINES);
    const struct cfgrules_rule *fr = cfgrules_of(CFGKEY_JSONL_ROTATE_LOG_FILES);
    if (strlen(lines) >= sizeof(lines_t) ||
        (trimmed(lines, lines_t, sizeof(lines_t))[0] && cfgrules_int(lr, lines_t, &v) < 0)) {
        cli_val_err(err, errcap, "json-rotate-log-lines", lines, lr->msg);
        return -EINVAL;
    }
    if (strlen(files) >= sizeof(files_t) ||
        (trimmed(files, files_t, sizeof(files_t))[0] && cfgrules_int(fr, files_t, &v) < 0)) {
        cli_val_err(err, errcap, "json-rotate-log-files", files, fr->msg);
        return -EINVAL;
    }
    if (cli_val_filter("filter", filter, err, errcap) < 0 ||
        cli_val_i64("process-limit", cli_flags_get(a, "process-limit"), 0, CMD_PROCESS_LIMIT_ALL,
                    "Must be an integer in [0, 4096] (0 = every matching process)", &limit, err, errcap) < 0 ||
        cli_outcome_prepare(a, req, err, errcap) < 0 || cmd_pod_prepare(a, req, err, errcap) < 0)
        return -EINVAL;

    bool start = cli_flags_bool(a, "npu-monitor-start");
    bool stop = cli_flags_bool(a, "npu-monitor-stop");
    cli_buf_printf(&req->config,
                   CFGKEY_NPU_MONITOR_START "=%s\n" CFGKEY_NPU_MONITOR_STOP "=%s\n"
                   CFGKEY_REPORT_INTERVAL_S "=%" PRIu64 "\n" CFGKEY_DURATION "=%s\n"
                   CFGKEY_MSPTI_ACTIVITY_KIND "=%s\n" CFGKEY_NPU_MONITOR_LOG_FILE "=%s\n"
                   CFGKEY_NPU_MONITOR_EXPORT_TYPE "=%s\n" CFGKEY_JSONL_ROTATE_LOG_LINES "=%s\n"
                   CFGKEY_JSONL_ROTATE_LOG_FILES "=%s\n" CFGKEY_NPU_MONITOR_FILTER "=%s",
                   start ? "true" : "false", stop ? "true" : "false", interval_v, dur, kinds,
                   log_file, export_type, lines_t, files_t, filter);
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
