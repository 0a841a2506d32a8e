/* fuzz_plugin_config: the plugin's config path for text from the daemon — the KEY=value
 * parser (kvtext, the one rule on every hop), the npu-monitor validator (mconfig) and the dyno
 * mode's shm JSON (dyn_config_json). Invariants: no fault; the JSON, when made, is valid JSON
 * holding "is_valid":true; a validated config's strings are NUL-terminated within bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "contract/cjx.h"
#include "contract/kvtext.h"
#include "plugin/control/dynamic.h"
#include "plugin/control/mconfig.h"

const char *const fuzz_seeds[] = {
    "NPU_MONITOR_START=true\nNPU_MONITOR_STOP=false\nMSPTI_ACTIVITY_KIND=Kernel,Marker\nREPORT_INTERVAL_S=60\nNPU_MONITOR_LOG_FILE=/tmp/x\nNPU_MONITOR_EXPORT_TYPE=DB\nNPU_MONITOR_FILTER=Kernel:MatMul\n",
    "NPU_MONITOR_START=false\nNPU_MONITOR_STOP=true\n",
    "ACTIVITIES_DURATION_MSECS=500\nPROFILE_START_STEP=3\nACTIVITIES_ITERATIONS=2\n =x\na==b\n",
    "NPU_MONITOR_START= true \r\nREPORT_INTERVAL_S=0\nJSONL_ROTATE_LOG_LINES=10\nJSONL_ROTATE_LOG_FILES=-1\n",
    "is_valid=false\nPROFILE_EXPORT_TYPE=Text\n\xc3\xa9=\xff\n",
};
const size_t fuzz_nseeds = sizeof(fuzz_seeds) / sizeof(fuzz_seeds[0]);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kvtext kv;
    log_set_level(LOG_LVL_FATAL);
    if (kvtext_parse((const char *)data, size, &kv) == 0) {
        if (kv.n > KVTEXT_MAX_KEYS)
            abort();
        struct mconfig *cfg = malloc(sizeof(*cfg));
        if (cfg && mconfig_parse(kv.keys, kv.values, kv.n, cfg) == 0) {
            if (!memchr(cfg->log_file, '\0', sizeof(cfg->log_file)) ||
                !memchr(cfg->filter, '\0', sizeof(cfg->filter)))
                abort();
        }
        free(cfg);
        char *json = NULL;
        size_t jlen = 0;
        if (kv.n > 0 && dyn_config_json(&kv, &json, &jlen) == 0) {
            cJSON *v = NULL;
            if (cjx_parse(json, jlen, 10, &v) != 0 || !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "is_valid")))
                abort();
            cJSON_Delete(v);
        }
        free(json);
    }
    kvtext_fini(&kv);
    return 0;
}
