/* msmonitor: the exported C API of libmsmonitor.so (spec docs/design/session.md#python-surface). The CPython
 * extension IPCMonitor_C, the native poller, mssim-train --with-plugin and the CUDA injection
 * path all go through these functions. Return 0 on success or a negative errno-style code
 * unless stated otherwise. Thread-safe. */
#ifndef MSMON_MSMONITOR_H
#define MSMON_MSMONITOR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MSMON_API __attribute__((visibility("default")))

/* Registration with the daemon (docs/design/ipc.md#plugin-client). Returns 1 registered, 0 failed. */
MSMON_API int msmon_init_dyno(int32_t npu_id);
/* One poll (docs/design/ipc.md#plugin-client). *len = 0: nothing. -ENOSPC: *len = bytes needed (config kept
 * for the next call). buf is NUL-terminated when it fits. Blocks up to ~50 ms. */
MSMON_API int msmon_poll_dyno(char *buf, size_t cap, size_t *len);
/* Apply an npu-monitor config map (docs/design/session.md#applying-a-config). Invalid configs are logged and
 * ignored (returns -EINVAL); a valid one returns 0 whatever the outcome of a start. */
MSMON_API int msmon_enable_npu_monitor(const char *const *keys, const char *const *values, size_t n);
/* Stop a running session (normal stop path, no status report). */
MSMON_API void msmon_finalize(void);
MSMON_API int msmon_set_cluster_config(const char *key, const char *value);
MSMON_API int msmon_update_profiler_status(int32_t status, int32_t current_step, int32_t start_step,
                                           int32_t stop_step);
/* Native poller thread MsMonitorPoll (docs/design/session.md#control-sources). */
MSMON_API int msmon_native_poll_start(void);
MSMON_API void msmon_native_poll_stop(void);

/* Standalone Monitor API (docs/design/session.md#standalone-monitor). kinds are msPTI kind values. */
MSMON_API int msmon_monitor_start(const int32_t *kinds, size_t n);
MSMON_API int msmon_monitor_stop(void);

/* Results of the last standalone session, borrowed until the next msmon_monitor_start.
 * One struct for every kind; fields a kind does not have are zero/NULL. */
struct msmon_result {
    int32_t kind;              /* msPTI kind value */
    const char *name;
    uint64_t start_ns, end_ns;
    uint32_t pid, tid;         /* API kinds, host markers */
    uint32_t device_id, stream_id;
    uint64_t correlation_id;
    const char *type;          /* Kernel */
    uint64_t count;            /* Communication */
    const char *data_type;     /* Communication: name of the data type ("FP32") */
    const char *comm_name, *alg_type;
    int32_t source_kind;       /* Marker: 0 host, 1 device */
    const char *domain;        /* Marker */
    uint64_t id;               /* Marker id */
};
/* Kinds of the last start, in start order. */
MSMON_API int msmon_monitor_kinds(int32_t *out, size_t cap, size_t *ret_n);
MSMON_API int msmon_monitor_results(int32_t kind, const struct msmon_result **ret_arr, size_t *ret_n);

/* Framework side for non-Python programs (docs/design/ipc.md#shared-memory-handoff), interoperable with
 * msmonitor.dynamic_profile. init: 0 active, -ENOTSUP when MSMONITOR_USE_DAEMON is not 1,
 * -ESTALE stale segment (logged with the `rm -f` hint), else -errno. step: call once per
 * iteration; 0 (a no-op when inactive). */
MSMON_API int msmon_dynamic_init(void);
MSMON_API int msmon_dynamic_step(void);
/* The same step if it can be done without waiting (no config to apply, the nputrace window
 * does not open or close at it, no poller to take over from a rank that left, no other thread
 * in the dyno-mode state): 1 done (or dyno mode inactive), 0 nothing done — then call
 * msmon_dynamic_step(), which may wait (a config is applied on the session actor, the stop
 * hook runs). The Python module keeps the GIL for the first and releases it only for the
 * second. */
MSMON_API int msmon_dynamic_step_nowait(void);
/* init with an explicit rank (< 0: RANK, else RANK_ID, else 0) and options.
 * MSMON_DYNAMIC_ECHO: the lifecycle lines also go to stderr (the Python module's form). */
