/* test_asyncw: the bounded async writer on real threads: the unit budget (a cut item, a refused
 * one, both counted), a full queue behind a stalled writer drops and counts, back-pressure
 * from several producers loses nothing and keeps each producer's order, flush returns after
 * every earlier item is written and synced, stop joins the writer and drain writes the rest. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "plugin/outputs/asyncw.h"

#define NPROD 4

/* An item of `weight` units numbered seq..seq+weight-1 from producer id. */
struct titem {
    struct asyncw_item q;
    int id;
    long seq;
};

struct sink {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool gate_closed;     /* write() blocks while set: a stalled writer */
    bool in_write;        /* a write() is blocked at the gate */
    long next[NPROD];     /* next expected unit per producer */
    long units;           /* units written */
    long items, syncs, discarded;
    long synced_units;    /* units written at the last sync */
    pthread_t last_thread;
};

static void s_write(void *ctx, struct asyncw_item *it)
{
    struct sink *s = ctx;
    struct titem *t = (struct titem *)it;
    pthread_mutex_lock(&s->mu);
    s->in_write = true;
    pthread_cond_broadcast(&s->cv);
    while (s->gate_closed)
        pthread_cond_wait(&s->cv, &s->mu);
    s->in_write = false;
    assert_true(t->seq >= s->next[t->id]); /* per-producer order; a gap is a counted drop */
    s->next[t->id] = t->seq + (long)t->q.weight;
    s->units += (long)t->q.weight;
    s->items++;
    s->last_thread = pthread_self();
    pthread_mutex_unlock(&s->mu);
    free(t);
}

static void s_sync(void *ctx)
{
    struct sink *s = ctx;
    pthread_mutex_lock(&s->mu);
    s->syncs++;
    s->synced_units = s->units;
    pthread_mutex_unlock(&s->mu);
}

static void s_cut(void *ctx, struct asyncw_item *it, size_t keep)
{
    (void)ctx;
    it->weight = keep; /* units are numbered from seq: keeping the first ones is a prefix */
}

static void s_discard(void *ctx, struct asyncw_item *it)
{
    struct sink *s = ctx;
    pthread_mutex_lock(&s->mu);
    s->discarded++;
    pthread_mutex_unlock(&s->mu);
    free(it);
}

static const struct asyncw_ops ops = {.write = s_write, .sync = s_sync, .cut = s_cut, .discard = s_discard};
/* without discard, items never written are free()d */
static const struct asyncw_ops ops_nodiscard = {.write = s_write, .sync = s_sync};

static struct titem *titem(int id, long seq, size_t weight)
{
    struct titem *t = calloc(1, sizeof(*t));
    assert_non_null(t);
    t->id = id;
    t->seq = seq;
    t->q.weight = weight;
    return t;
}

static void sink_init(struct sink *s)
{
    memset(s, 0, sizeof(*s));
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
}

static void sink_fini(struct sink *s)
{
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
}

static struct asyncw *mk(struct sink *s, size_t cap, size_t batch, uint64_t interval_ns, uint64_t bp_ns,
                         _Atomic uint64_t *cpu)
{
    struct asyncw_cfg c = {.name = "MsMonitorTestW", .capacity = cap, .batch = batch, .interval_ns = interval_ns,
                           .backpressure_ns = bp_ns, .cpu_ns = cpu, .ops = &ops, .ctx = s};
    struct asyncw *w = NULL;
    assert_int_equal(asyncw_create(&c, &w), 0);
    assert_non_null(w);
    return w;
}

#define HOUR_NS (3600ull * 1000000000ull)

