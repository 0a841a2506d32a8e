/* Unit tests of the daemon event loop (loop.h): one-shot and periodic timers, re-arming, fd
 * readiness and interest changes, signals delivered as events, stop from a callback and before
 * the run, freeing an event from its own callback. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/log.h"
#include "daemon/loop.h"

struct counts {
    struct loop *loop;
    int oneshot, periodic, fd_read, fd_write, sig;
    int last_sig;
    uint64_t oneshot_at, periodic_first_at;
    struct loop_event *self;
};

static void stop_cb(struct loop_event *ev, void *arg)
{
    (void)ev;
    loop_stop(arg);
}

static void oneshot_cb(struct loop_event *ev, void *arg)
{
    struct counts *c = arg;
    (void)ev;
    c->oneshot++;
    c->oneshot_at = clock_mono_ns();
}

static void periodic_cb(struct loop_event *ev, void *arg)
{
    struct counts *c = arg;
    (void)ev;
    if (c->periodic++ == 0)
        c->periodic_first_at = clock_mono_ns();
}

static void test_timers(void **state)
{
    struct loop *l;
    struct loop_event *a, *b, *stop, *idle;
    struct counts c = { 0 };
    (void)state;
    assert_int_equal(loop_create(&l), 0);
    uint64_t t0 = clock_mono_ns();
    assert_int_equal(loop_timer_add(l, 20, false, oneshot_cb, &c, &a), 0);
    assert_int_equal(loop_timer_add(l, 10, true, periodic_cb, &c, &b), 0);
    assert_int_equal(loop_timer_add(l, 0, false, oneshot_cb, &c, &idle), 0);   /* disarmed */
    assert_int_equal(loop_timer_add(l, 200, false, stop_cb, l, &stop), 0);
    assert_int_equal(loop_run(l), 0);
    uint64_t took = clock_mono_ns() - t0;
    assert_int_equal(c.oneshot, 1);                    /* once, and the disarmed one never */
    /* libevent's coarse clock: a timer may fire up to one tick (<= 10 ms) early */
    assert_true(c.oneshot_at - t0 >= 10000000ull);
    assert_true(c.periodic >= 5);                      /* ~19 on a quiet machine */
    assert_true(c.periodic <= 22);
    assert_true(c.periodic_first_at - t0 >= 1000000ull);
    assert_true(took >= 190000000ull);
    loop_event_free(a);
    loop_event_free(b);
    loop_event_free(idle);
    loop_event_free(stop);
    loop_destroy(l);
}

static void rearm_cb(struct loop_event *ev, void *arg)
{
    struct counts *c = arg;
    (void)ev;
    /* pushing the deadline out: the victim must not fire before the stop timer */
    loop_timer_arm(c->self, 1000);
    c->oneshot++;
}

static void test_timer_rearm_and_disarm(void **state)
{
    struct loop *l;
    struct loop_event *victim, *pusher, *stop, *gone;
    struct counts c = { 0 }, v = { 0 };
    (void)state;
    assert_int_equal(loop_create(&l), 0);
    assert_int_equal(loop_timer_add(l, 50, false, oneshot_cb, &v, &victim), 0);
    c.self = victim;
    assert_int_equal(loop_timer_add(l, 20, true, rearm_cb, &c, &pusher), 0);
    assert_int_equal(loop_timer_add(l, 10, false, oneshot_cb, &v, &gone), 0);
    loop_timer_disarm(gone);
    assert_int_equal(loop_timer_add(l, 150, false, stop_cb, l, &stop), 0);
    assert_int_equal(loop_run(l), 0);
    assert_true(c.oneshot >= 2);
    assert_int_equal(v.oneshot, 0);
    /* a fired one-shot timer can be armed again */
    loop_event_free(pusher);
    assert_int_equal(loop_timer_arm(victim, 5), 0);
    assert_int_equal(loop_timer_arm(stop, 40), 0);
    assert_int_equal(loop_run(l), 0);
    assert_int_equal(v.oneshot, 1);
    loop_destroy(l);    /* frees victim, gone and stop */
}

static void fd_cb(struct loop_event *ev, int fd, unsigned events, void *arg)
{
    struct counts *c = arg;
    char buf[16];
    if (events & LOOP_READ) {
        c->fd_read++;
        assert_int_equal(read(fd, buf, sizeof(buf)), 3);
        assert_memory_equal(buf, "abc", 3);
        /* now watch the same socket for writability instead */
        assert_int_equal(loop_fd_set(ev, LOOP_WRITE), 0);
        return;
    }
    if (events & LOOP_WRITE) {
        c->fd_write++;
        assert_int_equal(loop_fd_set(ev, 0), 0);   /* paused: no more callbacks */
        loop_stop(c->loop);
    }
}

