/* test_backlog: the undelivered-data FIFO alone, through a scripted send function — oldest
 * first, byte and entry caps dropping (and counting) the oldest, a payload larger than the
 * cap, a flush that stops at the first failure and keeps the rest in order, and a payload
 * queued while another thread holds the flush; and dyno's data channel over it: a send to an
 * absent daemon is kept (or dropped and counted with MSMONITOR_DATA_BACKLOG_BYTES=0), a bad
 * cap warns once and keeps the default. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <stdlib.h>

#include "../../logcap.h"
#include "plugin/control/backlog.h"
#include "plugin/control/dynolog_link.h"
#include "plugin/penv.h"

/* Records what was delivered; fails every call from `fail_from` on (counted from 0). */
struct sink {
    char got[64][16];
    int n, calls, fail_from;
};

static int sink_send(void *ctx, const void *data, size_t len)
{
    struct sink *s = ctx;
    int call = s->calls++;

    if (s->fail_from >= 0 && call >= s->fail_from)
        return -ECONNREFUSED;
    if (s->n < 64) {
        snprintf(s->got[s->n], sizeof(s->got[0]), "%.*s", (int)len, (const char *)data);
        s->n++;
    }
    return 0;
}

static void push_str(struct backlog *b, const char *s)
{
    assert_int_equal(backlog_push(b, s, strlen(s)), 0);
}

static void test_fifo_order(void **state)
{
    struct sink s = { .fail_from = -1 };
    struct backlog_stats st;
    struct backlog *b;

    (void)state;
    assert_int_equal(backlog_create(1024, 0, &b), 0);
    push_str(b, "a");
    push_str(b, "b");
    push_str(b, "c");
    assert_int_equal(backlog_send(b, "d", 1, sink_send, &s), 0);
    assert_int_equal(s.n, 4);
    assert_string_equal(s.got[0], "a");
    assert_string_equal(s.got[1], "b");
    assert_string_equal(s.got[2], "c");
    assert_string_equal(s.got[3], "d");
    backlog_get_stats(b, &st);
    assert_int_equal(st.entries, 0);
    assert_int_equal(st.bytes, 0);
    assert_int_equal(st.flushed, 3);  /* "d" went out directly */
    assert_int_equal(st.dropped, 0);
    backlog_destroy(b);
}

static void test_entry_cap_drops_oldest(void **state)
{
    struct sink s = { .fail_from = -1 };
    struct backlog_stats st;
    struct backlog *b;
    char v[8];

    (void)state;
    assert_int_equal(backlog_create(1 << 20, 3, &b), 0);
    for (int i = 0; i < 5; i++) {
        snprintf(v, sizeof(v), "p%d", i);
        push_str(b, v);
    }
    backlog_get_stats(b, &st);
    assert_int_equal(st.entries, 3);
    assert_int_equal(st.dropped, 2);
    assert_int_equal(backlog_take_dropped(b), 2);
    assert_int_equal(backlog_take_dropped(b), 0); /* each drop taken once */
    assert_int_equal(backlog_send(b, NULL, 0, sink_send, &s), 0);
    assert_int_equal(s.n, 3);
    assert_string_equal(s.got[0], "p2");
    assert_string_equal(s.got[2], "p4");
    backlog_get_stats(b, &st);
    assert_int_equal(st.dropped, 2);  /* the total stays */
    backlog_destroy(b);
}

static void test_byte_cap_drops_oldest(void **state)
{
    struct sink s = { .fail_from = -1 };
    struct backlog_stats st;
    struct backlog *b;

    (void)state;
    assert_int_equal(backlog_create(10, 0, &b), 0);
    push_str(b, "aaaa");
    push_str(b, "bbbb");
    push_str(b, "cccc");    /* 12 > 10: "aaaa" goes */
    backlog_get_stats(b, &st);
    assert_int_equal(st.entries, 2);
    assert_int_equal(st.bytes, 8);
    assert_int_equal(st.dropped, 1);
    push_str(b, "0123456789X"); /* larger than the cap: itself dropped, the rest kept */
    backlog_get_stats(b, &st);
    assert_int_equal(st.entries, 2);
    assert_int_equal(st.dropped, 2);
    push_str(b, "0123456789"); /* exactly the cap: everything older goes */
    backlog_get_stats(b, &st);
    assert_int_equal(st.entries, 1);
    assert_int_equal(st.bytes, 10);
    assert_int_equal(st.dropped, 4);
    assert_int_equal(backlog_send(b, NULL, 0, sink_send, &s), 0);
    assert_int_equal(s.n, 1);
    assert_string_equal(s.got[0], "0123456789");
    backlog_destroy(b);
}

static void test_zero_cap_keeps_nothing(void **state)
{
    struct sink s = { .fail_from = 0 };
    struct backlog_stats st;
    struct backlog *b;

    (void)state;
    assert_int_equal(backlog_create(0, 0, &b), 0);
    assert_int_equal(backlog_send(b, "x", 1, sink_send, &s), -ECONNREFUSED);
    backlog_get_stats(b, &st);
    assert_int_equal(st.entries, 0);
    assert_int_equal(st.dropped, 1);
    backlog_destroy(b);
}

