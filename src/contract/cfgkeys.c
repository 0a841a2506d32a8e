/* cfgkeys: the classification and boolean rules that need code; the keys themselves are
 * macros so that string literals pasted into CLI formats stay compile-time constants. */
#include "contract/cfgkeys.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

#include "contract/kvtext.h"

enum cfgkeys_class cfgkeys_classify(const char *const *keys, size_t n)
{
    enum cfgkeys_class c = CFGKEYS_OTHER;

    for (size_t i = 0; i < n; i++) {
        if (!keys[i])
            continue;
        if (strcmp(keys[i], CFGKEY_NPU_MONITOR_START) == 0)
            return CFGKEYS_NPU_MONITOR;
        if (strcmp(keys[i], CFGKEY_ACTIVITIES_LOG_FILE) == 0 || strcmp(keys[i], CFGKEY_ACTIVITIES_ITERATIONS) == 0)
            c = CFGKEYS_NPU_TRACE;
    }
    return c;
}

enum cfgkeys_class cfgkeys_classify_text(const char *text, size_t len)
{
    struct kvtext kv;
    enum cfgkeys_class c = CFGKEYS_OTHER;

    if (!text)
        return c;
    if (kvtext_parse(text, len, &kv) == 0)
        c = cfgkeys_classify(kv.keys, kv.n);
    kvtext_fini(&kv);
    return c;
}

bool cfgkeys_is_npu_monitor_text(const char *text, size_t len)
{
    return cfgkeys_classify_text(text, len) == CFGKEYS_NPU_MONITOR;
}

int cfgkeys_bool(const char *value, bool *ret)
{
    if (value && strcasecmp(value, "true") == 0)
        *ret = true;
    else if (value && strcasecmp(value, "false") == 0)
        *ret = false;
    else
        return -EINVAL;
    return 0;
}

bool cfgkeys_true(const char *value)
{
    bool b = false;

    return cfgkeys_bool(value, &b) == 0 && b;
}
