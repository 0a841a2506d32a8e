/* loop: a thin layer over one libevent event_base. Each loop_event wraps one struct event and
 * a trampoline that turns libevent's (fd, short) into our callback types; the loop keeps its
 * events on a list so loop_destroy can free whatever an owner forgot. */
#include "daemon/loop.h"

#include <errno.h>
#include <event2/event.h>
#include <stdlib.h>
#include <sys/time.h>

enum loop_kind { LOOP_KIND_FD, LOOP_KIND_TIMER, LOOP_KIND_SIGNAL };

struct loop_event {
    struct loop *loop;
    struct event *ev;
    enum loop_kind kind;
    int fd;                  /* fd, or the signal number */
    bool periodic;
    union {
        loop_fd_fn fd;
        loop_timer_fn timer;
        loop_signal_fn sig;
    } fn;
    void *arg;
    struct loop_event *prev, *next;
};

struct loop {
    struct event_base *base;
    bool stop;
    struct loop_event *events;    /* every live loop_event, for loop_destroy */
};

int loop_create(struct loop **ret)
{
    struct loop *l = calloc(1, sizeof(*l));
    *ret = NULL;
    if (!l)
        return -ENOMEM;
    /* Default base: libevent reads CLOCK_MONOTONIC_COARSE, so a timer may fire up to one
     * kernel tick (<= 10 ms) early. EVENT_BASE_FLAG_PRECISE_TIMER would fix that with a
     * timerfd re-armed on every dispatch (one more syscall per wake-up on the IPC hot path);
     * the daemon's timers are 3 s and 60 s, so it does not need the precision. */
    l->base = event_base_new();
    if (!l->base) {
        free(l);
        return -ENOMEM;
    }
    *ret = l;
    return 0;
}

void loop_destroy(struct loop *l)
{
    if (!l)
        return;
    while (l->events)
        loop_event_free(l->events);
    event_base_free(l->base);
    free(l);
}

int loop_run(struct loop *l)
{
    int rc = 0;
    /* event_base_loop() forgets a break requested before it started, so keep our own flag */
    while (!l->stop) {
        int r = event_base_loop(l->base, 0);
        if (r < 0) {
            rc = -EIO;
            break;
        }
        if (r == 1)          /* nothing registered: nothing will ever wake us */
            break;
    }
    l->stop = false;
    return rc;
}

void *loop_backend(struct loop *l) { return l->base; }

void loop_stop(struct loop *l)
{
    l->stop = true;
    event_base_loopbreak(l->base);
}

static void trampoline(evutil_socket_t fd, short what, void *arg)
{
    struct loop_event *e = arg;
    /* the callback may free e: read nothing from it afterwards */
    switch (e->kind) {
    case LOOP_KIND_FD:
        e->fn.fd(e, (int)fd, ((what & EV_READ) ? LOOP_READ : 0u) | ((what & EV_WRITE) ? LOOP_WRITE : 0u),
                 e->arg);
        break;
    case LOOP_KIND_TIMER:
        e->fn.timer(e, e->arg);
        break;
    case LOOP_KIND_SIGNAL:
        e->fn.sig(e, (int)fd, e->arg);
        break;
    }
}

static struct loop_event *event_alloc(struct loop *l, enum loop_kind kind, int fd, void *arg)
{
    struct loop_event *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->loop = l;
    e->kind = kind;
    e->fd = fd;
    e->arg = arg;
    return e;
}

static void event_link(struct loop_event *e)
{
    struct loop *l = e->loop;
    e->next = l->events;
    if (l->events)
        l->events->prev = e;
    l->events = e;
}

static short ev_flags(unsigned events)
{
    return (short)(EV_PERSIST | ((events & LOOP_READ) ? EV_READ : 0) | ((events & LOOP_WRITE) ? EV_WRITE : 0));
}

/* What every kind of event shares once the caller has filled e: its libevent event on
 * (what, flags), added when `add` (tv NULL: no timeout), linked into the loop's list. On an
 * error e is freed. */