static void test_flush_stops_at_first_failure(void **state)
{
    struct sink s = { .fail_from = 2 };
    struct backlog_stats st;
    struct backlog *b;

    (void)state;
    assert_int_equal(backlog_create(1024, 0, &b), 0);
    push_str(b, "a");
    push_str(b, "b");
    push_str(b, "c");
    push_str(b, "d");
    /* a, b delivered; c fails: d and the new e are not tried, all kept in order */
    assert_int_equal(backlog_send(b, "e", 1, sink_send, &s), -ECONNREFUSED);
    assert_int_equal(s.calls, 3);
    assert_int_equal(s.n, 2);
    backlog_get_stats(b, &st);
    assert_int_equal(st.entries, 3);
    assert_int_equal(st.flushed, 2);
    /* the daemon is back */
    s.fail_from = -1;
    assert_int_equal(backlog_send(b, NULL, 0, sink_send, &s), 0);
    assert_int_equal(s.n, 5);
    assert_string_equal(s.got[2], "c");
    assert_string_equal(s.got[3], "d");
    assert_string_equal(s.got[4], "e");
    /* a failing new payload with an empty queue is kept too */
    s.fail_from = 0;
    s.calls = 0;
    assert_int_equal(backlog_send(b, "f", 1, sink_send, &s), -ECONNREFUSED);
    backlog_get_stats(b, &st);
    assert_int_equal(st.entries, 1);
    assert_int_equal(st.dropped, 0);
    backlog_destroy(b);
}

/* A sender that finds another one flushing queues its payload and returns at once; the
 * flushing one delivers it before it returns. */
struct slow {
    struct backlog *b;
    struct sink s;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stage; /* 1: the flusher is inside a send; 2: the other sender has queued */
};

static int slow_send(void *ctx, const void *data, size_t len)
{
    struct slow *w = ctx;

    pthread_mutex_lock(&w->mu);
    if (w->stage == 0) {
        w->stage = 1;
        pthread_cond_broadcast(&w->cv);
        while (w->stage != 2)
            pthread_cond_wait(&w->cv, &w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return sink_send(&w->s, data, len);
}

static void *other_sender(void *arg)
{
    struct slow *w = arg;

    pthread_mutex_lock(&w->mu);
    while (w->stage != 1)
        pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
    assert_int_equal(backlog_send(w->b, "late", 4, slow_send, w), 0);      /* queued, not sent */
    assert_int_equal(backlog_send(w->b, NULL, 0, slow_send, w), -EBUSY);   /* flush only */
    pthread_mutex_lock(&w->mu);
    w->stage = 2;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static void test_concurrent_sender_queues(void **state)
{
    struct slow w = { .s = { .fail_from = -1 }, .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
    struct backlog_stats st;
    pthread_t t;

    (void)state;
    assert_int_equal(backlog_create(1024, 0, &w.b), 0);
    push_str(w.b, "old");
    assert_int_equal(pthread_create(&t, NULL, other_sender, &w), 0);
    assert_int_equal(backlog_send(w.b, "new", 3, slow_send, &w), 0);
    pthread_join(t, NULL);
    assert_int_equal(w.s.n, 3);
    assert_string_equal(w.s.got[0], "old");
    assert_string_equal(w.s.got[1], "late"); /* queued while "old" was in flight */
    assert_string_equal(w.s.got[2], "new");
    backlog_get_stats(w.b, &st);
    assert_int_equal(st.entries, 0);
    backlog_destroy(w.b);
}

/* No sockets in the directory: every send fails at once (ENOENT). */
static void dyno_cap_case(const char *cap, size_t want_entries, uint64_t want_dropped, int want_warning)
{
    char tmpl[] = "/tmp/pc_backlog_XXXXXX";
    struct dynolog_data_stats st;

    assert_non_null(mkdtemp(tmpl));
    setenv("MSMONITOR_SOCKET_DIR", tmpl, 1);
    if (cap)
        setenv("MSMONITOR_DATA_BACKLOG_BYTES", cap, 1);
    else
        unsetenv("MSMONITOR_DATA_BACKLOG_BYTES");
    penv_reload();
    dynolog_reset();
    logcap_clear();
    assert_int_equal(dynolog_send_data(NULL, "{\"a\":1}", 7), -ENOENT);
    assert_int_equal(dynolog_send_data(NULL, "{\"a\":2}", 7), -ENOENT);
    dynolog_data_backlog(&st);
    assert_int_equal(st.entries, want_entries);
    assert_int_equal(st.dropped, want_dropped);
    assert_int_equal(logcap_has("MSMONITOR_DATA_BACKLOG_BYTES='"), want_warning);
    assert_int_equal(dynolog_flush_data(), want_entries ? -ENOENT : 0);
    dynolog_reset();
    unsetenv("MSMONITOR_DATA_BACKLOG_BYTES");
    unsetenv("MSMONITOR_SOCKET_DIR");
    penv_reload();
    rmdir(tmpl);
}

static void test_dyno_keeps_undelivered(void **state)
{
    (void)state;
    assert_int_equal(logcap_open(), 0);
    dyno_cap_case(NULL, 2, 0, 0);
    dyno_cap_case("0", 0, 2, 0);
    dyno_cap_case("7", 1, 1, 0);          /* one payload fits: the older is dropped */
    dyno_cap_case("lots", 2, 0, 1);       /* warned, the default */
    dyno_cap_case("999999999999", 2, 0, 1);
    logcap_close();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo_order),
        cmocka_unit_test(test_entry_cap_drops_oldest),
        cmocka_unit_test(test_byte_cap_drops_oldest),
        cmocka_unit_test(test_zero_cap_keeps_nothing),
        cmocka_unit_test(test_flush_stops_at_first_failure),
        cmocka_unit_test(test_concurrent_sender_queues),
        cmocka_unit_test(test_dyno_keeps_undelivered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
