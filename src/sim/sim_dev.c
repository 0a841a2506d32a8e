/* sim_dev: a min-heap of pending device records ordered by visibility time, drained by one
 * lazily started thread; the heap and the timeline table share one mutex. The submitter
 * only signals the thread when its record becomes the earliest, so steady launches cost no
 * syscall. */
#include "sim/sim_dev.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/thr.h"
#include "sim/sim_core.h"

struct pend {
    uint64_t visible, seq;
    uint32_t device, size;
    uint8_t rec[SIM_DEV_REC_MAX];
};

struct tl {
    uint64_t key;     /* (device << 32 | stream) + 1; 0 = empty */
    uint64_t busy;
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cv_work, cv_sync;
    bool started;
    struct pend *heap;
    size_t n, cap;
    uint64_t seq;
    uint64_t pending[SIM_MAX_DEVICES];
    uint64_t total;       /* queued or being appended */
    bool appending;       /* the device thread holds a popped record outside the lock */
    struct tl *tls;
    size_t tl_cap, tl_used;
} d = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .cv_work = PTHREAD_COND_INITIALIZER,
    .cv_sync = PTHREAD_COND_INITIALIZER,
};

static struct tl *tl_find_locked(uint32_t device, uint32_t stream)
{
    uint64_t key = (((uint64_t)device << 32) | stream) + 1;
    if ((d.tl_used + 1) * 2 > d.tl_cap) {
        size_t ncap = d.tl_cap ? d.tl_cap * 2 : 64;
        struct tl *nt = calloc(ncap, sizeof(*nt));
        if (!nt)
            return NULL;
        for (size_t i = 0; i < d.tl_cap; i++) {
            if (!d.tls[i].key)
                continue;
            size_t j = (d.tls[i].key * 0x9E3779B97F4A7C15ull) >> 20 & (ncap - 1);
            while (nt[j].key)
                j = (j + 1) & (ncap - 1);
            nt[j] = d.tls[i];
        }
        free(d.tls);
        d.tls = nt;
        d.tl_cap = ncap;
    }
    size_t j = (key * 0x9E3779B97F4A7C15ull) >> 20 & (d.tl_cap - 1);
    while (d.tls[j].key && d.tls[j].key != key)
        j = (j + 1) & (d.tl_cap - 1);
    if (!d.tls[j].key) {
        d.tls[j].key = key;
        d.tls[j].busy = 0;
        d.tl_used++;
    }
    return &d.tls[j];
}

uint64_t sim_dev_place(uint32_t device, uint32_t stream, uint64_t t, uint64_t dur, bool advance)
{
    pthread_mutex_lock(&d.lock);
    struct tl *tl = tl_find_locked(device, stream);
    uint64_t start = t;
    if (tl) {
        if (tl->busy > start)
            start = tl->busy;
        if (advance)
            tl->busy = start + dur;
    }
    pthread_mutex_unlock(&d.lock);
    return start;
}

void sim_dev_stream_wait(uint32_t device, uint32_t dst, uint32_t src)
{
    pthread_mutex_lock(&d.lock);
    struct tl *s = tl_find_locked(device, src);
    uint64_t busy = s ? s->busy : 0;
    struct tl *t = tl_find_locked(device, dst);
    if (t && t->busy < busy)
        t->busy = busy;
    pthread_mutex_unlock(&d.lock);
}

static bool before(const struct pend *a, const struct pend *b)
{
    return a->visible < b->visible || (a->visible == b->visible && a->seq < b->seq);
}

static void heap_pop_locked(struct pend *out)
{
    *out = d.heap[0];
    d.n--;
    if (d.n == 0)
        return;
    struct pend last = d.heap[d.n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= d.n)
            break;
        if (c + 1 < d.n && before(&d.heap[c + 1], &d.heap[c]))
            c++;
        if (!before(&d.heap[c], &last))
            break;
        d.heap[i] = d.heap[c];
        i = c;
    }
    d.heap[i] = last;
}

static void *device_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "mssim-device");
    pthread_mutex_lock(&d.lock);
    for (;;) {
        if (d.n == 0) {
            pthread_cond_wait(&d.cv_work, &d.lock);
            continue;
        }
        uint64_t now = mssim_now_ns();
        if (d.heap[0].visible > now) {
            struct timespec ts = {.tv_sec = (time_t)(d.heap[0].visible / 1000000000ull),
                                  .tv_nsec = (long)(d.heap[0].visible % 1000000000ull)};
            pthread_cond_timedwait(&d.cv_work, &d.lock, &ts);
            continue;
        }
        struct pend p;
        heap_pop_locked(&p);
        d.appending = true;
        pthread_mutex_unlock(&d.lock);
        int32_t kind;
        memcpy(&kind, p.rec, sizeof(kind));
        /* Disable flushed this kind already; a launch that raced with it is not recorded. */
        if (sim_kind_enabled(kind))
            sim_append(p.rec, p.size);
        pthread_mutex_lock(&d.lock);
        d.appending = false;
        /* A reset may have zeroed the counter while we appended. */
        if (d.pending[p.device] > 0) {
            d.pending[p.device]--;
            d.total--;
        }
        pthread_cond_broadcast(&d.cv_sync);
    }
    return NULL;
}

