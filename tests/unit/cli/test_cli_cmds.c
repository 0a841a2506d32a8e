/* test_cli_cmds: config text of every subcommand byte-exact, request body layout and
 * escaping (round trip through cJSON), and every validation row of docs/design/cli.md#validation through
 * cli_main — exit code 2, the exact stderr line, and no connection to a listening socket. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"

static char tmpdir[64];
static char regfile[96];

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/cli_cmdsXXXXXX");
    if (!mkdtemp(tmpdir))
        return -1;
    snprintf(regfile, sizeof(regfile), "%s/file", tmpdir);
    FILE *f = fopen(regfile, "w");
    if (!f)
        return -1;
    fclose(f);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(regfile);
    rmdir(tmpdir);
    return 0;
}

/* Parse `args` (NULL-terminated, subcommand flags only) for `cmd` and prepare the request. */
static int prepare(const char *cmd_name, const char *const *args, struct cmd_req *req, char *err,
                   size_t errcap)
{
    const struct cli_cmd *cmd = cli_find_cmd(cmd_name);
    char *argv[64];
    int argc = 0;
    argv[argc++] = (char *)"dyno";
    for (; *args; args++)
        argv[argc++] = (char *)*args;
    struct cli_args a;
    assert_non_null(cmd);
    int r = cli_flags_parse(cmd->flags, cmd->nflags, argc, argv, 1, false, &a, NULL, err, errcap);
    if (r)
        return r;
    return cmd->prepare(&a, req, err, errcap);
}

static void config_is(const char *cmd, const char *const *args, const char *want)
{
    struct cmd_req req;
    char err[4096] = "";
    cmd_req_init(&req);
    if (prepare(cmd, args, &req, err, sizeof(err)) != 0)
        fail_msg("prepare failed: %s", err);
    assert_string_equal(cli_buf_str(&req.config), want);
    cmd_req_fini(&req);
}

static void test_npu_monitor_config(void **state)
{
    (void)state;
    const char *none[] = {NULL};
    config_is("npu-monitor", none,
              "NPU_MONITOR_START=false\nNPU_MONITOR_STOP=false\nREPORT_INTERVAL_S=60\nDURATION=0\n"
              "MSPTI_ACTIVITY_KIND=Marker\nNPU_MONITOR_LOG_FILE=\nNPU_MONITOR_EXPORT_TYPE=DB\n"
              "JSONL_ROTATE_LOG_LINES=\nJSONL_ROTATE_LOG_FILES=\nNPU_MONITOR_FILTER=");
    const char *all[] = {"--npu-monitor-start", "--npu-monitor-stop", "--report-interval-s=0",
                         "--duration", "0.5", "--mspti-activity-kind", "Kernel, API",
                         "--log-file", tmpdir, "--export-type", "Jsonl",
                         "--json-rotate-log-lines", " 1000 ", "--json-rotate-log-files", "-1",
                         "--filter", "Kernel:MatMul;", NULL};
    char want[1024];
    snprintf(want, sizeof(want),
             "NPU_MONITOR_START=true\nNPU_MONITOR_STOP=true\nREPORT_INTERVAL_S=0\nDURATION=0.5\n"
             "MSPTI_ACTIVITY_KIND=Kernel, API\nNPU_MONITOR_LOG_FILE=%s\nNPU_MONITOR_EXPORT_TYPE=Jsonl\n"
             "JSONL_ROTATE_LOG_LINES=1000\nJSONL_ROTATE_LOG_FILES=-1\nNPU_MONITOR_FILTER=Kernel:MatMul;",
             tmpdir);
    config_is("npu-monitor", all, want);
    const char *dur[] = {"--duration", "1e-7", "--json-rotate-log-files", "2", NULL};
    config_is("npu-monitor", dur,
              "NPU_MONITOR_START=false\nNPU_MONITOR_STOP=false\nREPORT_INTERVAL_S=60\n"
              "DURATION=0.0000001\nMSPTI_ACTIVITY_KIND=Marker\nNPU_MONITOR_LOG_FILE=\n"
              "NPU_MONITOR_EXPORT_TYPE=DB\nJSONL_ROTATE_LOG_LINES=\nJSONL_ROTATE_LOG_FILES=2\n"
              "NPU_MONITOR_FILTER=");
}

