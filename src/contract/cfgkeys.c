/* cfgkeys: the one classification rule that needs code; the keys themselves are macros so
 * that string literals pasted into CLI formats stay compile-time constants. */
#include "contract/cfgkeys.h"

#include <string.h>

bool cfgkeys_is_npu_monitor_text(const char *text, size_t len)
{
    size_t klen = sizeof(CFGKEY_NPU_MONITOR_START) - 1;

    return text && len >= klen && memcmp(text, CFGKEY_NPU_MONITOR_START, klen) == 0;
}
