/* mssim: driver API of the simulated msPTI runtime (spec docs/design/mspti.md#driver-api), exported by
 * the simulator's libmspti.so next to the msPTI ABI of mspti.h. It exists so the whole system
 * can be built and tested on machines WITHOUT an Ascend NPU; it is never a production library. */
#ifndef MSMON_MSSIM_H
#define MSMON_MSSIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MSSIM_API __attribute__((visibility("default")))

/* ---- core (docs/design/mspti.md#driver-api) ---- */
MSSIM_API int mssim_is_simulator(void);             /* always 1 (the real library lacks it) */
MSSIM_API uint64_t mssim_now_ns(void);              /* CLOCK_REALTIME ns */
/* Current device of the calling thread (default 0). -EINVAL if device >= MSSIM_DEVICES. */
MSSIM_API int mssim_set_device(uint32_t device);
/* Wait until all queued device work of `device` (-1 = all devices) has ended and its records
 * were appended (or dropped). 0, or -EINVAL for a device outside 0..MSSIM_DEVICES-1. */
MSSIM_API int mssim_synchronize(int32_t device);
/* Test helper: completes queued and current buffers to the registered complete callback,
 * discards in-flight device records, unsubscribes, forgets the callbacks, enabled kinds,
 * callback domains, disabled marker domains, counters, ids, timelines, and re-reads the
 * MSSIM_* knobs. Interned strings survive (they live for the process). */
MSSIM_API void mssim_reset(void);

struct mssim_stats {
    uint64_t records_appended, records_dropped_nofit, records_dropped_declined,
             records_dropped_injected, records_suppressed_domain,
             buffers_requested, buffers_declined, buffers_completed, null_completions;
};
MSSIM_API void mssim_get_stats(struct mssim_stats *out);

/* ---- activity (docs/design/mspti.md#driver-api). Functions returning an id return 0 on error. ---- */
enum { MSSIM_LEVEL_ACL = 0, MSSIM_LEVEL_RUNTIME = 1, MSSIM_LEVEL_NODE = 2, MSSIM_LEVEL_OTHER = 3 };
/* Host API record [now, now + duration_ns] with a new correlationId. */
MSSIM_API uint64_t mssim_api(const char *name, int level, uint64_t duration_ns);
/* Runtime-level API "aclrtLaunchKernel" + Kernel record on (current device, stream), sharing
 * one correlationId. A type not starting with "KERNEL" drops the Kernel record (real library). */
MSSIM_API uint64_t mssim_launch_kernel(uint32_t stream, const char *name, const char *type,
                                       uint64_t duration_ns);
/* Communication record + Hccl record (bandWidth = bytes / duration in GB/s). With
 * MSSIM_FABRIC_DIR (docs/simulator.md) the call returns once every member of the world has
 * arrived at this collective; the Communication record spans arrival .. last arrival +
 * duration (the wait included), the Hccl record the transfer only. */
MSSIM_API uint64_t mssim_collective(uint32_t stream, const char *name, const char *comm_name,
                                    const char *alg_type, int32_t data_type, uint64_t count,
                                    uint64_t bytes, uint64_t duration_ns);
MSSIM_API uint64_t mssim_memcpy(int32_t stream, int32_t copy_kind, uint64_t bytes); /* -1: sync */
MSSIM_API uint64_t mssim_memset(int32_t stream, uint32_t value, uint64_t bytes);    /* -1: sync */
MSSIM_API uint64_t mssim_malloc(uint64_t bytes, uint64_t *address);   /* Memory ALLOCATION */
MSSIM_API uint64_t mssim_free(uint64_t address);                      /* Memory RELEASE */
/* Append a caller-built record (4..4096 bytes, stride = size) verbatim; only the subscription
 * is checked. 0 (appended or dropped by the buffer rules), -EINVAL, -ENOTCONN (unsubscribed). */
MSSIM_API int mssim_emit_raw(const void *record, size_t size);
/* Benchmark producer: appends n pre-built records through the real buffer path (request,
 * rotation, completion), cycling over the kinds of kind_mask (bit k = msPTI kind k) that are
 * also enabled, names cycling through the workload's kernel names. Returns the number of
 * records appended (drops excluded), -ENOTCONN when unsubscribed, -EINVAL when no kind of the
 * mask is enabled. */
MSSIM_API int64_t mssim_bench_fill(uint32_t kind_mask, uint64_t n);

