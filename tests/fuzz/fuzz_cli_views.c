/* fuzz_cli_views: dyno's multi-host views on hostile replies — the status table and its
 * --json, the `steps` merge, `nputrace --aligned`, `doctor`, and the default fan-out
 * (npu-monitor, version) — run through cli_main against three fake hosts whose replies are the
 * input (cli_fake_transport.h). Invariants: no fault or sanitizer report, and nothing printed
 * carries a terminal control byte (ESC, BEL, CR, DEL, C1) from a reply; newline and tab are
 * layout. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli_fake_transport.h"
#include "common/log.h"

const char *const fuzz_seeds[] = {
    "0{\"processes\":[{\"pid\":1,\"npumonitor\":\"\\u001b[31m\",\"current_step\":5}]}\x01{\"ranks\":[{\"pid\":1,\"rank\":0,\"steps\":[[5,0,100,1,1,1,1]]}]}",
    "1{\"processes\":[{\"pid\":1e300,\"current_step\":1e300,\"last_poll_age_ms\":-1e300}]}\x01{\"ranks\":[]}",
    "2{\"ranks\":[{\"pid\":1,\"rank\":0,\"job_id\":1e300,\"steps\":[[1,0,100,50,20,5,5],[2,0,300,50,20,5,5],[3,0,100,50,20,5,5]]},{\"pid\":2,\"rank\":1,\"steps\":[[1,0,100,50,20,5,5],[2,0,100,50,20,5,5],[3,0,100,50,20,5,5]]}]}",
    "2{\"ranks\":[{\"pid\":1,\"rank\":0,\"steps\":[[1,0,100,50,20,5,5,0,20,\"none\"],[2,0,100,50,20,5,5,0,20,\"none\"],"
    "[3,0,100,50,20,5,5,0,20,\"none\"]]},{\"pid\":2,\"rank\":1,\"steps\":[[1,0,100,50,29,5,5,9,20,\"measured\"],"
    "[2,0,100,50,29,5,5,30,20,\"measured\"],[3,0,100,50,29,5,5,9,20,\"\\u001b[31m\"]]},{\"pid\":3,\"rank\":2,"
    "\"steps\":[[1,0,100,60,20,5,5,0,20,7],[2,0,100,60,20,5,5,0,20],[3,0,100,60,20,5,5,0,20,null,1]]}]}",
    "3{\"status\":\"\\u0007old\"}",
    "4{\"processes\":[{\"pid\":1,\"current_step\":2147483640}]}\x01{\"commandStatus\":\"effective\",\"processesMatched\":[1]}",
    "5{\"processes\":[{\"pid\":1,\"job_id\":3,\"last_poll_age_ms\":10}],\"npumonitor\":\"\\r\\nforged\"}",
    "6{\"commandStatus\":\"refused\",\"reason\":\"a\\u001b]0;t\\u0007\\u009b\"}",
    "7{\"version\":\"\\u001bc\"}\x01not json\x01",
};
const size_t fuzz_nseeds = sizeof(fuzz_seeds) / sizeof(fuzz_seeds[0]);

static int has_control(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f || (c == 0xc2 && i + 1 < n && (unsigned char)s[i + 1] >= 0x80 &&
                                                      (unsigned char)s[i + 1] < 0xa0))
            return 1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct fake_replies f = { .mu = PTHREAD_MUTEX_INITIALIZER };
    static const struct rpc_transport t = { fake_call, &f };
    static char *const views[][8] = {
        { "status", NULL },
        { "status", "--json", NULL },
        { "steps", "--min-ranks", "1", "--min-steps", "1", NULL },
        { "steps", "--json", NULL },
        { "nputrace", "--start-step", "-1", "--aligned", "--iterations", "1", "--log-file", "/tmp/fuzz_cli_views" },
        { "doctor", NULL },
        { "npu-monitor", "--npu-monitor-start", "--mspti-activity-kind", "Kernel", NULL },
        { "version", NULL },
    };
    char *argv[16] = { "dyno", "--hostname", "unix:/h0,unix:/h1,unix:/h2", "--timeout-s", "5" };
    int argc = 5;
    char *outbuf = NULL, *errbuf = NULL;
    size_t outlen = 0, errlen = 0;

    log_set_level(LOG_LVL_FATAL);
    if (size == 0)
        return 0;
    const size_t v = data[0] % (sizeof(views) / sizeof(views[0]));
    for (int i = 0; i < 8 && views[v][i]; i++)
        argv[argc++] = views[v][i];
    argv[argc] = NULL;
    fake_split(&f, (const char *)data + 1, size - 1);
    rpc_set_transport(&t);
    FILE *out = open_memstream(&outbuf, &outlen), *err = open_memstream(&errbuf, &errlen);
    if (!out || !err)
        abort();
    (void)cli_main(argc, argv, out, err);
    fclose(out);
    fclose(err);
    rpc_set_transport(NULL);
    if (has_control(outbuf, outlen) || has_control(errbuf, errlen)) {
        fprintf(stderr, "fuzz_cli_views: a control byte reached the output:\n%s\n%s\n", outbuf, errbuf);
        abort();
    }
    free(outbuf);
    free(errbuf);
    return 0;
}