static void test_budget_cut_refuse(void **state)
{
    (void)state;
    struct sink s;
    struct asyncw *w = NULL;
    struct asyncw_cfg bad = {.capacity = 0, .ops = &ops};
    size_t d;

    assert_int_equal(asyncw_create(&bad, &w), -EINVAL);
    sink_init(&s);
    w = mk(&s, 7, 0, HOUR_NS, 0, NULL); /* no writer thread: nothing drains until asked */
    assert_int_equal(asyncw_push(w, &titem(0, 0, 3)->q, &d), 0);
    assert_int_equal(d, 0);
    assert_int_equal(asyncw_push(w, &titem(0, 3, 1)->q, &d), 0);
    /* 5 units, 3 free: cut to its first 3, the other 2 counted */
    assert_int_equal(asyncw_push(w, &titem(0, 4, 5)->q, &d), 0);
    assert_int_equal(d, 2);
    struct titem *x = titem(0, 9, 2);
    assert_int_equal(asyncw_push(w, &x->q, &d), -ENOSPC); /* the caller keeps x */
    assert_int_equal(d, 2);
    assert_int_equal(asyncw_dropped(w), 4);
    struct titem *zero = titem(0, 0, 0);
    assert_int_equal(asyncw_push(w, &zero->q, NULL), -EINVAL);
    free(zero);
    asyncw_drain(w);
    assert_int_equal(s.items, 3);
    assert_int_equal(s.units, 7);
    assert_int_equal(s.next[0], 7);
    assert_int_equal(s.syncs, 1);
    assert_int_equal(asyncw_push(w, &x->q, NULL), 0); /* room again */
    asyncw_destroy(w);                                 /* discards what was never written */
    assert_int_equal(s.discarded, 1);
    assert_int_equal(s.items, 3);

    /* no cut op: an item that does not fit whole is refused whole; no discard op: free() */
    struct asyncw_cfg c = {.capacity = 4, .ops = &ops_nodiscard, .ctx = &s};
    assert_int_equal(asyncw_create(&c, &w), 0);
    assert_int_equal(asyncw_push(w, &titem(0, 0, 3)->q, NULL), 0);
    x = titem(0, 3, 2);
    assert_int_equal(asyncw_push(w, &x->q, &d), -ENOSPC);
    assert_int_equal(d, 2);
    free(x);
    asyncw_destroy(w); /* the queued item is free()d (ASan: no leak) */
    assert_int_equal(s.discarded, 1);
    sink_fini(&s);
}

/* A writer stuck in write() with the budget used up: pushes without back-pressure are
 * dropped and counted, nothing is lost silently, and everything taken is written in order. */
static void test_full_queue_counts_drops(void **state)
{
    (void)state;
    struct sink s;
    size_t d;
    long accepted = 0, dropped = 0;

    sink_init(&s);
    s.gate_closed = true;
    struct asyncw *w = mk(&s, 10, 1, HOUR_NS, 0, NULL);
    assert_int_equal(asyncw_start(w), 0);
    assert_int_equal(asyncw_push(w, &titem(0, 0, 4)->q, &d), 0);
    pthread_mutex_lock(&s.mu); /* batch 1: the writer takes it and blocks at the gate */
    while (!s.in_write)
        pthread_cond_wait(&s.cv, &s.mu);
    pthread_mutex_unlock(&s.mu);
    accepted = 4;
    for (long seq = 4; seq < 40; seq += 4) {
        struct titem *t = titem(0, seq, 4);
        int rc = asyncw_push(w, &t->q, &d);
        if (rc != 0)
            free(t);
        dropped += (long)d;
        accepted += 4 - (long)d;
    }
    /* 4 being written + 6 queued fill the 10 units; the other 30 are drops */
    assert_int_equal(accepted, 10);
    assert_int_equal(dropped, 30);
    assert_int_equal(asyncw_dropped(w), 30);
    pthread_mutex_lock(&s.mu);
    s.gate_closed = false;
    pthread_cond_broadcast(&s.cv);
    pthread_mutex_unlock(&s.mu);
    asyncw_flush(w);
    assert_int_equal(s.units, accepted);
    asyncw_destroy(w);
    assert_int_equal(s.discarded, 0);
    sink_fini(&s);
}

struct prod {
    struct asyncw *w;
    int id;
    long n;
};

static void *producer(void *a)
{
    struct prod *p = a;
    for (long seq = 0; seq < p->n;) {
        size_t k = 1 + (size_t)(seq % 5);
        if ((long)k > p->n - seq)
            k = (size_t)(p->n - seq);
        struct titem *t = titem(p->id, seq, k);
        size_t d = 0;
        if (asyncw_push(p->w, &t->q, &d) != 0)
            free(t);
        assert_int_equal(d, 0);
        seq += (long)k;
    }
    return NULL;
}

