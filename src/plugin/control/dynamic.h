/* dynamic: the framework side of dyno mode (docs/design/ipc.md#shared-memory-handoff, docs/design/ipc.md#shared-memory-handoff), implemented once:
 * msmon_dynamic_*() for C programs, and python/msmonitor/dynamic_profile.py through
 * IPCMonitor_C.dynamic. One segment per job, in a directory of the job's uid: name, layout, creator election, the
 * killed-job takeover, stale rule and error text. The creator's poller is a control_poller
 * thread (signals blocked) in the creator rank; ranks never fork it. */
#ifndef MSMON_PLUGIN_DYNAMIC_H
#define MSMON_PLUGIN_DYNAMIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <limits.h>
#include <time.h>

#include "contract/kvtext.h"
#include "contract/names.h"
#include "msmon/ipc_wire.h"
#include "plugin/control/control.h"

#define DYN_SHM_PREFIX NAMES_SHM_PREFIX
#define DYN_SHM_DIR "/dev/shm"
#define DYN_SHM_SIZE NAMES_SHM_SIZE
#define DYN_STALE_S 60
#define DYN_ATTACH_TRIES 10
#define DYN_DEFAULT_POLL_S 2.0

/* The job key: 16 hex digits of a hash of MSMONITOR_JOB_KEY (job) when set, else of the
 * launcher's MASTER_ADDR:MASTER_PORT (+ TORCHELASTIC_RUN_ID) when MASTER_PORT is set, else of
 * the parent pid: every rank of one job computes the same key, two live jobs never do.
 * 0 or -ENOSPC. */
int dyn_job_key(const char *job, const char *master_addr, const char *master_port, const char *run_id, pid_t ppid,
                char *buf, size_t cap);
/* "DynamicProfileNpuShm-" + key. 0 or -ENOSPC. */
int dyn_shm_name(const char *key, char *buf, size_t cap);
/* The directory of this uid's segments, one only this uid can create entries in (so the
 * name cannot be squatted): `base` (MSMONITOR_SHM_DIR, NULL = /dev/shm) itself when this uid
 * owns it and nobody else may write it, else <base>/msmonitor-<euid> (0700), else
 * <xdg>/msmonitor, else <sockdir>/msmonitor-shm. Every refused candidate is one WARNING
 * with the fix. 0 or -errno. */
int dyn_segment_dir(const char *base, const char *xdg, const char *sockdir, char *buf, size_t cap);
/* The stale-rule error text with the `rm -f` command (exactly Python's stale_message). */
int dyn_stale_message(const char *path, char *buf, size_t cap);
/* MSMONITOR_USE_DAEMON, else the deprecated KINETO_USE_DAEMON (warns), as an integer after
 * trimming whitespace; only 1 enables. Bad values warn "... value not valid, will be set to 0 !". */
bool dyn_use_daemon(const char *msmon, const char *kineto);
/* MSMONITOR_POLL_INTERVAL_S in [0.1, 50] (default 2) and MSMONITOR_SHM_STALE_S >= 0 (default
 * 60); NULL means unset; invalid values warn and give the default. */
double dyn_poll_interval(const char *raw);
long dyn_stale_seconds(const char *raw);

/* Compact JSON of a poll reply parsed by kvtext_parse() (contract/kvtext.h), byte-wise
 * sorted keys, plus "is_valid": true (a text "is_valid" is overridden, as Python set
 * cfg["is_valid"] = True after parsing). Caller owns *ret; free(). -E2BIG if the text does not
 * fit the segment. */
int dyn_config_json(const struct kvtext *kv, char **ret, size_t *ret_len);

/* Segment I/O over a mapped DYN_SHM_SIZE buffer. The timestamp (uint32 LE unix seconds) is
 * written last with release order so a reader that sees it sees the whole text. */
int dyn_shm_write(uint8_t *shm, const char *json, size_t len, uint32_t now);
uint32_t dyn_shm_time(const uint8_t *shm);
/* The segment's config object through the contract's reader (cjx_flat_object: flat object of
 * strings, booleans or numbers, values in Python's str() form); trailing spaces/NULs are cut.
 * Fills kv (kvtext_fini even on error) and *ret_is_valid. -ENODATA empty, -EINVAL, -ENOMEM. */
int dyn_shm_read(const uint8_t *shm, struct kvtext *kv, bool *ret_is_valid);

/* Open `path` or create it (one creator wins via link(2)). *ret_fd holds a shared flock for
 * cleanup-shm; the creator's also holds the creator lock (an OFD write lock on byte 0) for
 * its life. An existing segment whose creator lock is free (its creator died, e.g. kill -9)
 * is taken over: this caller becomes the creator, the segment is re-initialised, and one
 * WARNING says so. A segment whose creator lives is never modified; it is attached unless
 * older than this process by more than stale_s (-ESTALE, err holds the stale message).
 * -EPERM a file of another uid or writable by others (never attached), -EINVAL wrong size
 * (never resized), -errno. err (may be NULL) gets a one-line reason. */
int dyn_attach_or_create(const char *path, long stale_s, int *ret_fd, bool *ret_creator,
                         char *err, size_t errcap);

/* The nputrace window's status as the IPC carries it (docs/design/ipc.md#ranks): Ready until
 * start, Running in [start, stop), then Idle. Wire values only (msmon/ipc_wire.h): the window
 * itself is tracewin's (tracewin.h). */
enum { DYN_TRACE_IDLE = IPC_STATUS_IDLE, DYN_TRACE_RUNNING = IPC_STATUS_RUNNING, DYN_TRACE_READY = IPC_STATUS_READY };

/* msmon_dynamic_init(): join dyno mode as `rank` (< 0: RANK, else RANK_ID, else 0). 0 active
 * (also when already active), -ENOTSUP dyno mode not asked for by the environment, -ESTALE
 * stale segment of a live creator (logged with the `rm -f` hint), -ECHILD in a fork()ed
 * child of a joined process (init and step are no-ops there), -errno.
 * DYN_INIT_ECHO: the lifecycle lines (attached, poller, config published, takeover) also go
 * to stderr as "[LEVEL] [msmonitor.dynamic_profile <pid>] ..." (the Python module's form). */
#define DYN_INIT_ECHO 1u
int dyn_init(int32_t rank, unsigned flags);
/* msmon_dynamic_step(): 0 (a no-op when inactive). */
int dyn_step(void);
/* msmon_dynamic_step_nowait(): the same step when it can be done without waiting (no config
 * to apply, the nputrace window does not move, nobody else holds the state): 1 done (or
 * inactive), 0 nothing done — call dyn_step(), which may wait. */
int dyn_step_nowait(void);
/* Called on the stepping thread just before a config with NPU_MONITOR_STOP true is applied
 * (the Python module sets the cluster layout there). NULL clears it. */
void dyn_set_stop_hook(void (*fn)(void *ctx), void *ctx);

/* Where this process stands in dyno mode. */
struct dyn_info {
    bool enabled, creator, poller;
    int32_t rank, step;
    char path[PATH_MAX];
    struct control_poller_state poller_state; /* when poller */
};
void dyn_get_info(struct dyn_info *ret);

/* Tear down (also the atexit handler): end the step range, stop the session, stop the
 * poller, unmap, unlink the segment if we created it. Idempotent. */
void dyn_finalize(void);

#endif
