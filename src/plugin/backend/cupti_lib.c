/* cupti_lib: finds libcupti.so (explicit path, already mapped, CUDA_HOME, /usr/local/cuda,
 * then the loader's search path) and resolves its symbols. MSMONITOR_CUPTI_LIB is
 * authoritative so tests pin our simulator and never pick up a real CUDA install. */
#include "plugin/backend/cupti_lib.h"

#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/strutil.h"
#include "plugin/backend/vendorlib.h"
#include "plugin/penv.h"

#define CUPTI_SONAME "libcupti.so"

#define CSYM(field, sym, mand) VENDORLIB_SYM(struct cupti_lib, field, sym, mand)
static const struct vendorlib_sym cupti_lib_syms[] = {
    CSYM(register_callbacks, cuptiActivityRegisterCallbacks, true),
    CSYM(enable, cuptiActivityEnable, true),
    CSYM(disable, cuptiActivityDisable, true),
    CSYM(get_next_record, cuptiActivityGetNextRecord, true),
    CSYM(flush_all, cuptiActivityFlushAll, true),
    CSYM(get_version, cuptiGetVersion, true),
    CSYM(get_callback_name, cuptiGetCallbackName, false),
    CSYM(get_result_string, cuptiGetResultString, false),
    CSYM(get_num_dropped, cuptiActivityGetNumDroppedRecords, false),
    CSYM(flush_period, cuptiActivityFlushPeriod, false),
    CSYM(finalize, cuptiFinalize, false),
};

static const struct vendorlib_desc cupti_lib_desc = {
    .soname = CUPTI_SONAME, .tag = "cupti", .syms = cupti_lib_syms,
    .nsyms = sizeof(cupti_lib_syms) / sizeof(cupti_lib_syms[0]), .table_size = sizeof(struct cupti_lib),
    .dl_off = offsetof(struct cupti_lib, dl), .path_off = offsetof(struct cupti_lib, path),
    .path_cap = sizeof(((struct cupti_lib *)0)->path),
};

static int cupti_lib_try(const char *path, int flags, struct cupti_lib *ret)
{
    if (vendorlib_try(&cupti_lib_desc, path, flags, ret) != 0)
        return -ENOENT;
    LOG_INFO("Loaded CUPTI library from %s", ret->path);
    return 0;
}

int cupti_lib_load(struct cupti_lib *ret, bool quiet)
{
    static const char *const mapped[] = { CUPTI_SONAME, CUPTI_SONAME ".13", CUPTI_SONAME ".12" };
    static const char *const home_rel[] = { "extras/CUPTI/lib64/" CUPTI_SONAME, "lib64/" CUPTI_SONAME };
    static const char *const fixed[] = {
        "/usr/local/cuda/extras/CUPTI/lib64/" CUPTI_SONAME,
        "/usr/local/cuda/lib64/" CUPTI_SONAME,
    };
    const char *explicit = penv_get(PENV_CUPTI_LIB);
    const char *home = penv_get(PENV_CUDA_HOME);
    char searched[3 * PATH_MAX + 256] = "";
    char path[PATH_MAX];
    int rc = 0;

    if (explicit && explicit[0]) {
        if (cupti_lib_try(explicit, RTLD_NOW | RTLD_GLOBAL, ret) == 0)
            goto out;
        snprintf(searched, sizeof(searched), "MSMONITOR_CUPTI_LIB=%s", explicit);
        goto not_found;
    }
    vendorlib_note(searched, sizeof(searched), "already loaded " CUPTI_SONAME "{,.13,.12}");
    for (size_t i = 0; i < sizeof(mapped) / sizeof(mapped[0]); i++)
        if (cupti_lib_try(mapped[i], RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL, ret) == 0)
            goto out;
    for (size_t i = 0; home && home[0] && i < sizeof(home_rel) / sizeof(home_rel[0]); i++) {
        int n = snprintf(path, sizeof(path), "%s/%s", home, home_rel[i]);
        if (n <= 0 || (size_t)n >= sizeof(path))
            continue;
        vendorlib_note(searched, sizeof(searched), path);
        if (cupti_lib_try(path, RTLD_NOW | RTLD_GLOBAL, ret) == 0)
            goto out;
    }
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
        vendorlib_note(searched, sizeof(searched), fixed[i]);
        if (cupti_lib_try(fixed[i], RTLD_NOW | RTLD_GLOBAL, ret) == 0)
            goto out;
    }
    vendorlib_note(searched, sizeof(searched), CUPTI_SONAME " via the loader search path (LD_LIBRARY_PATH)");
    if (cupti_lib_try(CUPTI_SONAME, RTLD_NOW | RTLD_GLOBAL, ret) == 0)
        goto out;
not_found:
    if (quiet)
        LOG_DEBUG("CUPTI library not found (searched: %s)", searched);
    else
        LOG_ERROR("CUPTI library not found (searched: %s)", searched);
    rc = -ENOENT;
out:
    return rc;
}

const char *cupti_lib_result_name(int result)
{
    switch (result) {
    case CUPTI_ABI_SUCCESS: return "CUPTI_SUCCESS";
    case CUPTI_ABI_ERROR_INVALID_PARAMETER: return "CUPTI_ERROR_INVALID_PARAMETER";
    case CUPTI_ABI_ERROR_MAX_LIMIT_REACHED: return "CUPTI_ERROR_MAX_LIMIT_REACHED";
    case CUPTI_ABI_ERROR_NOT_INITIALIZED: return "CUPTI_ERROR_NOT_INITIALIZED";
    case CUPTI_ABI_ERROR_INVALID_KIND: return "CUPTI_ERROR_INVALID_KIND";
    case CUPTI_ABI_ERROR_NOT_SUPPORTED: return "CUPTI_ERROR_NOT_SUPPORTED";
    default: return "CUPTI_ERROR_UNKNOWN";
    }
}
