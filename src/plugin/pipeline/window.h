/* window: the trace window as a pipeline stage, the one window state machine of the plugin
 * (docs/design/session.md#the-window). A step-bounded window is closed by the session (its
 * end time set when the stepping thread leaves the last step); a marker-bounded one is moved
 * by the program's own `step <N>` marker ranges. The stage holds the session's batches and,
 * at the session's end, releases to the outputs only what lies in the window: every output
 * of the session sees the same cut, and no output keeps window state of its own. */
#ifndef MSMON_PLUGIN_WINDOW_H
#define MSMON_PLUGIN_WINDOW_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pl_batch;

#define WINDOW_MAX_HELD (8u << 20) /* records + ranges held per window (markers included) */

struct window_opts {
    int32_t start_step, stop_step; /* [start, stop) */
    bool marker_steps;             /* the program's `step <N>` marker ranges delimit it */
    int32_t iterations;            /* marker_steps with start_step -1: the window is the first
                                    * `iterations` steps whose range starts in the session */
    size_t max_held;               /* 0: WINDOW_MAX_HELD */
};

enum window_phase { WINDOW_ARMED, WINDOW_OPEN, WINDOW_CLOSED, WINDOW_REFUSED };

struct window_state {
    int32_t step;          /* highest `step <N>` range start seen, -1 none */
    int32_t start, stop;   /* the window ([-1, -1) while a start step -1 is unresolved) */
    int phase;             /* WINDOW_*; a step-bounded window is OPEN until closed */
    bool marker_steps;
    uint64_t begin_ns;     /* marker_steps: start of `step <start>` (0 not yet seen) */
    uint64_t end_ns;       /* the close time; 0 while open */
    uint64_t before, after; /* left out: started before begin_ns / at or after end_ns */
};

/* The step rule of every window, step-bounded (the stepping thread's step calls, shm_mode.c)
 * or marker-bounded (`step <N>` range starts, here): at step n an armed window opens when
 * n >= start, an open one closes when n >= stop (both at once when n >= stop). Returns true
 * when the phase changed. Pure: the caller holds whatever lock guards s. */
bool window_advance(struct window_state *s, int32_t n);

struct window;

/* Caller owns; free with window_destroy(). dropped: the session counter that a full hold
 * adds to (borrowed for the window's life). */
int window_create(const struct window_opts *o, _Atomic uint64_t *dropped, struct window **ret);
void window_destroy(struct window *w);
/* Completion path (any thread): move a marker-bounded window by the batch's `step <N>` range
 * starts, then hold the batch (copied). */
void window_hold(struct window *w, const struct pl_batch *b);
/* End a step-bounded window at end_ns (CLOCK_REALTIME, the records' clock): what starts at
 * or after it is left out. The first close wins. */
void window_close(struct window *w, uint64_t end_ns);
void window_get(struct window *w, struct window_state *ret);
/* True when the window has something to write: step-bounded, or marker-bounded and opened
 * (false also for a refused one). */
bool window_settled(const struct window_state *s);
/* Session end (no concurrent hold): cut what is held to the window and hand it to fn in
 * arrival order, in batches of at most `per` records (a range goes with the record that
 * completed it); the held storage is freed. Logs the window's outcome once. */
void window_release(struct window *w, size_t per, void (*fn)(void *ctx, const struct pl_batch *b), void *ctx);

#endif