static void test_npu_monitor_body(void **state)
{
    (void)state;
    struct cmd_req req;
    char err[256];
    const char *none[] = {NULL};
    cmd_req_init(&req);
    assert_int_equal(prepare("npu-monitor", none, &req, err, sizeof(err)), 0);
    /* every matching process by default (the registry cap is sent), and a random
     * client_token the outcomes are read back with */
    char want[1024];
    snprintf(want, sizeof(want),
             "\n{\n    \"fn\": \"setKinetOnDemandRequest\",\n    \"config\": \""
             "NPU_MONITOR_START=false\\nNPU_MONITOR_STOP=false\\nREPORT_INTERVAL_S=60\\n"
             "DURATION=0\\nMSPTI_ACTIVITY_KIND=Marker\\nNPU_MONITOR_LOG_FILE=\\n"
             "NPU_MONITOR_EXPORT_TYPE=DB\\nJSONL_ROTATE_LOG_LINES=\\n"
             "JSONL_ROTATE_LOG_FILES=\\nNPU_MONITOR_FILTER=\",\n    \"job_id\": 0,\n"
             "    \"pids\": [0],\n    \"process_limit\": 4096,\n    \"client_token\": \"%s\"\n}",
             req.client_token);
    assert_int_equal(strlen(req.client_token), 16);
    assert_true(strspn(req.client_token, "0123456789abcdef") == 16);
    assert_string_equal(cli_buf_str(&req.body), want);
    assert_string_equal(cli_buf_str(&req.echo),
                        "Npu monitor config = \nNPU_MONITOR_START=false\nNPU_MONITOR_STOP=false\n"
                        "REPORT_INTERVAL_S=60\nDURATION=0\nMSPTI_ACTIVITY_KIND=Marker\n"
                        "NPU_MONITOR_LOG_FILE=\nNPU_MONITOR_EXPORT_TYPE=DB\nJSONL_ROTATE_LOG_LINES=\n"
                        "JSONL_ROTATE_LOG_FILES=\nNPU_MONITOR_FILTER=\n");
    assert_true(req.wait_s == 5.0);
    cmd_req_fini(&req);
    /* --no-wait: nothing to wait for, but a token, so the daemon names the processes
     * --process-limit skipped; --process-limit is sent as given */
    const char *nw[] = {"--no-wait", "--process-limit", "2", NULL};
    cmd_req_init(&req);
    assert_int_equal(prepare("npu-monitor", nw, &req, err, sizeof(err)), 0);
    assert_int_equal(strlen(req.client_token), 16);
    assert_true(req.wait_s < 0);
    assert_non_null(strstr(cli_buf_str(&req.body), "\"process_limit\": 2,\n"));
    cmd_req_fini(&req);
    const char *bad[] = {"--wait-s", "-1", NULL};
    cmd_req_init(&req);
    assert_int_equal(prepare("npu-monitor", bad, &req, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "wait-s"));
    cmd_req_fini(&req);
    const char *badl[] = {"--process-limit", "5000", NULL};
    cmd_req_init(&req);
    assert_int_equal(prepare("npu-monitor", badl, &req, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "process-limit"));
    cmd_req_fini(&req);
}

static const char nputrace_defaults_tail[] =
    "PROFILE_RECORD_SHAPES=false\nPROFILE_PROFILE_MEMORY=false\nPROFILE_WITH_STACK=false\n"
    "PROFILE_WITH_FLOPS=false\nPROFILE_WITH_MODULES=false\nPROFILE_ACTIVITIES=CPU,NPU\n"
    "PROFILE_ANALYSE=false\nPROFILE_ASYNC_MODE=false\nPROFILE_PROFILER_LEVEL=Level0\n"
    "PROFILE_AIC_METRICS=AiCoreNone\nPROFILE_L2_CACHE=false\nPROFILE_OP_ATTR=false\n"
    "PROFILE_MSPROF_TX=false\nPROFILE_GC_DETECT_THRESHOLD=None\nPROFILE_DATA_SIMPLIFICATION=true\n"
    "PROFILE_EXPORT_TYPE=Text\nPROFILE_HOST_SYS=None\nPROFILE_SYS_IO=false\n"
    "PROFILE_SYS_INTERCONNECTION=false\nPROFILE_MSTX_DOMAIN_INCLUDE=None\n"
    "PROFILE_MSTX_DOMAIN_EXCLUDE=None\nPROFILE_IS_RANK=false\nPROFILE_RANK_LIST=None";

