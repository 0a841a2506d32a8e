/* tracewin: the nputrace step window of one rank (docs/nputrace.md): the nputrace config's
 * options (activities, analysis, export type, torch.profiler switches) and log directory,
 * checked when the config arrives; the window's collection session (a monitor session with
 * the trace output and a window stage, every activity kind) begun and ended on the stepping thread by
 * dynamic.c; and the view msmon_dynamic_trace_info() gives the Python side. */
#ifndef MSMON_PLUGIN_TRACEWIN_H
#define MSMON_PLUGIN_TRACEWIN_H

#include <limits.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "contract/kvtext.h"

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

/* Begin the window [start, stop) at step `start` (stepping thread): a window session
 * when NPU activities are asked for. 0 (also when nothing is to be collected here), or
 * -errno with one ERROR line (npu-monitor running here, no backend, start failure). */
int tracewin_begin(const struct tracewin_cfg *c, int32_t start, int32_t stop, int32_t rank);
/* End the window at step `step` (early: the job is leaving mid-window); writes the trace. */
void tracewin_end(int32_t step, bool early);
/* ---- a program without a step call (native poller, e.g. injected through
 * CUDA_INJECTION64_PATH): its own `step <N>` marker ranges (NVTX / mstx) delimit the window. */
/* The backend flush period of such a window: how soon its step ranges are seen. */
#define TRACEWIN_NATIVE_FLUSH_MS 200
/* Arm a marker-delimited window from a polled nputrace config: the session (every kind)
 * starts now; records before the start of `step <start>` are left out, the start of
 * `step <stop>` closes it (-1: the first step that begins). 0 or -errno (logged). */
int tracewin_native_config(const char *text, size_t len, int32_t rank);
/* The poller's tick: the window's status (DYN_TRACE_*, current step, [start, stop)); stops
 * the session once the window closed (the file is written on the session thread). */
void tracewin_native_tick(int32_t *ret_status, int32_t *ret_step, int32_t *ret_start, int32_t *ret_stop);

/* What msmon_dynamic_trace_info() reports: state (0 Idle, 1 Running, 2 Ready), window, step. */
void tracewin_note(int32_t state, int32_t start, int32_t stop, int32_t step, int32_t rank,
                   const struct tracewin_cfg *c);

#endif
