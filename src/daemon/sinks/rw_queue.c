/* rw_queue: a mutex + condition variable FIFO of snapshot batches with drop-oldest bounds.
 * The loop thread pushes (never blocks beyond the mutex); the sender thread takes. */
#include "daemon/sinks/rw_queue.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int rw_batch_create(int64_t ts_ms, struct rw_batch **ret)
{
    struct rw_batch *b = calloc(1, sizeof(*b));
    *ret = NULL;
    if (!b)
        return -ENOMEM;
    b->ts_ms = ts_ms;
    *ret = b;
    return 0;
}

static int reserve(struct rw_batch *b, size_t n)
{
    if (b->len + n <= b->cap)
        return 0;
    size_t nc = b->cap ? b->cap : 4096;
    while (nc < b->len + n)
        nc *= 2;
    char *p = realloc(b->data, nc);
    if (!p)
        return -ENOMEM;
    b->data = p;
    b->cap = nc;
    return 0;
}

int rw_batch_reserve(struct rw_batch *b, size_t n) { return n ? reserve(b, n) : 0; }

int rw_batch_add(struct rw_batch *b, const struct promfam_sample *s)
{
    size_t need = 1 + strlen(s->family) + 1 + sizeof(double);
    if (s->nlabels > 255)
        return -E2BIG;
    for (size_t i = 0; i < s->nlabels; i++)
        need += strlen(s->labels[i].name) + 1 + strlen(s->labels[i].value) + 1;
    if (reserve(b, need) != 0)
        return -ENOMEM;
    char *p = b->data + b->len;
    *p++ = (char)(unsigned char)s->nlabels;
    size_t l = strlen(s->family) + 1;
    memcpy(p, s->family, l);
    p += l;
    for (size_t i = 0; i < s->nlabels; i++) {
        l = strlen(s->labels[i].name) + 1;
        memcpy(p, s->labels[i].name, l);
        p += l;
        l = strlen(s->labels[i].value) + 1;
        memcpy(p, s->labels[i].value, l);
        p += l;
    }
    memcpy(p, &s->value, sizeof(double));
    b->len += need;
    b->nsamples++;
    return 0;
}

void rw_batch_destroy(struct rw_batch *b)
{
    while (b) {
        struct rw_batch *nx = b->next;
        free(b->data);
        free(b);
        b = nx;
    }
}

static const char *str_at(const struct rw_batch *b, size_t *off)
{
    const char *s = b->data + *off;
    const char *z = memchr(s, '\0', b->len - *off);
    if (!z)
        return NULL;
    *off += (size_t)(z - s) + 1;
    return s;
}

int rw_batch_next(const struct rw_batch *b, size_t *off, struct rw_sample_view *v)
{
    if (*off >= b->len)
        return 0;
    size_t n = (unsigned char)b->data[(*off)++];
    if (!(v->family = str_at(b, off)))
        return -EINVAL;
    for (size_t i = 0; i < 2 * n; i++)
        if (!(v->labels[i] = str_at(b, off)))
            return -EINVAL;
    v->nlabels = n;
    if (b->len - *off < sizeof(double))
        return -EINVAL;
    memcpy(&v->value, b->data + *off, sizeof(double));
    *off += sizeof(double);
    return 1;
}

void rw_queue_init(struct rw_queue *q, size_t max_samples, size_t max_bytes)
{
    memset(q, 0, sizeof(*q));
    pthread_mutex_init(&q->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&q->cv, &ca);
    pthread_condattr_destroy(&ca);
    q->max_samples = max_samples;
    q->max_bytes = max_bytes;
}

void rw_queue_fini(struct rw_queue *q)
{
    rw_batch_destroy(q->head);
    q->head = q->tail = NULL;
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
}

static struct rw_batch *pop_head(struct rw_queue *q)
{
    struct rw_batch *b = q->head;
    if (!b)
        return NULL;
    q->head = b->next;
    if (!q->head)
        q->tail = NULL;
    b->next = NULL;
    q->samples -= b->nsamples;
    q->bytes -= b->len;
    return b;
}

uint64_t rw_queue_push(struct rw_queue *q, struct rw_batch *b)
{
    uint64_t dropped = 0;
    pthread_mutex_lock(&q->mu);
    q->pushed_samples += b->nsamples;
    if (b->nsamples > q->max_samples || b->len > q->max_bytes) {
        dropped = b->nsamples;
        rw_batch_destroy(b);
        b = NULL;
    }
    while (b && q->head && (q->samples + b->nsamples > q->max_samples || q->bytes + b->len > q->max_bytes)) {
        struct rw_batch *old = pop_head(q);
        dropped += old->nsamples;
        rw_batch_destroy(old);
    }
    if (b) {
        b->next = NULL;
        if (q->tail)
            q->tail->next = b;
        else
            q->head = b;
        q->tail = b;
        q->samples += b->nsamples;
        q->bytes += b->len;
        pthread_cond_broadcast(&q->cv);
    }
    q->dropped_samples += dropped;
    pthread_mutex_unlock(&q->mu);
    return dropped;
}

struct rw_batch *rw_queue_take(struct rw_queue *q, size_t max_samples, bool drain)
{
    struct rw_batch *first = NULL, *last = NULL;
    size_t n = 0;
    pthread_mutex_lock(&q->mu);
    while (!q->head && !q->stop)
        pthread_cond_wait(&q->cv, &q->mu);
    if (q->stop && !drain)
        goto out;
    while (q->head && (!first || n + q->head->nsamples <= max_samples)) {
        struct rw_batch *b = pop_head(q);
        n += b->nsamples;
        if (last)
            last->next = b;
        else
            first = b;
        last = b;
    }
out:
    pthread_mutex_unlock(&q->mu);
    return first;
}

void rw_queue_stop(struct rw_queue *q)
{
    pthread_mutex_lock(&q->mu);
    q->stop = true;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

bool rw_queue_wait_stop(struct rw_queue *q, uint64_t ms)
{
    struct timespec ts;
    bool stopped;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&q->mu);
    while (!q->stop)
        if (pthread_cond_timedwait(&q->cv, &q->mu, &ts) != 0)
            break;
    stopped = q->stop;
    pthread_mutex_unlock(&q->mu);
    return stopped;
}

void rw_queue_counts(struct rw_queue *q, size_t *ret_samples, size_t *ret_bytes, uint64_t *ret_pushed,
                     uint64_t *ret_dropped)
{
    pthread_mutex_lock(&q->mu);
    if (ret_samples)
        *ret_samples = q->samples;
    if (ret_bytes)
        *ret_bytes = q->bytes;
    if (ret_pushed)
        *ret_pushed = q->pushed_samples;
    if (ret_dropped)
        *ret_dropped = q->dropped_samples;
    pthread_mutex_unlock(&q->mu);
}
