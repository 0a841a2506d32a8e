/* cmd_nputrace: `dyno nputrace` — one-shot torch_npu/MindSpore profiler trace on the
 * registered processes, always iteration-triggered (docs/design/cli.md#nputrace). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_outcome.h"
#include "cli/cli_val.h"
#include "cli/cmd.h"
#include "cli/hosts.h"
#include "cli/rpc_client.h"
#include "contract/cfgkeys.h"

static const char *const activities[] = {"CPU,NPU", "NPU,CPU", "CPU", "NPU", NULL};
static const char *const levels[] = {"Level0", "Level1", "Level2", "Level_none", NULL};
static const char *const aic_metrics[] = {"AiCoreNone", "PipeUtilization", "ArithmeticUtilization",
                                          "Memory", "MemoryL0", "ResourceConflictRatio",
                                          "MemoryUB", "L2Cache", "MemoryAccess", NULL};
static const char *const bools[] = {"true", "false", NULL};
static const char *const export_types[] = {"Text", "Db", NULL};

static const struct cli_flag nputrace_flags[] = {
    {"activities", CLI_FLAG_VALUE, false, "CPU,NPU", "CPU,NPU | NPU,CPU | CPU | NPU"},
    {"aic-metrics", CLI_FLAG_VALUE, false, "AiCoreNone", "AI Core metrics group"},
    {"aligned", CLI_FLAG_BOOL, false, NULL, "With --start-step -1: one start step for every rank of every host"},
    {"aligned-margin", CLI_FLAG_VALUE, false, "20", "With --aligned: steps added to the highest current step"},
    {"analyse", CLI_FLAG_BOOL, false, NULL, "Analyse the trace online"},
    {"async-mode", CLI_FLAG_BOOL, false, NULL, "Analyse in a child process (PyTorch only, with --analyse)"},
    {"data-simplification", CLI_FLAG_VALUE, false, "true", "true | false"},
    {"duration-ms", CLI_FLAG_VALUE, false, "500", "Duration trigger (not used: --iterations is required)"},
    {"export-type", CLI_FLAG_VALUE, false, "Text", "Text | Db"},
    {"gc-detect-threshold", CLI_FLAG_VALUE, false, NULL, "GC detection threshold in ms"},
    {"host-sys", CLI_FLAG_VALUE, false, "None", "None or comma list of cpu,mem,disk,network,osrt"},
    {"iterations", CLI_FLAG_VALUE, true, NULL, "Number of steps to trace (> 0)"},
    {"job-id", CLI_FLAG_VALUE, false, "0", "Job id of the target processes"},
    {"l2-cache", CLI_FLAG_BOOL, false, NULL, "Collect L2 cache data"},
    {"log-file", CLI_FLAG_VALUE, true, NULL, "Output directory on the node"},
    {"msprof-tx", CLI_FLAG_BOOL, false, NULL, "Collect mstx/msprof-tx markers"},
    {"mstx-domain-exclude", CLI_FLAG_VALUE, false, NULL, "mstx domains to exclude"},
    {"mstx-domain-include", CLI_FLAG_VALUE, false, NULL, "mstx domains to include"},
    CMD_FLAG_NAMESPACE,
    CLI_OUTCOME_FLAG_NO_WAIT,
    {"op-attr", CLI_FLAG_BOOL, false, NULL, "Collect operator attributes"},
    {"pids", CLI_FLAG_VALUE, false, "0", "Comma list of node pids (0 = all; a container's own pid when unambiguous)"},
    CMD_FLAG_POD,
    {"process-limit", CLI_FLAG_VALUE, false, "0", "Most processes to trace; 0 = every matching process"},
    {"profile-memory", CLI_FLAG_BOOL, false, NULL, "Profile memory"},
    {"profile-start-time", CLI_FLAG_VALUE, false, "0", "Duration trigger start (not used)"},
    {"profiler-level", CLI_FLAG_VALUE, false, "Level0", "Level0 | Level1 | Level2 | Level_none"},
    {"rank-list", CLI_FLAG_VALUE, false, NULL, "Comma list of ranks to trace"},
    {"record-shapes", CLI_FLAG_BOOL, false, NULL, "Record input shapes"},
    {"start-step", CLI_FLAG_VALUE, true, NULL, "First step to trace; -1 = next step"},
    {"sys-interconnection", CLI_FLAG_BOOL, false, NULL, "Collect interconnection data"},
    {"sys-io", CLI_FLAG_BOOL, false, NULL, "Collect I/O data"},
    CLI_OUTCOME_FLAG_WAIT_S,
    {"with-flops", CLI_FLAG_BOOL, false, NULL, "Estimate FLOPs"},
    {"with-modules", CLI_FLAG_BOOL, false, NULL, "Record module hierarchy"},
    {"with-stack", CLI_FLAG_BOOL, false, NULL, "Record call stacks"},
};

static int nputrace_prepare(const struct cli_args *a, struct cmd_req *req, char *err,
                            size_t errcap)
{
    const char *log_file = cli_flags_get(a, "log-file");
    const char *gc = cli_flags_get(a, "gc-detect-threshold");
    const char *inc = cli_flags_get(a, "mstx-domain-include");
    const char *exc = cli_flags_get(a, "mstx-domain-exclude");
    const char *ranks = cli_flags_get(a, "rank-list");
    int64_t job_id, iterations, start_step, v;
    uint64_t u, limit;
    char gc_text[CLI_VAL_F32_LEN] = "None";
    char start_text[24], iter_text[24];
    struct cli_buf pids, host_sys, rank_list;
    int r = -EINVAL;

    cli_buf_init(&pids, CMD_TEXT_MAX);
    cli_buf_init(&host_sys, CMD_TEXT_MAX);
    cli_buf_init(&rank_list, CMD_TEXT_MAX);
    if (cli_val_i64("job-id", cli_flags_get(a, "job-id"), 0, INT64_MAX,
                    "Must be an integer in [0, 9223372036854775807]", &job_id, err, errcap) < 0 ||
        cli_val_int_list("pids", cli_flags_get(a, "pids"), 0, INT32_MAX, &pids, err, errcap) < 0 ||
        cli_val_u64("duration-ms", cli_flags_get(a, "duration-ms"), "Must be a non-negative integer",
                    &u, err, errcap) < 0 ||
        cli_val_i64("iterations", cli_flags_get(a, "iterations"), 1, INT64_MAX,
                    "Must be a positive integer", &iterations, err, errcap) < 0 ||
        cli_val_log_dir("log-file", log_file, true, err, errcap) < 0 ||
        cli_val_u64("profile-start-time", cli_flags_get(a, "profile-start-time"),
                    "Must be a non-negative integer", &u, err, errcap) < 0 ||
        cli_val_i64("start-step", cli_flags_get(a, "start-step"), -1, INT64_MAX,
                    "Must be non-negative integer or -1", &start_step, err, errcap) < 0 ||
        cli_val_i64("process-limit", cli_flags_get(a, "process-limit"), 0, UINT32_MAX,
                    "Must be an integer in [0, 4294967295] (0 = every matching process)", &v, err, errcap) < 0 ||
        cli_outcome_prepare(a, req, err, errcap) < 0 || cmd_pod_prepare(a, req, err, errcap) < 0 ||
        cli_val_enum("activities", cli_flags_get(a, "activities"), activities, err, errcap) < 0 ||
        cli_val_enum("profiler-level", cli_flags_get(a, "profiler-level"), levels, err, errcap) < 0 ||
        cli_val_enum("aic-metrics", cli_flags_get(a, "aic-metrics"), aic_metrics, err, errcap) < 0 ||
        (gc && cli_val_nonneg_f32("gc-detect-threshold", gc, gc_text, sizeof(gc_text), err,
                                  errcap) < 0) ||
        cli_val_enum("data-simplification", cli_flags_get(a, "data-simplification"), bools, err,
                     errcap) < 0 ||
        cli_val_enum("export-type", cli_flags_get(a, "export-type"), export_types, err, errcap) < 0 ||
        cli_val_host_sys("host-sys", cli_flags_get(a, "host-sys"), &host_sys, err, errcap) < 0 ||
        (inc && cli_val_config_str("mstx-domain-include", inc, CLI_VAL_STR_MAX, err, errcap) < 0) ||
        (exc && cli_val_config_str("mstx-domain-exclude", exc, CLI_VAL_STR_MAX, err, errcap) < 0) ||
        (ranks && cli_val_int_list("rank-list", ranks, INT64_MIN, INT64_MAX, &rank_list, err,
                                   errcap) < 0))
        goto out;
    limit = (uint64_t)v;
    if (cli_flags_bool(a, "aligned") &&
        (start_step != -1 || cli_val_i64("aligned-margin", cli_flags_get(a, "aligned-margin"), 1, 1000000,
                                         "Must be an integer in [1, 1000000]", &v, err, errcap) < 0)) {
        if (start_step != -1)
            cli_val_err(err, errcap, "start-step", cli_flags_get(a, "start-step"),
                        "--aligned picks the start step itself: use --start-step -1");
        goto out;
    }

    snprintf(start_text, sizeof(start_text), "%" PRId64, start_step);
    snprintf(iter_text, sizeof(iter_text), "%" PRId64, iterations);
    const struct { const char *key, *value; } lines[] = {
        { CFGKEY_ACTIVITIES_LOG_FILE, log_file },
        { CFGKEY_PROFILE_START_ITERATION, "0" },
        { CFGKEY_PROFILE_START_STEP, start_text },
        { CFGKEY_ACTIVITIES_ITERATIONS, iter_text },
        { CFGKEY_PROFILE_RECORD_SHAPES, cli_flags_bool_text(a, "record-shapes") },
        { CFGKEY_PROFILE_PROFILE_MEMORY, cli_flags_bool_text(a, "profile-memory") },
        { CFGKEY_PROFILE_WITH_STACK, cli_flags_bool_text(a, "with-stack") },
        { CFGKEY_PROFILE_WITH_FLOPS, cli_flags_bool_text(a, "with-flops") },
        { CFGKEY_PROFILE_WITH_MODULES, cli_flags_bool_text(a, "with-modules") },
        { CFGKEY_PROFILE_ACTIVITIES, cli_flags_get(a, "activities") },
        { CFGKEY_PROFILE_ANALYSE, cli_flags_bool_text(a, "analyse") },
        { CFGKEY_PROFILE_ASYNC_MODE, cli_flags_bool_text(a, "async-mode") },
        { CFGKEY_PROFILE_PROFILER_LEVEL, cli_flags_get(a, "profiler-level") },
        { CFGKEY_PROFILE_AIC_METRICS, cli_flags_get(a, "aic-metrics") },
        { CFGKEY_PROFILE_L2_CACHE, cli_flags_bool_text(a, "l2-cache") },
        { CFGKEY_PROFILE_OP_ATTR, cli_flags_bool_text(a, "op-attr") },
        { CFGKEY_PROFILE_MSPROF_TX, cli_flags_bool_text(a, "msprof-tx") },
        { CFGKEY_PROFILE_GC_DETECT_THRESHOLD, gc_text },
        { CFGKEY_PROFILE_DATA_SIMPLIFICATION, cli_flags_get(a, "data-simplification") },
        { CFGKEY_PROFILE_EXPORT_TYPE, cli_flags_get(a, "export-type") },
        { CFGKEY_PROFILE_HOST_SYS, cli_buf_str(&host_sys) },
        { CFGKEY_PROFILE_SYS_IO, cli_flags_bool_text(a, "sys-io") },
        { CFGKEY_PROFILE_SYS_INTERCONNECTION, cli_flags_bool_text(a, "sys-interconnection") },
        { CFGKEY_PROFILE_MSTX_DOMAIN_INCLUDE, inc ? inc : "None" },
        { CFGKEY_PROFILE_MSTX_DOMAIN_EXCLUDE, exc ? exc : "None" },
        { CFGKEY_PROFILE_IS_RANK, ranks ? "true" : "false" },
        { CFGKEY_PROFILE_RANK_LIST, ranks ? cli_buf_str(&rank_list) : "None" },
    };
    /* one key per line in the order of docs/design/cli.md#nputrace, '\n'-joined, no trailing newline */
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
        cli_buf_printf(&req->config, "%s%s=%s", i ? "\n" : "", lines[i].key, lines[i].value);
    cmd_build_kineto_body(req, (long long)job_id, cli_buf_str(&pids), (unsigned long long)limit);
    cli_val_path_warnings(log_file, &req->echo);
    cli_buf_printf(&req->echo, "NpuTrace config = \n%s\n", cli_buf_str(&req->config));
    req->log_file = log_file;
    r = req->config.err ? req->config.err : req->body.err;