/* ---- mstx-style markers (docs/design/mspti.md#driver-api) ---- */
MSSIM_API uint64_t mssim_mstx_mark(const char *message, int32_t stream);   /* -1 = host only */
MSSIM_API uint64_t mssim_mstx_range_start(const char *message, int32_t stream);
MSSIM_API void mssim_mstx_range_end(uint64_t range_id);
/* Borrowed for the process lifetime; "default", NULL or >= 255 bytes -> NULL. */
MSSIM_API void *mssim_mstx_domain_create(const char *name);
MSSIM_API uint64_t mssim_mstx_domain_mark(void *domain, const char *message, int32_t stream);
MSSIM_API uint64_t mssim_mstx_domain_range_start(void *domain, const char *message, int32_t stream);
MSSIM_API void mssim_mstx_domain_range_end(void *domain, uint64_t range_id);

/* ---- built-in workload (docs/design/mspti.md#workload) ---- */
struct mssim_workload_cfg {
    uint32_t device;        /* MSSIM_WL_DEVICE; default LOCAL_RANK, else RANK % MSSIM_DEVICES, else 0 */
    uint32_t steps;         /* MSSIM_WL_STEPS; 0 = until mssim_workload_stop() */
    double steps_per_s;     /* MSSIM_WL_RATE; default 5; 0 = as fast as the simulated device allows */
    uint32_t layers;        /* MSSIM_WL_LAYERS; default 4 */
    double kernel_scale;    /* MSSIM_WL_KERNEL_SCALE; multiplies every duration; default 1 */
    int comm;               /* MSSIM_WL_COMM; default 1: emit the gradient all-reduce */
    int step_markers;       /* MSSIM_WL_STEP_MARKERS; default 1 */
    void (*on_step_end)(uint32_t step, void *arg);
    void *arg;
    /* A slow rank (docs/cluster.md): from step slow_from_step on, the process whose rank is
     * slow_rank multiplies its kernels (compute), its collective (communication) or adds a
     * host-side stall with an idle device (host) by slow_factor. */
    int32_t rank;            /* MSSIM_WL_RANK; default RANK, else -1 */
    int32_t slow_rank;       /* MSSIM_WL_SLOW_RANK; -1 = no slow rank (default) */
    double slow_factor;      /* MSSIM_WL_SLOW_FACTOR; default 1 */
    uint32_t slow_from_step; /* MSSIM_WL_SLOW_FROM_STEP; default 1 */
    int32_t slow_kind;       /* MSSIM_WL_SLOW_KIND; enum mssim_slow_kind, default compute */
};
enum mssim_slow_kind { MSSIM_SLOW_COMPUTE = 0, MSSIM_SLOW_COMMUNICATION = 1, MSSIM_SLOW_HOST = 2 };
/* "compute" | "communication" | "host" -> the kind, -1 otherwise. */
MSSIM_API int mssim_slow_kind_from_name(const char *name);
MSSIM_API int mssim_workload_default(struct mssim_workload_cfg *cfg);  /* defaults, then env */
/* Blocking; returns the number of steps done, or -EINVAL for a bad cfg. */
MSSIM_API int mssim_workload_run(const struct mssim_workload_cfg *cfg);
MSSIM_API void mssim_workload_stop(void);                  /* async-signal-safe */
/* Kernels (Kernel records) one step of the workload launches for `layers` layers. */
MSSIM_API uint32_t mssim_workload_kernels_per_step(uint32_t layers);

/* ---- ground truth dump ----
 * With MSSIM_DUMP=<path> ("%p" in the path becomes the pid) every record actually APPENDED
 * to a consumer buffer (drops excluded) is written as one compact JSON line with sorted keys:
 * "kind" (Marker, Kernel, API, AclAPI, NodeAPI, RuntimeAPI, Hccl, Memory, MemSet, MemCpy,
 * Communication, ExternalCorrelation; "Unknown" for raw records of other kinds) plus every
 * field of the record under its msPTI name (objectId/pt/ds flattened to processId/threadId
 * or deviceId/streamId; dataType as int; strings as JSON strings). The file is opened with
 * O_APPEND; lines are buffered and written at FlushAll, mssim_dump_flush() and process exit. */
MSSIM_API void mssim_dump_flush(void);

#ifdef __cplusplus
}
#endif
#endif
