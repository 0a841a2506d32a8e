/* fuzz_filter: any filter text (valid, invalid, oversized) must parse without crashing or
 * leaking, and matching records against it must never fault. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "plugin/pipeline/filter.h"

const char *const fuzz_seeds[] = { "Kernel:MatMul", "Kernel:MatMul,Conv2D;Communication:AllReduce", "Kernel:Mat",
                                   " ; :: ;Marker: step ,, ;Hccl:a", "API:x;AclAPI:y;NodeAPI:z;RuntimeAPI:w" };
const size_t fuzz_nseeds = sizeof(fuzz_seeds) / sizeof(fuzz_seeds[0]);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const names[] = { "MatMul", "BatchMatMul", "", "AllReduce", "step 1" };
    log_set_level(LOG_LVL_FATAL);
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0;
    struct filter_state *fs;
    if (filter_state_create(&fs) == 0) {
        (void)filter_state_set(fs, text);
        for (int kind = 0; kind < MON_KIND_LIMIT; kind++) {
            for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                struct mon_record r = { .kind = kind };
                if (kind == MON_KIND_MARKER) {
                    r.u.marker.flag = 1 << (i % 6);
                    r.u.marker.source_kind = (int)(i & 1);
                    r.u.marker.id = i;
                    r.u.marker.name = names[i];
                } else if (kind == MON_KIND_KERNEL) {
                    r.u.kernel.name = names[i];
                } else if (kind == MON_KIND_COMMUNICATION) {
                    r.u.comm.name = names[i];
                } else if (kind == MON_KIND_HCCL) {
                    r.u.hccl.name = names[i];
                } else {
                    r.u.api.name = names[i];
                }
                (void)filter_state_keep(fs, &r);
            }
        }
        filter_state_destroy(fs);
    }
    free(text);
    return 0;
}
