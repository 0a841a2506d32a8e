/* fuzz_cli_argv: dyno's argv parser — global flags, subcommand, each command's flags and
 * their validation and request building — on argument lists from the input (one argument per
 * line), through cli_main with a fake host (cli_fake_transport.h) so nothing leaves the
 * process. Arguments that would wait by design (--watch, certificate directories and their
 * passphrase prompt) are dropped. Invariants: no fault; the exit code is 0, 1 or 2. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli_fake_transport.h"
#include "common/log.h"

const char *const fuzz_seeds[] = {
    "status",
    "--hostname\nunix:/h0,unix:/h1\nstatus\n--json",
    "npu-monitor\n--npu-monitor-start\n--mspti-activity-kind\nKernel,API\n--report-interval-s\n60\n--log-file\n/tmp/x",
    "nputrace\n--start-step\n-1\n--aligned\n--aligned-margin\n1000000\n--iterations\n2147483647\n--log-file\n/tmp/y",
    "nputrace\n--start-step\n9999999999\n--iterations\n1",
    "gputrace\n--log-file\n/tmp/t.json\n--duration-ms\n300\n--pids\n1,2,3",
    "steps\n--last\n129\n--threshold\nnan",
    "--port\n0\n--timeout-s\n-1\nversion",
    "--hostname\nnode[01-99999]\nstatus",
    "--hostfile\n/dev/null\nstatus",
    "doctor\n--pid\n1\n--log-dir\n/tmp",
    "--version",
    "status\n--help",
};
const size_t fuzz_nseeds = sizeof(fuzz_seeds) / sizeof(fuzz_seeds[0]);

#define ARGS_MAX 32

static int blocked(const char *a)
{
    return strstr(a, "watch") || strstr(a, "certs") || strstr(a, "parallel") || strstr(a, "hostfile");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct fake_replies f = { .mu = PTHREAD_MUTEX_INITIALIZER };
    static const struct rpc_transport t = { fake_call, &f };
    static const char reply[] = "{\"commandStatus\":\"effective\",\"processesMatched\":[1],\"processes\":[],\"ranks\":[],\"version\":\"x\"}";
    char *argv[ARGS_MAX + 2] = { "dyno" };
    int argc = 1;
    char *text = malloc(size + 1), *outbuf = NULL;
    size_t outlen = 0;

    log_set_level(LOG_LVL_FATAL);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    for (char *s = text; s && argc <= ARGS_MAX;) {
        char *nl = strchr(s, '\n');
        if (nl)
            *nl = '\0';
        if (!blocked(s))
            argv[argc++] = s;
        s = nl ? nl + 1 : NULL;
    }
    argv[argc] = NULL;
    fake_split(&f, reply, sizeof(reply) - 1);
    rpc_set_transport(&t);
    FILE *out = open_memstream(&outbuf, &outlen);
    if (!out)
        abort();
    int rc = cli_main(argc, argv, out, out);
    fclose(out);
    rpc_set_transport(NULL);
    if (rc < 0 || rc > 2)
        abort();
    free(outbuf);
    free(text);
    return 0;
}
