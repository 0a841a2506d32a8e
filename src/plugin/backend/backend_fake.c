/* backend_fake: the backend interface with no vendor behind it, so the session actor can be
 * tested (and benchmarked) without msPTI: it emits synthetic API records on demand and
 * records the call order the core produced. */
#include "plugin/backend/backend_fake.h"

#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct backend_fake *bf_of(struct backend *be)
{
    return (struct backend_fake *)be; /* base is the first member */
}

static void bf_note(struct backend_fake *f, char c)
{
    size_t n = strlen(f->order);

    if (n + 1 < sizeof(f->order)) {
        f->order[n] = c;
        f->order[n + 1] = '\0';
    }
}

/* Emit the pending records (lock held). */
static void bf_emit(struct backend_fake *f)
{
    struct mon_record batch[256];
    struct timespec ts;
    uint64_t now;

    clock_gettime(CLOCK_REALTIME, &ts);
    now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    while (f->sink && f->pending > 0) {
        size_t n = 0;
        for (; n < sizeof(batch) / sizeof(batch[0]) && f->pending > 0; n++, f->pending--) {
            memset(&batch[n], 0, sizeof(batch[n]));
            batch[n].kind = MON_KIND_API;
            /* stamped now: the pipeline cuts records that ended before the session start */
            batch[n].u.api = (struct mon_api){ .start = now - 50, .end = now, .pid = 1, .tid = 2,
                                               .correlation_id = 7, .name = "aclnnMatMul" };
        }
        f->sink(f->ctx, batch, n);
    }
}

static int bf_start(struct backend *be, backend_sink_fn sink, void *ctx)
{
    struct backend_fake *f = bf_of(be);
    int rc = 0;

    pthread_mutex_lock(&f->lock);
    bf_note(f, 'S');
    if (f->start_rc) {
        rc = f->start_rc;
        goto out;
    }
    f->sink = sink;
    f->ctx = ctx;
    f->started = true;
    f->enabled = 0;
out:
    pthread_mutex_unlock(&f->lock);
    return rc;
}

static int bf_set_kinds(struct backend *be, uint32_t want, uint32_t *ret_enabled)
{
    struct backend_fake *f = bf_of(be);
    unsigned sleep_ms;
    int rc = 0;

    pthread_mutex_lock(&f->lock);
    if (!f->started) {
        rc = -ENOENT;
        goto out;
    }
    sleep_ms = f->enable_sleep_ms;
    for (int k = 1; k < MON_KIND_LIMIT; k++) {
        uint32_t bit = 1u << k;
        if ((want & bit) && !(f->enabled & bit)) {
            bf_note(f, 'E');
            if (sleep_ms) {
                pthread_mutex_unlock(&f->lock);
                usleep(sleep_ms * 1000u);
                pthread_mutex_lock(&f->lock);
            }
            if (!f->enable_rc[k])
                f->enabled |= bit;
        } else if (!(want & bit) && (f->enabled & bit)) {
            bf_note(f, 'D');
            f->enabled &= ~bit;
        }
    }
    *ret_enabled = f->enabled;
out:
    pthread_mutex_unlock(&f->lock);
    return rc;
}

static int bf_flush(struct backend *be)
{
    struct backend_fake *f = bf_of(be);

    pthread_mutex_lock(&f->lock);
    bf_note(f, 'F');
    f->flushes++;
    bf_emit(f);
    pthread_mutex_unlock(&f->lock);
    return 0;
}

static void bf_stop(struct backend *be)
{
    struct backend_fake *f = bf_of(be);

    pthread_mutex_lock(&f->lock);
    if (!f->started)
        goto out;
    for (int k = 1; k < MON_KIND_LIMIT; k++)
        if (f->enabled & (1u << k))
            bf_note(f, 'D');
    f->enabled = 0;
    bf_note(f, 'F');
    bf_emit(f);
    bf_note(f, 'U');
    f->sink = NULL;
    f->ctx = NULL;
    f->started = false;
out:
    pthread_mutex_unlock(&f->lock);
}

static void bf_drops(const struct backend *be, struct backend_drops *ret)
{
    struct backend_fake *f = (struct backend_fake *)be;

    pthread_mutex_lock(&f->lock);
    *ret = f->drops;
    pthread_mutex_unlock(&f->lock);
}

static void bf_destroy(struct backend *be)
{
    (void)be; /* caller storage: backend_fake_fini() */
}

static const struct backend_ops backend_fake_ops = {
    .name = "fake", .start = bf_start, .set_kinds = bf_set_kinds, .flush = bf_flush,
    .stop = bf_stop, .drops = bf_drops, .destroy = bf_destroy,
};

void backend_fake_init(struct backend_fake *f)
{
    memset(f, 0, sizeof(*f));
    f->base.ops = &backend_fake_ops;
    f->base.library = "";
    pthread_mutex_init(&f->lock, NULL);
}

void backend_fake_fini(struct backend_fake *f)
{
    pthread_mutex_destroy(&f->lock);
}