static void test_nputrace_config(void **state)
{
    (void)state;
    char want[4096];
    const char *req_only[] = {"--log-file", tmpdir, "--iterations", "2", "--start-step", "-1", NULL};
    snprintf(want, sizeof(want),
             "ACTIVITIES_LOG_FILE=%s\nPROFILE_START_ITERATION=0\nPROFILE_START_STEP=-1\n"
             "ACTIVITIES_ITERATIONS=2\n%s", tmpdir, nputrace_defaults_tail);
    config_is("nputrace", req_only, want);

    const char *all[] = {"--log-file", tmpdir, "--iterations", "5", "--start-step", "10",
                         "--job-id", "7", "--pids", "1, 2", "--duration-ms", "9",
                         "--profile-start-time", "4", "--process-limit", "8", "--record-shapes",
                         "--profile-memory", "--with-stack", "--with-flops", "--with-modules",
                         "--activities", "NPU", "--profiler-level", "Level2", "--aic-metrics",
                         "MemoryUB", "--analyse", "--async-mode", "--l2-cache", "--op-attr",
                         "--msprof-tx", "--gc-detect-threshold", "0.1", "--data-simplification",
                         "false", "--export-type", "Db", "--host-sys", "cpu, mem", "--sys-io",
                         "--sys-interconnection", "--mstx-domain-include", "d1,d2",
                         "--mstx-domain-exclude", "d3", "--rank-list", " 0,3 ,-1", NULL};
    snprintf(want, sizeof(want),
             "ACTIVITIES_LOG_FILE=%s\nPROFILE_START_ITERATION=0\nPROFILE_START_STEP=10\n"
             "ACTIVITIES_ITERATIONS=5\nPROFILE_RECORD_SHAPES=true\nPROFILE_PROFILE_MEMORY=true\n"
             "PROFILE_WITH_STACK=true\nPROFILE_WITH_FLOPS=true\nPROFILE_WITH_MODULES=true\n"
             "PROFILE_ACTIVITIES=NPU\nPROFILE_ANALYSE=true\nPROFILE_ASYNC_MODE=true\n"
             "PROFILE_PROFILER_LEVEL=Level2\nPROFILE_AIC_METRICS=MemoryUB\nPROFILE_L2_CACHE=true\n"
             "PROFILE_OP_ATTR=true\nPROFILE_MSPROF_TX=true\nPROFILE_GC_DETECT_THRESHOLD=0.1\n"
             "PROFILE_DATA_SIMPLIFICATION=false\nPROFILE_EXPORT_TYPE=Db\nPROFILE_HOST_SYS=cpu,mem\n"
             "PROFILE_SYS_IO=true\nPROFILE_SYS_INTERCONNECTION=true\n"
             "PROFILE_MSTX_DOMAIN_INCLUDE=d1,d2\nPROFILE_MSTX_DOMAIN_EXCLUDE=d3\n"
             "PROFILE_IS_RANK=true\nPROFILE_RANK_LIST=0,3,-1", tmpdir);
    config_is("nputrace", all, want);

    struct cmd_req req;
    char err[256];
    cmd_req_init(&req);
    assert_int_equal(prepare("nputrace", all, &req, err, sizeof(err)), 0);
    const char *tail = strstr(cli_buf_str(&req.body), "\",\n    \"job_id\"");
    assert_non_null(tail);
    char want_tail[256];
    snprintf(want_tail, sizeof(want_tail), "\",\n    \"job_id\": 7,\n    \"pids\": [1,2],\n    \"process_limit\": 8,\n"
             "    \"client_token\": \"%s\"\n}", req.client_token);
    assert_string_equal(tail, want_tail);
    cmd_req_fini(&req);
}

