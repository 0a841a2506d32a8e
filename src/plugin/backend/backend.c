/* backend: picks the backend named by MSMONITOR_BACKEND (docs/design/session.md#backends). The table is the
 * one place that knows which vendor backends exist; CUPTI (docs/design/session.md#cupti-backend) is one more row. */
#include "plugin/backend/backend.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "plugin/backend/backend_cupti.h"
#include "plugin/backend/backend_mspti.h"
#include "plugin/backend/mspti_lib.h"
#include "plugin/penv.h"

struct backend_kind {
    const char *name;
    int (*create)(struct backend **ret); /* NULL: known but not built in this release */
};

static const struct backend_kind backend_kinds[] = {
    { "mspti", backend_mspti_create },
    { "cupti", backend_cupti_create },
};

/* Written by backend_create, read by the health reports' thread. */
static pthread_mutex_t note_lock = PTHREAD_MUTEX_INITIALIZER;
static char backend_note[4 * 4096 + 512];

void backend_fallback_note(char *buf, size_t cap)
{
    pthread_mutex_lock(&note_lock);
    snprintf(buf, cap, "%s", backend_note);
    pthread_mutex_unlock(&note_lock);
}

int backend_create(struct backend **ret)
{
    const char *want = penv_get(PENV_BACKEND);
    int rc = -EINVAL;

    if (!want || !want[0]) {
        /* docs/design/session.md#cupti-backend: injected by the CUDA driver means CUDA; otherwise msPTI, and CUPTI
         * only when msPTI is absent, was not pinned by MSMONITOR_MSPTI_LIB, and CUPTI loads. */
        if (penv_set(PENV_CUDA_INJECTION)) {
            want = "cupti";
        } else {
            rc = backend_mspti_create(ret);
            pthread_mutex_lock(&note_lock);
            if (rc == -ENOENT && !penv_set(PENV_MSPTI_LIB) && backend_cupti_create_quiet(ret, true) == 0) {
                /* the case of a CANN < 9.0.0 job without LD_PRELOAD on a box with a CUDA
                 * toolkit: say so once, where the user looks, and in status */
                snprintf(backend_note, sizeof(backend_note), "CUPTI chosen because msPTI was not found (searched: %s)",
                         mspti_lib_last_searched());
                LOG_WARN("%s; set LD_PRELOAD=<CANN>/lib64/libmspti.so or MSMONITOR_MSPTI_LIB to use msPTI",
                         backend_note);
                rc = 0;
            } else if (rc == -ENOENT) {
                snprintf(backend_note, sizeof(backend_note), "no backend: msPTI was not found (searched: %s)%s",
                         mspti_lib_last_searched(), penv_set(PENV_MSPTI_LIB) ? "" : " and no CUPTI library loads");
            } else {
                backend_note[0] = '\0';
            }
            pthread_mutex_unlock(&note_lock);
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
