/* backend_fake: a scriptable backend for the core's tests and benchmarks (the second
 * implementation of backend.h). Records every call in `order` ('S' start, 'E' enable,
 * 'D' disable, 'F' flush, 'U' detach) and emits `pending` API records named "aclnnMatMul"
 * through the sink at the next flush or stop, in batches of at most 256, on the calling
 * thread. The fields are the test's to set; the object is caller storage. */
#ifndef MSMON_PLUGIN_BACKEND_FAKE_H
#define MSMON_PLUGIN_BACKEND_FAKE_H

#include <pthread.h>
#include <stdbool.h>

#include "plugin/backend/backend.h"

struct backend_fake {
    struct backend base;           /* hand &base to the core */
    pthread_mutex_t lock;          /* order, pending, sink */
    /* script (set by the test) */
    int start_rc;                  /* returned by start() when non-zero */
    int enable_rc[MON_KIND_LIMIT]; /* non-zero: enabling that kind fails */
    unsigned enable_sleep_ms;      /* each enable blocks this long */
    int pending;                   /* records emitted at the next flush/stop */
    struct backend_drops drops;    /* returned by drops() */
    /* observed */
    char order[256];
    bool started;
    uint32_t enabled;
    unsigned flushes;
    /* internal */
    backend_sink_fn sink;
    void *ctx;
};

/* Storage provided by the caller; clears the script. */
void backend_fake_init(struct backend_fake *f);
void backend_fake_fini(struct backend_fake *f);

#endif