static int event_start(struct loop_event *e, evutil_socket_t what, short flags, bool add,
                       const struct timeval *tv, struct loop_event **ret)
{
    int rc = -ENOMEM;
    e->ev = event_new(e->loop->base, what, flags, trampoline, e);
    if (!e->ev)
        goto out_free;
    if (add && event_add(e->ev, tv) != 0) {
        rc = -EINVAL;
        goto out_event;
    }
    event_link(e);
    *ret = e;
    return 0;
out_event:
    event_free(e->ev);
out_free:
    free(e);
    return rc;
}

int loop_fd_add(struct loop *l, int fd, unsigned events, loop_fd_fn fn, void *arg,
                struct loop_event **ret)
{
    struct loop_event *e = event_alloc(l, LOOP_KIND_FD, fd, arg);
    *ret = NULL;
    if (!e)
        return -ENOMEM;
    e->fn.fd = fn;
    return event_start(e, fd, ev_flags(events), events != 0, NULL, ret);
}

int loop_fd_set(struct loop_event *e, unsigned events)
{
    if (e->kind != LOOP_KIND_FD)
        return -EINVAL;
    /* an event must not be re-assigned while pending: take it out first */
    event_del(e->ev);
    if (event_assign(e->ev, e->loop->base, e->fd, ev_flags(events), trampoline, e) != 0)
        return -EINVAL;
    if (events && event_add(e->ev, NULL) != 0)
        return -EINVAL;
    return 0;
}

static struct timeval ms_tv(uint64_t ms)
{
    struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000) };
    return tv;
}

int loop_timer_add(struct loop *l, uint64_t ms, bool periodic, loop_timer_fn fn, void *arg,
                   struct loop_event **ret)
{
    struct loop_event *e = event_alloc(l, LOOP_KIND_TIMER, -1, arg);
    struct timeval tv = ms_tv(ms);
    *ret = NULL;
    if (!e)
        return -ENOMEM;
    e->fn.timer = fn;
    e->periodic = periodic;
    /* EV_PERSIST on a pure timer makes libevent re-add it with the same period, measured
     * from the planned expiry, so a periodic timer does not drift by its callback's time */
    return event_start(e, -1, periodic ? EV_PERSIST : 0, ms || periodic, &tv, ret);
}

int loop_timer_arm(struct loop_event *e, uint64_t ms)
{
    if (e->kind != LOOP_KIND_TIMER)
        return -EINVAL;
    struct timeval tv = ms_tv(ms);
    /* event_add on a pending timer reschedules it */
    return event_add(e->ev, &tv) == 0 ? 0 : -EINVAL;
}

void loop_timer_disarm(struct loop_event *e)
{
    if (e && e->kind == LOOP_KIND_TIMER)
        event_del(e->ev);
}

int loop_signal_add(struct loop *l, int signo, loop_signal_fn fn, void *arg,
                    struct loop_event **ret)
{
    struct loop_event *e = event_alloc(l, LOOP_KIND_SIGNAL, signo, arg);
    *ret = NULL;
    if (!e)
        return -ENOMEM;
    e->fn.sig = fn;
    /* libevent's handler only writes to an internal socketpair; the callback runs on the loop
     * (EV_SIGNAL|EV_PERSIST is what evsignal_new sets) */
    return event_start(e, signo, EV_SIGNAL | EV_PERSIST, true, NULL, ret);
}

void loop_event_free(struct loop_event *e)
{
    if (!e)
        return;
    struct loop *l = e->loop;
    if (e->prev)
        e->prev->next = e->next;
    else
        l->events = e->next;
    if (e->next)
        e->next->prev = e->prev;
    /* libevent removes an event from the active queue before running its callback (and re-adds
     * persistent ones before, not after), so freeing it from inside that callback is safe */
    event_free(e->ev);
    free(e);
}
