/* fuzz_dyn_segment: what a rank does with the dyno-mode segment's bytes (docs/design/ipc.md#segment):
 * shmseg_read on a whole mapped-size segment, then the one reading of its text (pconfig) and
 * the window's rank rule. The first input byte goes into the aligned-step field.
 * Invariants: no fault; the text read back is NUL-terminated, has no trailing padding and
 * is no longer than the segment's text area; a valid nputrace config has a sane window. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "plugin/control/shm_segment.h"
#include "plugin/control/shm_mode.h"
#include "plugin/control/pconfig.h"

const char *const fuzz_seeds[] = {
    "\x05\n            ACTIVITIES_ITERATIONS=2\n            ACTIVITIES_LOG_FILE=/tmp/x\n            PROFILE_START_STEP=7\n"
    "            REQUEST_TRACE_ID=7\n",
    "\x01PROFILE_IS_RANK=true\nPROFILE_RANK_LIST=0, 1,3\nACTIVITIES_LOG_FILE=d",
    "\x22PROFILE_START_STEP=-1\nACTIVITIES_ITERATIONS=2147483647\nPROFILE_ACTIVITIES=CPU,NPU\nPROFILE_ANALYSE=true\n"
    "PROFILE_EXPORT_TYPE=db",
    "\x40NPU_MONITOR_START=true\nNPU_MONITOR_STOP=false\nREPORT_INTERVAL_S=1.5   ",
    "\x03PROFILE_START_STEP=x\nACTIVITIES_ITERATIONS= 3 \0\0\0",
    "\xffK=\x1b[2J\nPROFILE_START_STEP=99999999999",
};
const size_t fuzz_nseeds = sizeof(fuzz_seeds) / sizeof(fuzz_seeds[0]);

static uint8_t *seg;
static size_t used; /* bytes of the text area written by the previous input */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pconfig *c;
    char *text = NULL;
    size_t len = 0;
    int32_t aligned = 0;
    int rc;

    if (!seg) {
        seg = malloc(SHMSEG_SIZE);
        if (!seg)
            abort();
        memset(seg, ' ', SHMSEG_SIZE);
        log_set_level(LOG_LVL_FATAL);
    }
    if (size == 0)
        return 0;
    memset(seg + SHMSEG_ALIGNED, (int)data[0], SHMSEG_TEXT - SHMSEG_ALIGNED);
    data++;
    size--;
    if (size > SHMSEG_SIZE - SHMSEG_TEXT)
        size = SHMSEG_SIZE - SHMSEG_TEXT;
    memset(seg + SHMSEG_TEXT, ' ', used);
    memcpy(seg + SHMSEG_TEXT, data, size);
    used = size;
    rc = shmseg_read(seg, &text, &len, &aligned);
    if (rc != 0) {
        if (rc != -ENODATA || text)
            abort();
        return 0;
    }
    if (len == 0 || len > SHMSEG_SIZE - SHMSEG_TEXT || text[len] != '\0' || text[len - 1] == ' ')
        abort();
    c = malloc(sizeof(*c));
    if (c && pconfig_parse_text(text, len, c) == 0 && c->cls == CFGKEYS_NPU_TRACE) {
        if (c->trace.iterations < 1 || c->trace.start_step < -1)
            abort();
        (void)pconfig_trace_for_rank(&c->trace, aligned & 3);
    }
    free(c);
    free(text);
    return 0;
}
