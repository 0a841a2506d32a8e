/* thr: the one way msmonitor starts a thread. Every thread we start lives in someone else's
 * process (the plugin) or next to a signal loop (the daemon), so it blocks every signal from
 * its first instruction, carries a name for `top -H`, and reports failure as -errno. */
#ifndef MSMON_COMMON_THR_H
#define MSMON_COMMON_THR_H

#include <pthread.h>
#include <stdbool.h>

enum thr_flags {
    THR_JOINABLE = 0,
    THR_DETACHED = 1, /* nobody joins it; ret_thread may be NULL */
    THR_SMALL_STACK = 2, /* THR_SMALL_STACK_BYTES of stack: one of many short-lived workers
                          * (the CLI's fan-out to thousands of hosts) */
};
#define THR_SMALL_STACK_BYTES (256u << 10)

/* Start fn(arg) on a new thread with every signal blocked (the mask is set before the thread
 * exists, so no signal can reach it in between) and named `name` (at most 15 bytes are kept;
 * NULL keeps the inherited name). The caller's signal mask is unchanged on return.
 * 0 and *ret_thread set (when not NULL), or -errno from pthread (-EAGAIN, -ENOMEM, ...). */
int thr_start(pthread_t *ret_thread, const char *name, void *(*fn)(void *), void *arg, int flags);

#endif