static void test_body_escaping(void **state)
{
    (void)state;
    char dir[128];
    snprintf(dir, sizeof(dir), "%s/a\"b\\c", tmpdir);
    const char *args[] = {"--log-file", dir, "--iterations", "1", "--start-step", "0", NULL};
    struct cmd_req req;
    char err[256];
    cmd_req_init(&req);
    assert_int_equal(prepare("nputrace", args, &req, err, sizeof(err)), 0);
    cJSON *j = cJSON_ParseWithLength(cli_buf_str(&req.body), req.body.len);
    assert_non_null(j);
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(j, "config");
    assert_true(cJSON_IsString(cfg));
    assert_string_equal(cfg->valuestring, cli_buf_str(&req.config));
    char first[256];
    snprintf(first, sizeof(first), "ACTIVITIES_LOG_FILE=%s\n", dir);
    assert_memory_equal(cfg->valuestring, first, strlen(first));
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(j, "fn")->valuestring,
                        "setKinetOnDemandRequest");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "pids")), 1);
    /* Upstream path warnings for '"' and '\\'. */
    assert_non_null(strstr(cli_buf_str(&req.echo), "WARNING: The path contains invalid character: \"\n"));
    assert_non_null(strstr(cli_buf_str(&req.echo), "WARNING: The path contains invalid character: \\\n"));
    cJSON_Delete(j);
    cmd_req_fini(&req);
}

static void test_gputrace_config(void **state)
{
    (void)state;
    const char *dur[] = {"--log-file", "/tmp/t.json", "--duration-ms", "800",
                         "--profile-start-time", "123", "--record-shapes", "--with-stacks", NULL};
    config_is("gputrace", dur,
              "ACTIVITIES_LOG_FILE=/tmp/t.json\nPROFILE_START_TIME=123\nACTIVITIES_DURATION_MSECS=800\n"
              "PROFILE_REPORT_INPUT_SHAPES=true\nPROFILE_WITH_STACK=true\nPROFILE_WITH_FLOPS=false\n"
              "PROFILE_WITH_MODULES=false");
    const char *mem[] = {"--log-file", "/tmp/t.json", "--profile-memory", "--with-flops", NULL};
    config_is("gputrace", mem,
              "ACTIVITIES_LOG_FILE=/tmp/t.json\nPROFILE_START_TIME=0\nACTIVITIES_DURATION_MSECS=500\n"
              "PROFILE_REPORT_INPUT_SHAPES=false\nPROFILE_PROFILE_MEMORY=true\nPROFILE_MEMORY=true\n"
              "PROFILE_MEMORY_DURATION_MSECS=500\nPROFILE_WITH_STACK=false\nPROFILE_WITH_FLOPS=true\n"
              "PROFILE_WITH_MODULES=false");
    const char *it[] = {"--log-file", "/tmp/t.json", "--iterations", "4",
                        "--profile-start-iteration-roundup", "10", "--with-modules", NULL};
    config_is("gputrace", it,
              "ACTIVITIES_LOG_FILE=/tmp/t.json\nPROFILE_START_ITERATION=0\n"
              "PROFILE_START_ITERATION_ROUNDUP=10\nACTIVITIES_ITERATIONS=4\n"
              "PROFILE_REPORT_INPUT_SHAPES=false\nPROFILE_WITH_STACK=false\nPROFILE_WITH_FLOPS=false\n"
              "PROFILE_WITH_MODULES=true");
}

static void test_trace_paths(void **state)
{
    (void)state;
    struct cli_buf b;
    cli_buf_init(&b, 1024);
    cmd_trace_path("/o/a.json.json", 42, false, &b);
    assert_string_equal(cli_buf_str(&b), "/o/a_42.json_42.json");
    b.len = 0;
    cmd_trace_path("/o/dir", 42, false, &b);
    assert_string_equal(cli_buf_str(&b), "/o/dir");
    b.len = 0;
    cmd_trace_path("/o/x.pt.trace.json", 7, true, &b);
    assert_string_equal(cli_buf_str(&b), "/o/x_7.pt.trace.json");
    b.len = 0;
    cmd_trace_path("/o/x.json.gz", 7, true, &b);
    assert_string_equal(cli_buf_str(&b), "/o/x_7.json.gz");
    cli_buf_fini(&b);
}