/* Several producers into a small queue with a long back-pressure bound: they wait for the
 * writer, nothing is dropped, each producer's units arrive in order; then flush and stop. */
static void test_backpressure_lossless_flush_stop(void **state)
{
    (void)state;
    struct sink s;
    pthread_t th[NPROD];
    struct prod pa[NPROD];
    _Atomic uint64_t cpu = 0;
    const long per = 20000;

    sink_init(&s);
    struct asyncw *w = mk(&s, 16, 8, HOUR_NS, HOUR_NS, &cpu);
    assert_int_equal(asyncw_start(w), 0);
    assert_int_equal(asyncw_start(w), 0); /* once */
    for (int i = 0; i < NPROD; i++) {
        pa[i] = (struct prod){w, i, per};
        assert_int_equal(pthread_create(&th[i], NULL, producer, &pa[i]), 0);
    }
    for (int i = 0; i < NPROD; i++)
        pthread_join(th[i], NULL);
    asyncw_flush(w); /* every unit pushed above is written and synced when it returns */
    pthread_mutex_lock(&s.mu);
    assert_int_equal(s.units, NPROD * per);
    assert_int_equal(s.synced_units, NPROD * per);
    for (int i = 0; i < NPROD; i++)
        assert_int_equal(s.next[i], per);
    pthread_t writer = s.last_thread;
    pthread_mutex_unlock(&s.mu);
    assert_false(pthread_equal(writer, pthread_self()));
    assert_int_equal(asyncw_dropped(w), 0);

    /* stop joins the writer (its CPU time is counted); later items wait for a drain, which
     * writes them on this thread */
    asyncw_stop(w);
    assert_true(atomic_load(&cpu) > 0);
    assert_int_equal(asyncw_push(w, &titem(0, per, 3)->q, NULL), 0);
    assert_int_equal(s.units, NPROD * per);
    asyncw_drain(w);
    assert_int_equal(s.units, NPROD * per + 3);
    assert_true(pthread_equal(s.last_thread, pthread_self()));
    asyncw_flush(w); /* no writer: returns at once, nothing queued */
    asyncw_destroy(w);
    assert_int_equal(s.discarded, 0);
    sink_fini(&s);
}

/* Below the batch and long before the interval the writer sleeps; flush still returns only
 * after the queued items are written. */
static void test_flush_wakes_sleeping_writer(void **state)
{
    (void)state;
    struct sink s;

    sink_init(&s);
    struct asyncw *w = mk(&s, 1000, 1000, HOUR_NS, HOUR_NS, NULL);
    assert_int_equal(asyncw_start(w), 0);
    for (long i = 0; i < 10; i++)
        assert_int_equal(asyncw_push(w, &titem(1, i * 2, 2)->q, NULL), 0);
    asyncw_flush(w);
    assert_int_equal(s.units, 20);
    assert_int_equal(s.synced_units, 20);
    asyncw_destroy(w);
    sink_fini(&s);
}

/* The spare stack keeps up to its cap, frees the rest, hands kept items back LIFO. */
static void test_spare_stack(void **state)
{
    (void)state;
    struct asyncw_spare *sp = NULL;
    void *a = malloc(16), *b = malloc(16), *c = malloc(16);

    assert_int_equal(asyncw_spare_create(2, &sp), 0);
    assert_null(asyncw_spare_get(sp));
    asyncw_spare_put(sp, a);
    asyncw_spare_put(sp, b);
    asyncw_spare_put(sp, c); /* full: freed (ASan would see a leak otherwise) */
    asyncw_spare_put(sp, NULL);
    assert_ptr_equal(asyncw_spare_get(sp), b);
    asyncw_spare_put(sp, b);
    asyncw_spare_destroy(sp); /* frees a and b */
    assert_null(asyncw_spare_get(NULL));
    asyncw_spare_put(NULL, malloc(8)); /* no stack: freed */
    asyncw_spare_destroy(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_budget_cut_refuse),
        cmocka_unit_test(test_full_queue_counts_drops),
        cmocka_unit_test(test_backpressure_lossless_flush_stop),
        cmocka_unit_test(test_flush_wakes_sleeping_writer),
        cmocka_unit_test(test_spare_stack),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
