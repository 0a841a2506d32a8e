/* fuzz_cli_reply: dyno's side of a reply from a (possibly hostile) daemon — the status report
 * and the config acknowledgements, parsed as JSON and rendered by every command's render
 * (status, version, npu-monitor, nputrace, gputrace). Invariants: no fault, output bounded,
 * and every rendered line ends in '\n' (nothing a daemon sends can glue lines together). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cmd.h"
#include "common/log.h"

const char *const fuzz_seeds[] = {
    "{\"current_step\":-1,\"npumonitor\":\"Uninitialized\",\"nputrace\":\"Uninitialized\",\"processes\":[]}",
    "{\"current_step\":7,\"npumonitor\":\"Running\",\"nputrace\":\"Ready\",\"processes\":[{\"pid\":12,\"rank\":0,\"job_id\":3,\"npumonitor\":\"effective\",\"nputrace\":\"unknown\"}]}",
    "{\"version\":\"0.3.2\"}",
    "{\"processesMatched\":[1,2,3],\"eventProfilersTriggered\":[],\"activityProfilersTriggered\":[1],\"activityProfilersBusy\":0,\"commandStatus\":\"effective\",\"note\":\"x\\ny\"}",
    "{\"processesMatched\":[],\"commandStatus\":\"ineffective\",\"note\":\"no process\"}",
    "{\"processesMatched\":[9223372036854775807,-1,1.5,\"a\"],\"commandStatus\":5}",
};
const size_t fuzz_nseeds = sizeof(fuzz_seeds) / sizeof(fuzz_seeds[0]);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const names[] = { "status", "version", "npu-monitor", "nputrace", "gputrace" };
    log_set_level(LOG_LVL_FATAL);
    char *reply = malloc(size + 1);
    if (!reply)
        return 0;
    memcpy(reply, data, size);
    reply[size] = '\0';
    cJSON *json = cJSON_ParseWithLengthOpts(reply, size, NULL, false);
    if (json) {
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
            const struct cli_cmd *c = cli_find_cmd(names[i]);
            struct cmd_req req;
            struct cli_buf out;
            char err[2048] = "";
            bool failed = false;
            if (!c)
                abort();
            cmd_req_init(&req);
            req.log_file = (i & 1) ? "/tmp/trace/out.json" : "/tmp/mon";
            req.profile_memory = (size & 1) != 0;
            req.fail_on_no_process = (size & 2) != 0;
            cli_buf_init(&out, 1u << 20);
            c->render(&req, reply, size, json, &out, &failed, err, sizeof(err));
            if (!out.err && out.len && cli_buf_str(&out)[out.len - 1] != '\n')
                abort();
            if (!memchr(err, '\0', sizeof(err)))
                abort();
            cli_buf_fini(&out);
            cmd_req_fini(&req);
        }
        cJSON_Delete(json);
    }
    free(reply);
    return 0;
}