static void test_fd_events(void **state)
{
    struct loop *l;
    struct loop_event *ev, *guard;
    struct counts c = { 0 };
    int sv[2];
    (void)state;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    assert_int_equal(loop_create(&l), 0);
    c.loop = l;
    assert_int_equal(loop_fd_add(l, sv[0], LOOP_READ, fd_cb, &c, &ev), 0);
    assert_int_equal(loop_timer_add(l, 5000, false, stop_cb, l, &guard), 0);
    assert_int_equal(write(sv[1], "abc", 3), 3);
    assert_int_equal(loop_run(l), 0);
    assert_int_equal(c.fd_read, 1);
    assert_int_equal(c.fd_write, 1);
    /* paused: data waiting does not wake the loop; only the guard timer ends it */
    assert_int_equal(write(sv[1], "xyz", 3), 3);
    assert_int_equal(loop_timer_arm(guard, 30), 0);
    assert_int_equal(loop_run(l), 0);
    assert_int_equal(c.fd_read, 1);
    loop_event_free(ev);
    loop_event_free(guard);
    loop_destroy(l);
    close(sv[0]);
    close(sv[1]);
}

static void sig_cb(struct loop_event *ev, int signo, void *arg)
{
    struct counts *c = arg;
    (void)ev;
    c->sig++;
    c->last_sig = signo;
    loop_stop(c->loop);
}

static void raise_cb(struct loop_event *ev, void *arg)
{
    (void)ev;
    (void)arg;
    kill(getpid(), SIGUSR1);
}

static void test_signal_event(void **state)
{
    struct loop *l;
    struct loop_event *sig, *raiser, *guard;
    struct counts c = { 0 };
    (void)state;
    assert_int_equal(loop_create(&l), 0);
    c.loop = l;
    assert_int_equal(loop_signal_add(l, SIGUSR1, sig_cb, &c, &sig), 0);
    assert_int_equal(loop_timer_add(l, 10, false, raise_cb, NULL, &raiser), 0);
    assert_int_equal(loop_timer_add(l, 5000, false, stop_cb, l, &guard), 0);
    assert_int_equal(loop_run(l), 0);
    assert_int_equal(c.sig, 1);
    assert_int_equal(c.last_sig, SIGUSR1);
    /* a signal that arrives while the loop is not running is delivered on the next run */
    kill(getpid(), SIGUSR1);
    assert_int_equal(loop_run(l), 0);
    assert_int_equal(c.sig, 2);
    loop_event_free(sig);
    loop_event_free(raiser);
    loop_event_free(guard);
    loop_destroy(l);
}

static void self_free_cb(struct loop_event *ev, void *arg)
{
    struct counts *c = arg;
    c->periodic++;
    loop_event_free(ev);     /* a periodic timer freeing itself: must not fire again */
}

static void test_stop(void **state)
{
    struct loop *l;
    struct loop_event *tick, *stop, *self;
    struct counts c = { 0 }, s = { 0 };
    (void)state;
    assert_int_equal(loop_create(&l), 0);
    /* nothing registered: returns at once instead of blocking forever */
    assert_int_equal(loop_run(l), 0);
    /* a stop requested before the run makes it return without dispatching */
    assert_int_equal(loop_timer_add(l, 1, true, periodic_cb, &c, &tick), 0);
    loop_stop(l);
    assert_int_equal(loop_run(l), 0);
    assert_int_equal(c.periodic, 0);
    /* stop from a callback ends the run although a periodic timer is still pending */
    assert_int_equal(loop_timer_add(l, 5, true, self_free_cb, &s, &self), 0);
    assert_int_equal(loop_timer_add(l, 40, false, stop_cb, l, &stop), 0);
    assert_int_equal(loop_run(l), 0);
    assert_true(c.periodic >= 3);
    assert_int_equal(s.periodic, 1);
    loop_event_free(tick);
    loop_event_free(stop);
    loop_destroy(l);
    loop_destroy(NULL);
    loop_event_free(NULL);
}

int main(void)
{
    log_set_level(LOG_LVL_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timers),
        cmocka_unit_test(test_timer_rearm_and_disarm),
        cmocka_unit_test(test_fd_events),
        cmocka_unit_test(test_signal_event),
        cmocka_unit_test(test_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
