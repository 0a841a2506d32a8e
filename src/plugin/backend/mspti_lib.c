/* mspti_lib: finds libmspti.so (explicit path, LD_PRELOAD, already mapped, CANN paths, then
 * the loader's own search path) and resolves its symbols. The explicit MSMONITOR_MSPTI_LIB is
 * authoritative so tests can pin the simulator and never pick up a real CANN install. */
#include "plugin/backend/mspti_lib.h"

#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/strutil.h"
#include "plugin/backend/vendorlib.h"
#include "plugin/penv.h"

#define BACKEND_LIB "libmspti.so"

#define BSYM(field, sym, mand) VENDORLIB_SYM(struct mspti_lib, field, sym, mand)
static const struct vendorlib_sym mspti_lib_syms[] = {
    BSYM(subscribe, msptiSubscribe, true),
    BSYM(unsubscribe, msptiUnsubscribe, true),
    BSYM(register_callbacks, msptiActivityRegisterCallbacks, true),
    BSYM(enable, msptiActivityEnable, true),
    BSYM(disable, msptiActivityDisable, true),
    BSYM(get_next_record, msptiActivityGetNextRecord, true),
    BSYM(flush_all, msptiActivityFlushAll, true),
    BSYM(flush_period, msptiActivityFlushPeriod, false),
    BSYM(push_external_id, msptiActivityPushExternalCorrelationId, false),
    BSYM(pop_external_id, msptiActivityPopExternalCorrelationId, false),
    BSYM(enable_marker_domain, msptiActivityEnableMarkerDomain, false),
    BSYM(disable_marker_domain, msptiActivityDisableMarkerDomain, false),
    BSYM(is_enabled, msptiActivityIsEnabled, false),
    BSYM(enable_callback, msptiEnableCallback, false),
    BSYM(enable_domain, msptiEnableDomain, false),
    BSYM(get_result_string, msptiGetResultString, false),
};

static const struct vendorlib_desc mspti_lib_desc = {
    .soname = BACKEND_LIB, .tag = "mspti", .syms = mspti_lib_syms,
    .nsyms = sizeof(mspti_lib_syms) / sizeof(mspti_lib_syms[0]), .table_size = sizeof(struct mspti_lib),
    .dl_off = offsetof(struct mspti_lib, dl), .path_off = offsetof(struct mspti_lib, path),
    .path_cap = sizeof(((struct mspti_lib *)0)->path),
};

/* One candidate: 0 and *ret filled, or -errno (rejected, logged at DEBUG/ERROR). */
static int mspti_lib_try(const char *path, int flags, struct mspti_lib *ret)
{
    if (vendorlib_try(&mspti_lib_desc, path, flags, ret) != 0)
        return -ENOENT;
    LOG_INFO("Loaded msPTI library from %s", ret->path);
    return 0;
}

static int mspti_lib_try_preload(struct mspti_lib *ret, char *searched, size_t cap)
{
    const char *pre = penv_get(PENV_LD_PRELOAD);
    const char *p = pre;

    while (p && *p) {
        char path[PATH_MAX];
        size_t n = strcspn(p, ": ");
        if (n > 0 && n < sizeof(path)) {
            const char *base;
            memcpy(path, p, n);
            path[n] = '\0';
            base = strrchr(path, '/');
            base = base ? base + 1 : path;
            if (strcmp(base, BACKEND_LIB) == 0) {
                vendorlib_note(searched, cap, path);
                if (mspti_lib_try(path, RTLD_NOW | RTLD_GLOBAL, ret) == 0)
                    return 0;
            }
        }
        p += n;
        p += strspn(p, ": ");
    }
    return -ENOENT;
}

/* The backend choice runs on one thread at a time (the monitor's backend lock). */
static char mspti_lib_searched_text[4 * PATH_MAX + 256];

const char *mspti_lib_last_searched(void)
{
    return mspti_lib_searched_text;
}

int mspti_lib_load(struct mspti_lib *ret)
{
    static const char *const fixed[] = {
        "/usr/local/Ascend/cann/lib64/" BACKEND_LIB,
        "/usr/local/Ascend/ascend-toolkit/latest/lib64/" BACKEND_LIB,
    };
    const char *explicit = penv_get(PENV_MSPTI_LIB);
    const char *home = penv_get(PENV_ASCEND_HOME);
    char searched[4 * PATH_MAX + 256] = "";
    char path[PATH_MAX];

    if (explicit && explicit[0]) {
        if (mspti_lib_try(explicit, RTLD_NOW | RTLD_GLOBAL, ret) == 0)
            return 0;
        LOG_ERROR("msPTI library not found (searched: MSMONITOR_MSPTI_LIB=%s)", explicit);
        snprintf(mspti_lib_searched_text, sizeof(mspti_lib_searched_text), "MSMONITOR_MSPTI_LIB=%s", explicit);
        return -ENOENT;
    }
    if (mspti_lib_try_preload(ret, searched, sizeof(searched)) == 0)
        return 0;
    vendorlib_note(searched, sizeof(searched), "already loaded " BACKEND_LIB);
    if (mspti_lib_try(BACKEND_LIB, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL, ret) == 0)
        return 0;
    if (home && home[0]) {
        int n = snprintf(path, sizeof(path), "%s/lib64/" BACKEND_LIB, home);
        if (n > 0 && (size_t)n < sizeof(path)) {
            vendorlib_note(searched, sizeof(searched), path);
            if (mspti_lib_try(path, RTLD_NOW | RTLD_GLOBAL, ret) == 0)
                return 0;
        }
    }
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
        vendorlib_note(searched, sizeof(searched), fixed[i]);
        if (mspti_lib_try(fixed[i], RTLD_NOW | RTLD_GLOBAL, ret) == 0)
            return 0;
    }
    /* Last: the loader's own search (LD_LIBRARY_PATH, DT_RUNPATH, ld.so.cache), which is how
     * CANN's set_env.sh makes the library reachable without installing it at a fixed path. */
    vendorlib_note(searched, sizeof(searched), BACKEND_LIB " via the loader search path (LD_LIBRARY_PATH)");
    if (mspti_lib_try(BACKEND_LIB, RTLD_NOW | RTLD_GLOBAL, ret) == 0)
        return 0;
    LOG_ERROR("msPTI library not found (searched: %s)", searched);
    snprintf(mspti_lib_searched_text, sizeof(mspti_lib_searched_text), "%s", searched);
    return -ENOENT;
}

const char *mspti_lib_result_name(int result)
{
    static const char *const names[] = {
        "MSPTI_SUCCESS", "MSPTI_ERROR_INVALID_PARAMETER", "MSPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED",
        "MSPTI_ERROR_MAX_LIMIT_REACHED", "MSPTI_ERROR_DEVICE_OFFLINE", "MSPTI_ERROR_QUEUE_EMPTY",
        "MSPTI_ERROR_WITHOUT_LD_PRELOAD", "MSPTI_ERROR_NOT_INITIALIZED", "MSPTI_ERROR_INVALID_KIND",
        "MSPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT",
    };
    /* Logs name the result symbolically (stable for greps across CANN versions); the optional
     * msptiGetResultString text is a sentence that differs between releases. */
    if (result >= 0 && (size_t)result < sizeof(names) / sizeof(names[0]))
        return names[result];
    if (result == MSPTI_ERROR_INNER)
        return "MSPTI_ERROR_INNER";
    return "MSPTI_ERROR_UNKNOWN";
}
