/* backend: picks the backend named by MSMONITOR_BACKEND (04-plugin.md §9). The table is the
 * one place that knows which vendor backends exist; CUPTI (07 §3) is one more row. */
#include "plugin/backend/backend.h"

#include <errno.h>
#include <string.h>

#include "common/log.h"
#include "plugin/backend/backend_cupti.h"
#include "plugin/backend/backend_mspti.h"
#include "plugin/penv.h"

struct backend_kind {
    const char *name;
    int (*create)(struct backend **ret); /* NULL: known but not built in this release */
};

static const struct backend_kind backend_kinds[] = {
    { "mspti", backend_mspti_create },
    { "cupti", backend_cupti_create },
};

int backend_create(struct backend **ret)
{
    const char *want = penv_get(PENV_BACKEND);
    int rc = -EINVAL;

    if (!want || !want[0]) {
        /* 07 §3.1/§3.5: injected by the CUDA driver means CUDA; otherwise msPTI, and CUPTI
         * only when msPTI is absent, was not pinned by MSMONITOR_MSPTI_LIB, and CUPTI loads. */
        if (penv_set(PENV_CUDA_INJECTION)) {
            want = "cupti";
        } else {
            rc = backend_mspti_create(ret);
            if (rc == -ENOENT && !penv_set(PENV_MSPTI_LIB) && backend_cupti_create_quiet(ret, true) == 0) {
                LOG_INFO("msPTI not found; using the CUPTI backend");
                rc = 0;
            }
            goto out;
        }
    }
    for (size_t i = 0; i < sizeof(backend_kinds) / sizeof(backend_kinds[0]); i++) {
        if (strcmp(backend_kinds[i].name, want) != 0)
            continue;
        if (!backend_kinds[i].create) {
            LOG_ERROR("MSMONITOR_BACKEND=%s: this backend is not part of this release", want);
            rc = -ENOTSUP;
            goto out;
        }
        rc = backend_kinds[i].create(ret);
        goto out;
    }
    LOG_ERROR("MSMONITOR_BACKEND=%s is not a backend (use mspti or cupti)", want);
out:
    return rc;
}
