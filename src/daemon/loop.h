/* loop: the daemon's one event loop (Redis ae-style, on libevent): file-descriptor readiness,
 * one-shot and periodic timers, signals delivered as ordinary events, and a clean stop. One
 * thread runs it and every callback runs on that thread; only loop.c includes libevent. */
#ifndef MSMON_DAEMON_LOOP_H
#define MSMON_DAEMON_LOOP_H

#include <stdbool.h>
#include <stdint.h>

#define LOOP_READ 0x1u
#define LOOP_WRITE 0x2u

struct loop;
struct loop_event;

/* events: the LOOP_READ / LOOP_WRITE bits that are ready now. */
typedef void (*loop_fd_fn)(struct loop_event *ev, int fd, unsigned events, void *arg);
typedef void (*loop_timer_fn)(struct loop_event *ev, void *arg);
typedef void (*loop_signal_fn)(struct loop_event *ev, int signo, void *arg);

/* Caller owns *ret; free with loop_destroy(). */
int loop_create(struct loop **ret);
/* Frees the events still registered, then the loop. NULL is a no-op. */
void loop_destroy(struct loop *l);

/* Dispatch until loop_stop() (returns 0) or until no event is registered (returns 0);
 * -EIO when the backend fails. A stop requested before the call makes it return at once. */
int loop_run(struct loop *l);
/* Ask loop_run() to return once the current callback is done. Call it from the loop thread
 * (a callback, or before loop_run); other threads stop the loop through a signal event. */
void loop_stop(struct loop *l);

/* Watch fd (borrowed; the caller closes it after loop_event_free) for `events` (persistent:
 * fires whenever ready, level-triggered). events 0 registers it paused. Caller owns *ret. */
int loop_fd_add(struct loop *l, int fd, unsigned events, loop_fd_fn fn, void *arg,
                struct loop_event **ret);
/* Change the interest set of an fd event (0 = pause). */
int loop_fd_set(struct loop_event *ev, unsigned events);

/* A timer that fires after ms (one-shot) or every ms (periodic, fixed cadence). ms 0 with
 * one-shot creates it disarmed. Resolution: one kernel tick (it may fire up to ~10 ms early
 * or late). Caller owns *ret. */
int loop_timer_add(struct loop *l, uint64_t ms, bool periodic, loop_timer_fn fn, void *arg,
                   struct loop_event **ret);
/* (Re)start a timer: the next expiry is ms from now (periodic ones keep that period). */
int loop_timer_arm(struct loop_event *ev, uint64_t ms);
void loop_timer_disarm(struct loop_event *ev);

/* Deliver signo as an event on the loop (the handler only wakes the loop; fn runs as a normal
 * callback, so it may do anything). One loop per process should watch signals. */
int loop_signal_add(struct loop *l, int signo, loop_signal_fn fn, void *arg,
                    struct loop_event **ret);

/* The libevent event_base under the loop (as void *, so this header stays libevent-free),
 * for a module built on libevent's own servers (prom_http: evhttp) to run on this loop.
 * Borrowed for the loop's lifetime; use it from the loop thread only. */
void *loop_backend(struct loop *l);

/* Unregister and free any event; safe inside the event's own callback (do not touch it
 * afterwards). NULL is a no-op. */
void loop_event_free(struct loop_event *ev);

#endif
