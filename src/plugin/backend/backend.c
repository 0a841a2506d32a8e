/* backend: picks the backend named by MSMONITOR_BACKEND (04-plugin.md §9). The table is the
 * one place that knows which vendor backends exist; CUPTI (07 §3) is one more row. */
#include "plugin/backend/backend.h"

#include <errno.h>
#include <string.h>

#include "common/log.h"
#include "plugin/backend/backend_mspti.h"
#include "plugin/penv.h"

struct backend_kind {
    const char *name;
    int (*create)(struct backend **ret); /* NULL: known but not built in this release */
};

static const struct backend_kind backend_kinds[] = {
    { "mspti", backend_mspti_create },
    { "cupti", NULL },
};

int backend_create(struct backend **ret)
{
    const char *want = penv_get(PENV_BACKEND);
    int rc = -EINVAL;

    if (!want || !want[0])
        want = "mspti";
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