#define MSMON_DYNAMIC_ECHO 1u
MSMON_API int msmon_dynamic_init_ex(int32_t rank, unsigned flags);
/* End the step range, stop the session and the poller, unlink the segment if this process
 * is its creator. Idempotent; also run at exit. */
MSMON_API void msmon_dynamic_finalize(void);
/* Called on the stepping thread right before a config with NPU_MONITOR_STOP true is applied
 * (the Python module sets the cluster layout there). NULL clears it. */
MSMON_API void msmon_dynamic_set_stop_hook(void (*fn)(void *ctx), void *ctx);
struct msmon_dynamic_info {
    int32_t enabled, creator;
    int32_t polling;           /* this process runs the node's poller */
    int32_t registered;        /* the poller registered at least once */
    int32_t reachable;         /* its last attempt reached the daemon */
    uint32_t registrations;    /* registrations so far (first + after daemon restarts) */
    int32_t rank, step;
    char path[4096];           /* the segment */
};
MSMON_API int msmon_dynamic_info(struct msmon_dynamic_info *ret);
/* The segment handoff alone (msmonitor.dynamic_profile.attach_or_create): attach to `path`,
 * create it, or take over a leftover whose creator died; MSMONITOR_SHM_STALE_S applies.
 * *ret_fd: caller owns (close()). 0, -ESTALE (err: the stale text), -EINVAL, -errno. */
MSMON_API int msmon_dynamic_attach(const char *path, int *ret_fd, int *ret_creator, char *err, size_t errcap);
/* The job key of a process with the environment names/values[0..n) and the pids ppid/pid
 * (docs/python.md, "Where the segment lives"): 16 hex digits into buf (cap >= 17) and the rule
 * that gave it into source (may be NULL). The one rule, which the Python module calls. 0,
 * -EINVAL, -ENOSPC. */
MSMON_API int msmon_dynamic_job_key(const char *const *names, const char *const *values, size_t n, int32_t ppid,
                                    int32_t pid, char *buf, size_t cap, char *source, size_t scap);
/* Dyno mode asked for by MSMONITOR_USE_DAEMON (msmon), else the deprecated KINETO_USE_DAEMON
 * (kineto); NULL = unset. 1 enabled, 0 not; why (may be NULL) gets the warning ("" none). */
MSMON_API int msmon_dynamic_use_daemon(const char *msmon, const char *kineto, char *why, size_t cap);

/* The nputrace window of this rank in dyno mode (docs/nputrace.md): state -1 not in dyno
 * mode / no config yet, 0 Idle, 1 Running, 2 Ready; [start_step, stop_step); the config's
 * option bits (MSMON_TRACE_*); windows begun so far; the resolved log directory; our last
 * trace file ("" before any). The Python side runs torch.profiler and the analysis from it. */
#define MSMON_TRACE_CPU 0x1u
#define MSMON_TRACE_NPU 0x2u
#define MSMON_TRACE_ANALYSE 0x4u
#define MSMON_TRACE_ASYNC 0x8u
#define MSMON_TRACE_RECORD_SHAPES 0x10u
#define MSMON_TRACE_PROFILE_MEMORY 0x20u
#define MSMON_TRACE_WITH_STACK 0x40u
#define MSMON_TRACE_WITH_FLOPS 0x80u
#define MSMON_TRACE_WITH_MODULES 0x100u
#define MSMON_TRACE_EXPORT_DB 0x200u
struct msmon_trace_info {
    int32_t state, start_step, stop_step, step, rank;
    uint32_t flags, windows;
    char log_dir[4096];
    char last_trace[4096];
};
MSMON_API int msmon_dynamic_trace_info(struct msmon_trace_info *ret);
/* Changes whenever what msmon_dynamic_trace_info() reports changes, except `step` and
 * `last_trace` (a window armed, opened, closed or refused, new options, a new window): a
 * reader that saw the same value since its last read has nothing new to read. Lock-free;
 * cheap enough for every step. */
MSMON_API uint32_t msmon_dynamic_trace_epoch(void);

/* CUDA injection entry point (docs/design/session.md#cupti-backend): returns 1. */
MSMON_API int InitializeInjection(void);

#ifdef __cplusplus
}
#endif
#endif
