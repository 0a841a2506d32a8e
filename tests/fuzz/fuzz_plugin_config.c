/* fuzz_plugin_config: the plugin's one reading of a config from the daemon (pconfig over the
 * contract's kvtext rule, docs/design/session.md#the-route-of-a-config), as text and as the
 * C API's pairs. Invariants: no fault; the result's class and return agree; every string of
 * the typed value is NUL-terminated within its bounds; an invalid config names an error. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "contract/kvtext.h"
#include "plugin/control/pconfig.h"

const char *const fuzz_seeds[] = {
    "NPU_MONITOR_START=true\nNPU_MONITOR_STOP=false\nMSPTI_ACTIVITY_KIND=Kernel,Marker\nREPORT_INTERVAL_S=60\nNPU_MONITOR_LOG_FILE=/tmp/x\nNPU_MONITOR_EXPORT_TYPE=DB\nNPU_MONITOR_FILTER=Kernel:MatMul\n",
    "NPU_MONITOR_START=false\nNPU_MONITOR_STOP=true\n",
    "ACTIVITIES_DURATION_MSECS=500\nPROFILE_START_STEP=3\nACTIVITIES_ITERATIONS=2\n =x\na==b\n",
    "NPU_MONITOR_START= true \r\nREPORT_INTERVAL_S=0\nJSONL_ROTATE_LOG_LINES=10\nJSONL_ROTATE_LOG_FILES=-1\n",
    "is_valid=false\nPROFILE_EXPORT_TYPE=Text\n\xc3\xa9=\xff\n",
    "ACTIVITIES_LOG_FILE=/tmp/t\nPROFILE_IS_RANK=true\nPROFILE_RANK_LIST=0, 1,3\nPROFILE_START_STEP=-1\nREQUEST_TRACE_ID=18446744073709551615\n",
};
const size_t fuzz_nseeds = sizeof(fuzz_seeds) / sizeof(fuzz_seeds[0]);

static void check(const struct pconfig *c, int rc)
{
    if (!memchr(c->id, '\0', sizeof(c->id)) || !memchr(c->notes, '\0', sizeof(c->notes)) ||
        !memchr(c->errors, '\0', sizeof(c->errors)) || !memchr(c->mon.log_file, '\0', sizeof(c->mon.log_file)) ||
        !memchr(c->mon.filter, '\0', sizeof(c->mon.filter)) ||
        !memchr(c->trace.log_file, '\0', sizeof(c->trace.log_file)) ||
        !memchr(c->trace.rank_list, '\0', sizeof(c->trace.rank_list)))
        abort();
    if (rc == 0 && (c->nerrors || (c->cls != CFGKEYS_NPU_MONITOR && c->cls != CFGKEYS_NPU_TRACE)))
        abort();
    if (rc == -EINVAL && !c->errors[0])
        abort();
    if (rc == 0 && c->cls == CFGKEYS_NPU_TRACE && (c->trace.iterations < 1 || c->trace.start_step < -1))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pconfig *c = malloc(sizeof(*c));
    struct kvtext kv;
    int rc;

    log_set_level(LOG_LVL_FATAL);
    if (!c)
        return 0;
    rc = pconfig_parse_text((const char *)data, size, c);
    check(c, rc);
    if (kvtext_parse((const char *)data, size, &kv) == 0) {
        /* the C API's entry: the same pairs, taken as npu-monitor whatever their keys */
        rc = pconfig_parse_pairs(kv.keys, kv.values, kv.n, CFGKEYS_NPU_MONITOR, c);
        check(c, rc);
        if (rc == -ENOMSG)
            abort();
    }
    kvtext_fini(&kv);
    free(c);
    return 0;
}
