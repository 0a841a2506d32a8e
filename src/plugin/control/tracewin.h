/* tracewin: the nputrace step window of one rank (docs/nputrace.md): the nputrace config's
 * options (activities, analysis, export type, torch.profiler switches) and log directory,
 * checked when the config arrives; the one window state of the process and the commands its
 * config sources post (dynamic.c: arm/step/leave; npoll.c: the marker-bounded window); the
 * window's collection session (a monitor session with the trace output and a window stage,
 * every activity kind); and the view msmon_dynamic_trace_info() gives the Python side. */
#ifndef MSMON_PLUGIN_TRACEWIN_H
#define MSMON_PLUGIN_TRACEWIN_H

#include <limits.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "contract/kvtext.h"
#include "plugin/pipeline/window.h"

/* Steps the creator adds to the highest step of the node's ranks (dynamic.c's step slots)
 * for PROFILE_START_STEP -1, so every rank, each reading the segment at its next step,
 * agrees on one start step. */
#define TRACEWIN_ALIGN_STEPS 5
/* Kinds a window collects: every user-visible kind (8, external correlation, never). */
#define TRACEWIN_KINDS 0x1EFEu

/* Option bits (also msmon_trace_info.flags, include/msmon/msmonitor.h). */
enum {
    TRACEWIN_CPU = 1u << 0,
    TRACEWIN_NPU = 1u << 1,
    TRACEWIN_ANALYSE = 1u << 2,
    TRACEWIN_ASYNC = 1u << 3,
    TRACEWIN_RECORD_SHAPES = 1u << 4,
    TRACEWIN_PROFILE_MEMORY = 1u << 5,
    TRACEWIN_WITH_STACK = 1u << 6,
    TRACEWIN_WITH_FLOPS = 1u << 7,
    TRACEWIN_WITH_MODULES = 1u << 8,
    TRACEWIN_EXPORT_DB = 1u << 9,
};

struct tracewin_cfg {
    uint32_t flags;
    char log_dir[PATH_MAX];  /* resolved, existing, writable */
};

/* Options of an nputrace config (values as the segment holds them). A symlinked, unwritable
 * or missing ACTIVITIES_LOG_FILE is refused: one ERROR line naming it and -EINVAL/-errno. */
int tracewin_parse(const struct kvtext *kv, struct tracewin_cfg *ret);
/* Pure: the option bits of a config. */
uint32_t tracewin_flags(const struct kvtext *kv);

/* The creator's alignment (called on the poller thread before publishing): an nputrace
 * config with PROFILE_START_STEP -1 (or absent) gets max_step + TRACEWIN_ALIGN_STEPS.
 * buf (cap >= 16) holds the new value and must outlive kv. Returns 1 when it changed kv, 0
 * otherwise, -E2BIG. */
int tracewin_align(struct kvtext *kv, int32_t max_step, char *buf, size_t cap);

/* ---- the window (docs/design/session.md#the-window): tracewin holds the one window state of
 * the process (phase ARMED/OPEN/CLOSED, moved by window_advance); its config sources (dynamic.c
 * on the stepping thread, npoll.c on the native poller) post the commands below. */

/* The window rule of an nputrace config seen at step `step` by rank `rank` (PROFILE_IS_RANK /
 * PROFILE_RANK_LIST select ranks; PROFILE_START_STEP -1 or absent = the next step, a start at
 * or before `step` is refused; ACTIVITIES_ITERATIONS >= 1). Fills *ret (phase ARMED, [start,
 * stop)) and returns 1; 0 not for this rank; -EINVAL, -ERANGE (one ERROR line). */
int tracewin_rule(const struct kvtext *kv, int32_t rank, int32_t step, struct window_state *ret);
/* Arm a step-bounded window from a config read at step `step` (the rule above plus the
 * options of tracewin_parse). 0 armed (Ready); -EBUSY a window is armed or running (ERROR
 * line); -EINVAL refused or not for this rank (the line says why). */
int tracewin_arm(const struct kvtext *kv, int32_t rank, int32_t step);
/* The stepping thread's step `step`, between steps (before the step's own mstx range starts):
 * the window opens at its start step and closes at its stop step; the collection session is
 * begun and ended here (a refused begin leaves the window Idle, logged). True when the
 * window's status changed. */
bool tracewin_step(int32_t step);
/* The same step when the window does not move at it (0; nothing to begin or end), else
 * -EAGAIN and nothing changed: the caller then calls tracewin_step() where it may wait. */
int tracewin_step_nowait(int32_t step);
/* The job leaves at step `step`: a running window writes its partial trace (WARN line) and
 * waits for the file; the window goes Idle. */
void tracewin_leave(int32_t step);

/* The window's status as the IPC reports it (read-only view). */
struct tracewin_status {
    int32_t status;      /* IPC_STATUS_IDLE/RUNNING/READY (msmon/ipc_wire.h, dynamic.h's DYN_TRACE_*) */
    int32_t step;        /* the step the window last saw, -1 none */
    int32_t start, stop; /* [start, stop) while Ready or Running, else -1 */
};
void tracewin_status(struct tracewin_status *ret);

/* ---- a program without a step call (native poller, e.g. injected through
 * CUDA_INJECTION64_PATH): its own `step <N>` marker ranges (NVTX / mstx) delimit the window. */
/* The backend flush period of such a window: how soon its step ranges are seen. */
#define TRACEWIN_NATIVE_FLUSH_MS 200
/* Arm a marker-delimited window from a polled nputrace config: the session (every kind)
 * starts now; records before the start of `step <start>` are left out, the start of
 * `step <stop>` closes it (-1: the first step that begins). 0 or -errno (logged). */
int tracewin_native_config(const char *text, size_t len, int32_t rank);
/* The poller's tick: the window's status (IPC_STATUS_*, current step, [start, stop)); stops
 * the session once the window closed (the file is written on the session thread). */
void tracewin_native_tick(int32_t *ret_status, int32_t *ret_step, int32_t *ret_start, int32_t *ret_stop);

#endif