static int start_locked(void)
{
    pthread_t t;
    int rc;
    if (d.started)
        return 0;
    /* it lives inside someone else's process: every signal blocked (thr.h) */
    rc = thr_start(&t, "mssim-device", device_main, NULL, THR_DETACHED);
    if (rc != 0)
        return rc;
    d.started = true;
    return 0;
}

int sim_dev_submit(uint32_t device, uint64_t visible_ns, const void *rec, size_t size)
{
    int rc = 0;
    if (size > SIM_DEV_REC_MAX || device >= SIM_MAX_DEVICES)
        return -EINVAL;
    pthread_mutex_lock(&d.lock);
    if ((rc = start_locked()) != 0)
        goto out;
    if (d.n == d.cap) {
        size_t ncap = d.cap ? d.cap * 2 : 1024;
        struct pend *nh = realloc(d.heap, ncap * sizeof(*nh));
        if (!nh) {
            rc = -ENOMEM;
            goto out;
        }
        d.heap = nh;
        d.cap = ncap;
    }
    struct pend p = {.visible = visible_ns, .seq = d.seq++, .device = device, .size = (uint32_t)size};
    memcpy(p.rec, rec, size);
    size_t i = d.n++;
    while (i > 0 && before(&p, &d.heap[(i - 1) / 2])) {
        d.heap[i] = d.heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    d.heap[i] = p;
    d.pending[device]++;
    d.total++;
    if (i == 0)
        pthread_cond_signal(&d.cv_work);
out:
    pthread_mutex_unlock(&d.lock);
    return rc;
}

static bool busy_locked(int32_t device)
{
    if (device >= 0)
        return d.pending[device] > 0;
    return d.total > 0;
}

void sim_dev_synchronize(int32_t device)
{
    uint64_t until = 0;
    pthread_mutex_lock(&d.lock);
    while (busy_locked(device))
        pthread_cond_wait(&d.cv_sync, &d.lock);
    /* Work that produced no record (unsubscribed, kind off) still occupies the device. */
    for (size_t i = 0; i < d.tl_cap; i++) {
        if (d.tls[i].key && (device < 0 || ((d.tls[i].key - 1) >> 32) == (uint64_t)device) && d.tls[i].busy > until)
            until = d.tls[i].busy;
    }
    pthread_mutex_unlock(&d.lock);
    for (uint64_t now = mssim_now_ns(); now < until; now = mssim_now_ns()) {
        struct timespec ts = {.tv_sec = (time_t)((until - now) / 1000000000ull),
                              .tv_nsec = (long)((until - now) % 1000000000ull)};
        nanosleep(&ts, NULL);
    }
}

static int cmp_pend(const void *a, const void *b)
{
    return before(a, b) ? -1 : before(b, a) ? 1 : 0;
}

void sim_dev_flush_kind(int32_t kind)
{
    struct pend *out = NULL;
    size_t nout = 0;
    pthread_mutex_lock(&d.lock);
    /* A record popped just before this call must land before the caller's next FlushAll. */
    while (d.appending)
        pthread_cond_wait(&d.cv_sync, &d.lock);
    if (d.n > 0)
        out = malloc(d.n * sizeof(*out));
    if (out) {
        size_t keep = 0;
        for (size_t i = 0; i < d.n; i++) {
            int32_t k;
            memcpy(&k, d.heap[i].rec, sizeof(k));
            if (k == kind)
                out[nout++] = d.heap[i];
            else
                d.heap[keep++] = d.heap[i];
        }
        d.n = keep;
        /* keep the heap property: a sorted array is a valid min-heap */
        qsort(d.heap, d.n, sizeof(*d.heap), cmp_pend);
    }
    pthread_mutex_unlock(&d.lock);
    if (!out)
        return;
    qsort(out, nout, sizeof(*out), cmp_pend);
    for (size_t i = 0; i < nout; i++)
        sim_append(out[i].rec, out[i].size);
    pthread_mutex_lock(&d.lock);
    for (size_t i = 0; i < nout; i++) {
        if (d.pending[out[i].device] > 0) {
            d.pending[out[i].device]--;
            d.total--;
        }
    }
    pthread_cond_broadcast(&d.cv_sync);
    pthread_cond_signal(&d.cv_work);
    pthread_mutex_unlock(&d.lock);
    free(out);
}

void sim_dev_reset(void)
{
    pthread_mutex_lock(&d.lock);
    d.n = 0;
    memset(d.pending, 0, sizeof(d.pending));
    d.total = 0;
    if (d.tls)
        memset(d.tls, 0, d.tl_cap * sizeof(*d.tls));
    d.tl_used = 0;
    pthread_cond_broadcast(&d.cv_sync);
    pthread_cond_broadcast(&d.cv_work);
    pthread_mutex_unlock(&d.lock);
}
