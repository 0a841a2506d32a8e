/* cmd_gputrace: `dyno gputrace` — upstream dynolog's Kineto trace request, duration or
 * iteration triggered (docs/design/cli.md#gputrace, docs/design/daemon.md). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli_val.h"
#include "cli/cmd.h"
#include "contract/cfgkeys.h"

static const struct cli_flag gputrace_flags[] = {
    {"duration-ms", CLI_FLAG_VALUE, false, "500", "Trace duration in ms (duration mode)"},
    {"fail-on-no-process", CLI_FLAG_BOOL, false, NULL, "Exit 1 when no process matched"},
    {"iterations", CLI_FLAG_VALUE, false, "-1", "Iterations to trace; > 0 selects iteration mode"},
    {"job-id", CLI_FLAG_VALUE, false, "0", "Job id (must equal SLURM_JOB_ID under SLURM)"},
    {"log-file", CLI_FLAG_VALUE, true, NULL, "Trace output file on the node"},
    {"pids", CLI_FLAG_VALUE, false, "0", "Comma list of pids (0 = all)"},
    {"process-limit", CLI_FLAG_VALUE, false, "3", "Max processes to trace"},
    {"profile-memory", CLI_FLAG_BOOL, false, NULL, "Profile memory (duration mode only)"},
    {"profile-start-iteration-roundup", CLI_FLAG_VALUE, false, "1", "Start at a multiple of this iteration"},
    {"profile-start-time", CLI_FLAG_VALUE, false, "0", "Start time, epoch ms (0 = now)"},
    {"record-shapes", CLI_FLAG_BOOL, false, NULL, "Record input shapes"},
    {"with-flops", CLI_FLAG_BOOL, false, NULL, "Estimate FLOPs"},
    {"with-modules", CLI_FLAG_BOOL, false, NULL, "Record module hierarchy"},
    {"with-stacks", CLI_FLAG_BOOL, false, NULL, "Record call stacks"},
};

static int gputrace_prepare(const struct cli_args *a, struct cmd_req *req, char *err,
                            size_t errcap)
{
    const char *log_file = cli_flags_get(a, "log-file");
    bool mem = cli_flags_bool(a, "profile-memory");
    int64_t job_id, iterations, v;
    uint64_t duration, start_time, roundup;
    struct cli_buf pids;
    int r = -EINVAL;

    cli_buf_init(&pids, CMD_TEXT_MAX);
    if (cli_val_i64("job-id", cli_flags_get(a, "job-id"), 0, INT64_MAX,
                    "Must be an integer in [0, 9223372036854775807]", &job_id, err, errcap) < 0 ||
        cli_val_int_list("pids", cli_flags_get(a, "pids"), 0, INT32_MAX, &pids, err, errcap) < 0 ||
        cli_val_u64("duration-ms", cli_flags_get(a, "duration-ms"), "Must be a non-negative integer",
                    &duration, err, errcap) < 0 ||
        cli_val_i64("iterations", cli_flags_get(a, "iterations"), INT64_MIN, INT64_MAX,
                    "Must be an integer", &iterations, err, errcap) < 0 ||
        cli_val_config_str("log-file", log_file, 0, err, errcap) < 0 ||
        cli_val_u64("profile-start-time", cli_flags_get(a, "profile-start-time"),
                    "Must be a non-negative integer", &start_time, err, errcap) < 0 ||
        cli_val_u64("profile-start-iteration-roundup",
                    cli_flags_get(a, "profile-start-iteration-roundup"),
                    "Must be a non-negative integer", &roundup, err, errcap) < 0 ||
        cli_val_i64("process-limit", cli_flags_get(a, "process-limit"), 0, UINT32_MAX,
                    "Must be an integer in [0, 4294967295]", &v, err, errcap) < 0)
        goto out;
    if (mem && iterations > 0) {
        snprintf(err, errcap,
                 "error: --profile-memory can only be used in duration mode (omit --iterations)");
        goto out;
    }

    cli_buf_printf(&req->config, CFGKEY_ACTIVITIES_LOG_FILE "=%s\n", log_file);
    if (iterations > 0) {
        cli_buf_printf(&req->config,
                       CFGKEY_PROFILE_START_ITERATION "=0\n" CFGKEY_PROFILE_START_ITERATION_ROUNDUP
                       "=%" PRIu64 "\n" CFGKEY_ACTIVITIES_ITERATIONS "=%" PRId64 "\n",
                       roundup, iterations);
    } else {
        cli_buf_printf(&req->config,
                       CFGKEY_PROFILE_START_TIME "=%" PRIu64 "\n" CFGKEY_ACTIVITIES_DURATION_MSECS
                       "=%" PRIu64 "\n",
                       start_time, duration);
    }
    cli_buf_printf(&req->config, CFGKEY_PROFILE_REPORT_INPUT_SHAPES "=%s\n",
                   cli_flags_bool_text(a, "record-shapes"));
    if (mem)
        cli_buf_printf(&req->config,
                       CFGKEY_PROFILE_PROFILE_MEMORY "=true\n" CFGKEY_PROFILE_MEMORY "=true\n"
                       CFGKEY_PROFILE_MEMORY_DURATION_MSECS "=%" PRIu64 "\n",
                       duration);
    cli_buf_printf(&req->config,
                   CFGKEY_PROFILE_WITH_STACK "=%s\n" CFGKEY_PROFILE_WITH_FLOPS "=%s\n"
                   CFGKEY_PROFILE_WITH_MODULES "=%s",
                   cli_flags_bool_text(a, "with-stacks"), cli_flags_bool_text(a, "with-flops"),
                   cli_flags_bool_text(a, "with-modules"));
    cmd_build_kineto_body(req, (long long)job_id, cli_buf_str(&pids), (unsigned long long)v);
    cli_buf_printf(&req->echo, "Kineto config = \n%s\n", cli_buf_str(&req->config));
    req->log_file = log_file;
    req->profile_memory = mem;
    req->fail_on_no_process = cli_flags_bool(a, "fail-on-no-process");
    r = req->config.err ? req->config.err : req->body.err;
out:
    cli_buf_fini(&pids);
    return r;
}

static void gputrace_render(const struct cmd_req *req, const char *reply, size_t len,
                            const cJSON *json, struct cli_buf *out, bool *ret_failed, char *err,
                            size_t errcap)
{
    cli_buf_printf(out, "response length = %zu\n", len);
    cmd_render_reply_line(reply, out);
    cli_buf_puts(out, "\n");
    int n = cmd_render_matched(json, req->log_file, true, req->profile_memory, out);
    if (req->fail_on_no_process && n <= 0) {
        *ret_failed = true;
        snprintf(err, errcap, "No processes were matched (--fail-on-no-process)");
    }
}

const struct cli_cmd cmd_gputrace = {
    .name = "gputrace",
    .about = "Trace Kineto (PyTorch) processes, upstream dynolog's gputrace",
    .flags = gputrace_flags,
    .nflags = sizeof(gputrace_flags) / sizeof(gputrace_flags[0]),
    .prepare = gputrace_prepare,
    .render = gputrace_render,
};
