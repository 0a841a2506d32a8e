/* backend: picks the backend named by MSMONITOR_BACKEND (docs/design/session.md#backends). The table is the
 * one place that knows which vendor backends exist; CUPTI (docs/design/session.md#cupti-backend) is one more row. */
#include "plugin/backend/backend.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "plugin/backend/mspti_lib.h" /* the search the fallback note names */
#include "plugin/penv.h"

/* {name, ops} rows: each implementation defines its own row (backend.h). */
static const struct backend_impl *const backend_impls[] = {
    &backend_mspti_impl,
    &backend_cupti_impl,
};
#define BACKEND_IMPLS (sizeof(backend_impls) / sizeof(backend_impls[0]))

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
            rc = backend_mspti_impl.create(ret, false);
            pthread_mutex_lock(&note_lock);
            if (rc == -ENOENT && !penv_set(PENV_MSPTI_LIB) && backend_cupti_impl.create(ret, true) == 0) {
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
    for (size_t i = 0; i < BACKEND_IMPLS; i++) {
        if (strcmp(backend_impls[i]->name, want) == 0) {
            rc = backend_impls[i]->create(ret, false);
            goto out;
        }
    }
    LOG_ERROR("MSMONITOR_BACKEND=%s is not a backend (use mspti or cupti)", want);
out:
    return rc;
}