out:
    cli_buf_fini(&pids);
    cli_buf_fini(&host_sys);
    cli_buf_fini(&rank_list);
    return r;
}

static void nputrace_render(const struct cmd_req *req, const char *reply, size_t len,
                            const cJSON *json, struct cli_buf *out, bool *ret_failed, char *err,
                            size_t errcap)
{
    (void)len;
    cmd_render_reply_line(reply, out);
    cmd_render_matched(json, req->log_file, false, false, out);
    cmd_render_note(json, out);
    cmd_pod_check(req, json, out, ret_failed, err, errcap);
}

/* --aligned (docs/cluster.md §5): read every target's current step, pick one start step all
 * ranks can still reach (the highest current step + --aligned-margin) and send that to all. */
static int nputrace_run_all(struct cmd_req *req, const struct cli_targets *t, FILE *out, FILE *errf)
{
    static const char body[] = "{\"fn\":\"getStatus\"}";
    const struct cli_args *a = req->args;
    size_t n = t->hosts->n, nproc = 0, nfail = 0;
    int64_t top = -1, margin = 0, job_id = 0, limit = 0;
    struct cli_reply *r;
    struct cli_buf cfg, pids;
    char err[512], from[48], to[48];
    int rc = CLI_EXIT_RUNTIME;

    if (!cli_flags_bool(a, "aligned"))
        return CMD_RUN_DEFAULT;
    cli_buf_init(&cfg, CMD_TEXT_MAX);
    cli_buf_init(&pids, CMD_TEXT_MAX);
    (void)cli_val_i64("aligned-margin", cli_flags_get(a, "aligned-margin"), 1, 1000000, "", &margin, err,
                      sizeof(err));
    (void)cli_val_i64("job-id", cli_flags_get(a, "job-id"), 0, INT64_MAX, "", &job_id, err, sizeof(err));
    (void)cli_val_i64("process-limit", cli_flags_get(a, "process-limit"), 0, UINT32_MAX, "", &limit, err,
                      sizeof(err));
    (void)cli_val_int_list("pids", cli_flags_get(a, "pids"), 0, INT32_MAX, &pids, err, sizeof(err));
    r = calloc(n, sizeof(*r));
    if (!r || cli_gather(t, body, sizeof(body) - 1, r) < 0) {
        fprintf(errf, "error: cannot read the targets' current steps (out of memory or threads)\n");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const cJSON *p;
        char esc[sizeof(r[i].err)];
        size_t bad = 0;
        double worst = 0;
        if (r[i].failed) {
            nfail++;
            fprintf(out, "[%s] ERROR: %s\n", t->hosts->v[i], cli_term_str(r[i].err, esc, sizeof(esc)));
            continue;
        }
        cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(r[i].json, "processes")) {
            const cJSON *s = cJSON_GetObjectItemCaseSensitive(p, "current_step");
            if (!cJSON_IsNumber(s) || s->valuedouble < 0)
                continue;
            /* a step is an int32 on the rank (docs/cluster.md): a larger one is a lie, and a
             * double past int64 must not reach a conversion */
            if (!(s->valuedouble <= (double)INT32_MAX)) {
                if (bad++ == 0)
                    worst = s->valuedouble;
                continue;
            }
            nproc++;
            if ((int64_t)s->valuedouble > top)
                top = (int64_t)s->valuedouble;
        }
        if (bad)
            fprintf(out, "[%s] WARNING: %zu processes report a current step past %d (e.g. %g); ignored\n",
                    t->hosts->v[i], bad, INT32_MAX, worst);
    }
    if (nproc == 0) {
        fprintf(errf, "error: --aligned: no process on the %zu reachable hosts reports its current step "
                "(dyno mode, dynamic_profile.step())\n", n - nfail);
        goto out;
    }
    if (top + margin > INT32_MAX) {
        fprintf(errf, "error: --aligned: start step %lld (highest current step %lld + margin %lld) "
                "is past %d, the largest step a rank can reach\n",
                (long long)(top + margin), (long long)top, (long long)margin, INT32_MAX);
        goto out;
    }
    /* Rebuild the config and body with the chosen step in place of -1. */
    snprintf(from, sizeof(from), "%s=-1", CFGKEY_PROFILE_START_STEP);
    snprintf(to, sizeof(to), "%s=%lld", CFGKEY_PROFILE_START_STEP, (long long)(top + margin));
    const char *c = cli_buf_str(&req->config), *at = strstr(c, from);
    if (!at) {
        fprintf(errf, "error: --aligned: no %s line in the config\n", from);
        goto out;
    }
    cli_buf_append(&cfg, c, (size_t)(at - c));
    cli_buf_puts(&cfg, to);
    cli_buf_puts(&cfg, at + strlen(from));
    req->config.len = 0;
    cli_buf_append(&req->config, cli_buf_str(&cfg), cfg.len);
    req->body.len = 0;
    cmd_build_kineto_body(req, (long long)job_id, cli_buf_str(&pids), (unsigned long long)limit);
    if (req->body.err || req->config.err || req->body.len > RPC_REQ_MAX) {
        fprintf(errf, "error: --aligned: request too large\n");
        goto out;
    }
    fprintf(out, "Aligned start step: %lld (highest current step %lld over %zu processes on %zu hosts, margin %lld)\n",
            (long long)(top + margin), (long long)top, nproc, n - nfail, (long long)margin);
    fflush(out);
    rc = CMD_RUN_DEFAULT;
out:
    if (r)
        cli_gather_fini(r, n);
    free(r);
    cli_buf_fini(&cfg);
    cli_buf_fini(&pids);
    return rc;
}

static void nputrace_run_host(const struct cmd_req *req, const char *target, uint16_t port, int timeout_s,
                              struct cli_buf *out, bool *ret_failed, char *err, size_t errcap)
{
    cli_outcome_run_host(req, target, port, timeout_s, out, ret_failed, err, errcap, nputrace_render);
}

const struct cli_cmd cmd_nputrace = {
    .name = "nputrace",
    .about = "Trace the registered processes with the Ascend profiler for some steps",
    .flags = nputrace_flags,
    .nflags = sizeof(nputrace_flags) / sizeof(nputrace_flags[0]),
    .prepare = nputrace_prepare,
    .render = nputrace_render,
    .run_all = nputrace_run_all,
    .run_host = nputrace_run_host,
};