/* --- validation rows through cli_main ------------------------------------------------ */

struct run {
    int rc;
    char *out;
    char *err;
};

static int listen_fd = -1;
static int listen_port;

static void open_listener(void)
{
    listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    assert_true(listen_fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    assert_int_equal(bind(listen_fd, (struct sockaddr *)&sa, sl), 0);
    assert_int_equal(listen(listen_fd, 8), 0);
    assert_int_equal(getsockname(listen_fd, (struct sockaddr *)&sa, &sl), 0);
    listen_port = ntohs(sa.sin_port);
}

/* Run dyno --hostname 127.0.0.1 --port <listener> <args...>. */
static struct run run_cli(const char *const *args)
{
    char port[16];
    snprintf(port, sizeof(port), "%d", listen_port);
    char *argv[80];
    int argc = 0;
    argv[argc++] = (char *)"dyno";
    if (strcmp(args[0], "--hostname") != 0) {
        argv[argc++] = (char *)"--hostname";
        argv[argc++] = (char *)"127.0.0.1";
        argv[argc++] = (char *)"--port";
        argv[argc++] = port;
    }
    for (; *args; args++)
        argv[argc++] = (char *)*args;
    argv[argc] = NULL;
    struct run r;
    size_t ol, el;
    FILE *out = open_memstream(&r.out, &ol);
    FILE *err = open_memstream(&r.err, &el);
    r.rc = cli_main(argc, argv, out, err);
    fclose(out);
    fclose(err);
    return r;
}

static void no_connection(void)
{
    int c = accept(listen_fd, NULL, NULL);
    if (c >= 0)
        close(c);
    assert_true(c < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
}

/* args ... NULL, then the exact stderr line (without newline). */
static void usage_row(const char *want, const char *const *args)
{
    struct run r = run_cli(args);
    char line[8192];
    snprintf(line, sizeof(line), "%s\n", want);
    if (r.rc != CLI_EXIT_USAGE || strcmp(r.err, line) != 0)
        fail_msg("args '%s ...': rc %d, stderr '%s', want '%s'", args[0], r.rc, r.err, want);
    no_connection();
    free(r.out);
    free(r.err);
}

#define ROW(want, ...) do { const char *a_[] = {__VA_ARGS__, NULL}; usage_row(want, a_); } while (0)
#define NT "nputrace", "--log-file", tmpdir, "--iterations", "1", "--start-step", "0"
#define INV(v, f, reason) "error: invalid value '" v "' for '--" f "': " reason

static void test_validation_rows(void **state)
{
    (void)state;
    char big[1100], msg[4096], port[16];
    memset(big, 'a', 1025);
    big[1025] = '\0';
    open_listener();
    snprintf(port, sizeof(port), "%d", listen_port);

    ROW(INV("-1", "duration", "Must be a positive number"), "npu-monitor", "--duration", "-1");
    ROW(INV("nan", "duration", "Must be a positive number"), "npu-monitor", "--duration", "nan");
    ROW(INV("inf", "duration", "Must be a positive number"), "npu-monitor", "--duration=inf");
    ROW(INV("1e39", "duration", "Must be a positive number"), "npu-monitor", "--duration", "1e39");
    ROW(INV("x", "duration", "Must be a positive number"), "npu-monitor", "--duration", "x");
    ROW(INV("Marker,Foo", "mspti-activity-kind", "Invalid MSPTI activity kind: Foo, possible "
            "values: Marker, Kernel, API, Hccl, Memory, MemSet, MemCpy, Communication, AclAPI, "
            "NodeAPI, RuntimeAPI"), "npu-monitor", "--mspti-activity-kind", "Marker,Foo");
    snprintf(msg, sizeof(msg), "error: invalid value '%s' for '--mspti-activity-kind': The input "
             "string is too long, max allowed: 1024", big);
    ROW(msg, "npu-monitor", "--mspti-activity-kind", big);
    snprintf(msg, sizeof(msg), "error: invalid value '%s' for '--filter': longer than 1024 bytes", big);
    ROW(msg, "npu-monitor", "--filter", big);
    ROW(INV("Kernel", "filter", "item 'Kernel' must have the form Kind:Name[,Name...]"),
        "npu-monitor", "--filter", "Kernel");
    ROW(INV("Foo:x", "filter", "unknown activity kind 'Foo' (possible values: Marker, Kernel, "
            "API, Hccl, Memory, MemSet, MemCpy, Communication, AclAPI, NodeAPI, RuntimeAPI)"),
        "npu-monitor", "--filter", "Foo:x");
    ROW(INV("Kernel:a,", "filter", "empty operator name in item 'Kernel:a,'"), "npu-monitor",
        "--filter", "Kernel:a,");
    ROW(INV("99", "json-rotate-log-lines", "Must be an integer in [100, 500000]"), "npu-monitor",
        "--json-rotate-log-lines", "99");
    ROW(INV("500001", "json-rotate-log-lines", "Must be an integer in [100, 500000]"),
        "npu-monitor", "--json-rotate-log-lines", "500001");
    ROW(INV("1", "json-rotate-log-files", "Must be -1 or an integer greater than or equal to 2"),
        "npu-monitor", "--json-rotate-log-files", "1");
    ROW(INV("-2", "json-rotate-log-files", "Must be -1 or an integer greater than or equal to 2"),
        "npu-monitor", "--json-rotate-log-files", "-2");
    ROW(INV("Json", "export-type", "possible values: DB, Jsonl"), "npu-monitor", "--export-type", "Json");
    /* --pod / --namespace: names by the contract's rule (docs/cli.md#selecting-processes-by-pod) */
    ROW(INV("a/b", "pod", "Must be a name of 1-253 characters [A-Za-z0-9._-], starting and ending with a letter "
            "or digit"), "npu-monitor", "--pod", "a/b");
    ROW(INV("-ml", "namespace", "Must be a name of 1-63 characters [A-Za-z0-9._-], starting and ending with a "
            "letter or digit"), NT, "--namespace", "-ml");
    ROW(INV("x y", "pod", "Must be a name of 1-253 characters [A-Za-z0-9._-], starting and ending with a letter "
            "or digit"), "status", "--pod", "x y");
    ROW(INV("4294967296", "report-interval-s", "Must be an integer in [0, 4294967295]"),
        "npu-monitor", "--report-interval-s", "4294967296");
    snprintf(msg, sizeof(msg), "error: invalid value '%s' for '--log-file': --log-file must be a "
             "valid directory!", regfile);
    ROW(msg, "npu-monitor", "--log-file", regfile);
    ROW(msg, "nputrace", "--log-file", regfile, "--iterations", "1", "--start-step", "0");
    ROW(INV("", "log-file", "--log-file must be a valid directory!"), "nputrace", "--log-file", "",
        "--iterations", "1", "--start-step", "0");
    ROW(INV("/tmp/a=b", "log-file", "must not contain '=' or line breaks"), "npu-monitor",
        "--log-file", "/tmp/a=b");
    ROW(INV("/tmp/a\nb", "log-file", "must not contain '=' or line breaks"), "gputrace",
        "--log-file", "/tmp/a\nb");
    ROW(INV("1,a", "pids", "Must be a comma-separated list of integers"), NT, "--pids", "1,a");
    ROW(INV("1,,2", "pids", "Must be a comma-separated list of integers"), "gputrace",
        "--log-file", "x", "--pids", "1,,2");
    ROW(INV("0,x", "rank-list", "Must be a comma-separated list of integers"), NT, "--rank-list", "0,x");
    ROW(INV("-2", "start-step", "Must be non-negative integer or -1"), "nputrace", "--log-file",
        tmpdir, "--iterations", "1", "--start-step", "-2");
    ROW(INV("0", "iterations", "Must be a positive integer"), "nputrace", "--log-file", tmpdir,
        "--iterations", "0", "--start-step", "0");
    ROW(INV("-5", "gc-detect-threshold", "Must be a positive number"), NT, "--gc-detect-threshold", "-5");
    snprintf(msg, sizeof(msg), "error: invalid value '%s' for '--mstx-domain-include': The input "
             "string is too long, max allowed: 1024", big);
    ROW(msg, NT, "--mstx-domain-include", big);
    ROW(INV("a=b", "mstx-domain-exclude", "must not contain '=' or line breaks"), NT,
        "--mstx-domain-exclude", "a=b");
    ROW(INV("gpu", "host-sys", "Invalid host-sys item: gpu, possible values: None, cpu, mem, disk, "
            "network, osrt"), NT, "--host-sys", "gpu");
    ROW(INV("Level3", "profiler-level", "possible values: Level0, Level1, Level2, Level_none"), NT,
        "--profiler-level", "Level3");
    ROW("error: --profile-memory can only be used in duration mode (omit --iterations)",
        "gputrace", "--log-file", "x", "--iterations", "3", "--profile-memory");
    /* Syntax errors. */
    ROW("error: unknown flag '--bogus'", "status", "--bogus");
    ROW("error: flag '--duration' given more than once", "npu-monitor", "--duration", "1",
        "--duration=2");
    ROW("error: a value is required for '--duration' but none was supplied", "npu-monitor", "--duration");
    ROW("error: the required flag '--iterations' was not provided", "nputrace", "--log-file",
        tmpdir, "--start-step", "0");
    ROW("error: flag '--npu-monitor-start' takes no value (got 'yes')", "npu-monitor",
        "--npu-monitor-start=yes");
    /* the list is the command table's: every subcommand, doctor and steps included */
    ROW("error: unknown subcommand 'stat' (doctor, gputrace, npu-monitor, nputrace, status, steps, version)", "stat");
    ROW("--certs-dir must be a valid directory!", "--certs-dir", "/nonexistent/certs", "status");
    ROW(INV("a,,b", "hostname", "empty host name"), "--hostname", "a,,b", "--port", port, "status");
    ROW(INV("/nonexistent/h", "hostfile", "cannot read: No such file or directory"),
        "--hostfile", "/nonexistent/h", "status");
    ROW(INV("0", "parallel", "Must be an integer >= 1"), "--parallel", "0", "status");
    ROW(INV("0", "timeout-s", "Must be an integer >= 1"), "--timeout-s", "0", "status");
    ROW(INV("70000", "port", "Must be an integer in [1, 65535]"), "--hostname", "127.0.0.1",
        "--port", "70000", "status");

    /* Request too large: the log file is free text for gputrace. */
    char *huge = malloc(9001);
    memset(huge, 'p', 9000);
    huge[0] = '/';
    huge[9000] = '\0';
    const char *args[] = {"gputrace", "--log-file", huge, NULL};
    struct run r = run_cli(args);
    assert_int_equal(r.rc, CLI_EXIT_USAGE);
    assert_non_null(strstr(r.err, "error: request too large ("));
    assert_non_null(strstr(r.err, " bytes, limit 8191)\n"));
    no_connection();
    free(r.out);
    free(r.err);
    free(huge);
    close(listen_fd);
}

static void test_help_and_version(void **state)
{
    (void)state;
    open_listener();
    const char *v[] = {"--version", NULL};
    struct run r = run_cli(v);
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, "dyno " MSMON_VERSION "\n");
    free(r.out);
    free(r.err);
    const char *h[] = {"nputrace", "--help", NULL};
    r = run_cli(h);
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "--gc-detect-threshold"));
    assert_non_null(strstr(r.out, "--iterations <V>"));
    free(r.out);
    free(r.err);
    no_connection();
    close(listen_fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_npu_monitor_config), cmocka_unit_test(test_npu_monitor_body),
        cmocka_unit_test(test_nputrace_config),    cmocka_unit_test(test_body_escaping),
        cmocka_unit_test(test_gputrace_config),    cmocka_unit_test(test_trace_paths),
        cmocka_unit_test(test_validation_rows),    cmocka_unit_test(test_help_and_version),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
