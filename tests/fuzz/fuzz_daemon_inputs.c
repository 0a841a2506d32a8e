/* fuzz_daemon_inputs: the daemon's parsers of outside bytes: RPC request bodies (through
 * rpc_handle with a real registry/status), data datagrams (data_handle), the /proc/<pid>/stat
 * state reader (peer_parse_stat) and the contract's JSON reader/writer round trip (cjx). The first byte selects the target. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/jw.h"
#include "common/log.h"
#include "contract/cjx.h"
#include "daemon/ipc/data_sink.h"
#include "daemon/ipc/peer.h"
#include "daemon/rpc/rpc_methods.h"
#include "daemon/sinks/json_logger.h"

const char *const fuzz_seeds[] = {
    "R{\"fn\":\"getStatus\"}",
    "R{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"NPU_MONITOR_START=true\",\"pids\":[0],\"job_id\":0,\"process_limit\":3}",
    "R{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"A=1\",\"pids\":[1.5,true,-3],\"job_id\":\"x\"}",
    "D{\"deviceId\":-1,\"duration\":5,\"kind\":\"Kernel\",\"timestamp\":1749889801120000000}",
    "D{\"activity\":\"Kernel\",\"deviceId\":0,\"duration\":3,\"kind\":\"OpStats\",\"ops\":[{\"avg\":1,\"count\":3,\"name\":\"a\\u00e9\",\"total\":3}],\"timestamp\":1}",
    "D{\"backend\":\"mspti\",\"config_age_ms\":12,\"deviceId\":-1,\"duration\":0,\"fallback\":\"\",\"kind\":\"PluginHealth\",\"library\":\"/x/libmspti.so\",\"mode\":\"dyno\",\"name\":\"health\",\"pid\":7,\"rank\":0,\"step\":3,\"step_age_ms\":1,\"step_period_ms\":-1,\"steps\":2,\"steps_since_config\":0,\"timestamp\":1}",
    "S4242 (py) thon) Z 1 2 3",
    "S1 (a) ",
    "J[1,-2,3.5e10,\"\\ud83d\\ude00\",{\"b\":null,\"a\":[true,false]}]",
};
const size_t fuzz_nseeds = sizeof(fuzz_seeds) / sizeof(fuzz_seeds[0]);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct registry *reg;
    static struct status_table *st;
    if (!reg) {
        log_set_level(LOG_LVL_FATAL);
        if (registry_create("fuzz", &reg) != 0 || status_create(&st) != 0)
            abort();
    }
    if (size < 1)
        return 0;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    if (data[0] == 'R') {
        struct rpc_ctx ctx = { .reg = reg, .st = st, .version = "0.3.2" };
        char *reply = NULL;
        size_t rlen = 0;
        rpc_handle(&ctx, text, len, &reply, &rlen);
        free(reply);
        registry_gc(reg, UINT64_MAX, 0);
    } else if (data[0] == 'S') {
        int32_t ppid = 0;
        char c = 0; /* never reads past the text; a parent pid >= 0 when it parses */
        if (peer_parse_stat(text, len, &ppid, &c) == 0 && ppid < 0)
            __builtin_trap();
    } else if (data[0] == 'D') {
        struct data_router dr;
        data_router_init(&dr);
        dr.st = st; /* the counter and health messages reach their parsers */
        dr.reg = reg;
        data_router_add(&dr, json_logger_sink());
        data_handle(&dr, text, len, 0);
        data_router_fini(&dr);
    } else {
        cJSON *v = NULL;
        if (cjx_parse(text, len, 10, &v) == 0) {
            struct jw w;
            jw_init_dyn(&w, 1 << 20);
            cjx_write(&w, v);
            /* a dump must parse again */
            cJSON *again = NULL;
            if (!w.err && cjx_parse(w.buf, w.len, 10, &again) != 0)
                abort();
            cJSON_Delete(again);
            jw_fini(&w);
            cJSON_Delete(v);
        }
    }
    return 0;
}
