/* api: the exported C API of libmsmonitor.so (include/msmon/msmonitor.h), the only file that
 * includes that header. Thin: every call makes sure logging and the backend are set up (first
 * use), then delegates down to the control layer (apply, dynolog_link, native_poller, shm_mode) or the
 * monitor; nothing below calls back up here. The library's only exported symbols. Loading
 * the library starts nothing (no constructor): a program that never calls it is reached by
 * the CUDA driver through InitializeInjection (docs/design/session.md#control-sources). */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "contract/kinds.h"
#include "msmon/msmonitor.h"
#include "plugin/control/apply.h"
#include "plugin/control/job_key.h"
#include "plugin/control/shm_segment.h"
#include "plugin/control/shm_mode.h"
#include "plugin/control/dynolog_link.h"
#include "plugin/control/monitor.h"
#include "plugin/control/native_poller.h"
#include "plugin/control/pconfig.h"
#include "plugin/penv.h"

_Static_assert(PCONFIG_TRACE_CPU == MSMON_TRACE_CPU && PCONFIG_TRACE_NPU == MSMON_TRACE_NPU &&
                   PCONFIG_TRACE_ANALYSE == MSMON_TRACE_ANALYSE && PCONFIG_TRACE_ASYNC == MSMON_TRACE_ASYNC &&
                   PCONFIG_TRACE_RECORD_SHAPES == MSMON_TRACE_RECORD_SHAPES &&
                   PCONFIG_TRACE_PROFILE_MEMORY == MSMON_TRACE_PROFILE_MEMORY &&
                   PCONFIG_TRACE_WITH_STACK == MSMON_TRACE_WITH_STACK &&
                   PCONFIG_TRACE_WITH_FLOPS == MSMON_TRACE_WITH_FLOPS &&
                   PCONFIG_TRACE_WITH_MODULES == MSMON_TRACE_WITH_MODULES &&
                   PCONFIG_TRACE_EXPORT_DB == MSMON_TRACE_EXPORT_DB,
               "the window's option bits are the public trace flags");


static pthread_once_t api_once = PTHREAD_ONCE_INIT;

static void api_atexit(void)
{
    native_poller_stop();           /* sends the -1 statuses */
    (void)monitor_stop();   /* flushes the final interval; no status (docs/design/session.md#session-life-cycle) */
}

static void api_do_init(void)
{
    monitor_first_use();
    atexit(api_atexit);
}

static void api_init(void)
{
    pthread_once(&api_once, api_do_init);
}

MSMON_API int msmon_init_dyno(int32_t npu_id)
{
    api_init();
    return dynolog_init(npu_id);
}

MSMON_API int msmon_poll_dyno(char *buf, size_t cap, size_t *len)
{
    api_init();
    return dynolog_poll(buf, cap, len);
}

MSMON_API int msmon_enable_npu_monitor(const char *const *keys, const char *const *values, size_t n)
{
    const struct apply_source src = { .entry = APPLY_ENTRY_API, .rank = -1, .step = -1, .aligned = -1 };
    struct pconfig *cfg;
    int rc;

    api_init();
    cfg = malloc(sizeof(*cfg)); /* ~11 KiB: off the framework thread's stack */
    if (!cfg)
        return -ENOMEM;
    /* the framework classified it: this entry point takes npu-monitor configs */
    rc = pconfig_parse_pairs(keys, values, n, CFGKEYS_NPU_MONITOR, cfg);
    rc = apply_config(cfg, rc, &src);
    free(cfg);
    return rc;
}

MSMON_API void msmon_finalize(void)
{
    api_init();
    (void)monitor_stop();
}

MSMON_API int msmon_set_cluster_config(const char *key, const char *value)
{
    api_init();
    return monitor_set_cluster_config(key, value);
}

MSMON_API int msmon_update_profiler_status(int32_t status, int32_t current_step, int32_t start_step,
                                           int32_t stop_step)
{
    api_init();
    monitor_set_trace_status(status); /* the framework's own profiler: one activity subscriber */
    return dynolog_send_status(status, current_step, start_step, stop_step);
}

MSMON_API int msmon_native_poll_start(void)
{
    api_init();
    return native_poller_start();
}

MSMON_API void msmon_native_poll_stop(void)
{
    native_poller_stop();
}

MSMON_API int msmon_dynamic_init(void)
{
    return msmon_dynamic_init_ex(-1, 0);
}

MSMON_API int msmon_dynamic_init_ex(int32_t rank, unsigned flags)
{
    api_init(); /* first, so dynamic's atexit clean-up runs before api_atexit */
    return shm_mode_init(rank, (flags & MSMON_DYNAMIC_ECHO) ? SHM_MODE_ECHO : 0);
}

MSMON_API int msmon_dynamic_step(void)
{
    return shm_mode_step();
}

MSMON_API int msmon_dynamic_step_nowait(void)
{
    return shm_mode_step_nowait();
}

MSMON_API void msmon_dynamic_finalize(void)
{
    shm_mode_finalize();
}

MSMON_API void msmon_dynamic_set_stop_hook(void (*fn)(void *ctx), void *ctx)
{
    shm_mode_set_stop_hook(fn, ctx);
}

MSMON_API int msmon_dynamic_info(struct msmon_dynamic_info *ret)
{
    struct shm_mode_info i;

    if (!ret)
        return -EINVAL;
    shm_mode_get_info(&i);
    memset(ret, 0, sizeof(*ret));
    ret->enabled = i.enabled;
    ret->creator = i.creator;
    ret->polling = i.poller;
    ret->registered = i.poller_state.registered;
    ret->reachable = i.poller_state.reachable;
    ret->registrations = i.poller_state.registrations;
    ret->rank = i.rank;
    ret->step = i.step;
    snprintf(ret->path, sizeof(ret->path), "%s", i.path);
    return 0;
}

MSMON_API int msmon_dynamic_attach(const char *path, int *ret_fd, int *ret_creator, char *err, size_t errcap)
{
    bool creator = false;
    int rc;

    if (!path || !ret_fd || !ret_creator)
        return -EINVAL;
    api_init(); /* the takeover WARNING goes to the plugin log */
    rc = shmseg_attach(path, shm_mode_stale_seconds(penv_get(PENV_SHM_STALE_S)), ret_fd, &creator, err, errcap);
    *ret_creator = creator;
    return rc;
}

MSMON_API int msmon_monitor_start(const int32_t *kinds, size_t n)
{
    struct monitor_start_args a = { .output = MSMON_OUTPUT_MEMORY, .standalone = true };
    int32_t kept[MON_KIND_LIMIT];
    uint32_t mask = 0;
    size_t nk = 0;
    int rc;

    api_init();
    for (size_t i = 0; kinds && i < n; i++) {
        if (!kinds_standalone(kinds[i]) || (mask & (1u << kinds[i])))
            continue;
        mask |= 1u << kinds[i];
        kept[nk++] = kinds[i];
    }
    if (nk == 0) {
        LOG_WARN("Invalid MsptiActivityKind");
        return -EINVAL;
    }
    if (monitor_running()) {
        LOG_WARN("MsptiMonitor already started");
        return -EALREADY;
    }
    a.memory_kinds = kept;
    a.n_memory_kinds = nk;
    rc = monitor_start(&a);
    if (rc == -EALREADY)
        LOG_WARN("MsptiMonitor already started");
    if (rc != 0)
        return rc;
    return monitor_replace_kinds(mask);
}

MSMON_API int msmon_monitor_stop(void)
{
    int rc;

    api_init();
    rc = monitor_stop();
    if (rc == -ENOENT)
        LOG_WARN("MsptiMonitor not started");
    return rc;
}

/* The standalone results are the session's: asked of the session actor. */
MSMON_API int msmon_monitor_kinds(int32_t *out, size_t cap, size_t *ret_n)
{
    if (!ret_n || (cap && !out))
        return -EINVAL;
    api_init();
    return monitor_memory_kinds(out, cap, ret_n);
}

MSMON_API int msmon_monitor_results(int32_t kind, const struct msmon_result **ret_arr, size_t *ret_n)
{
    if (!ret_arr || !ret_n)
        return -EINVAL;
    api_init();
    return monitor_memory_results(kind, ret_arr, ret_n);
}

/* CUDA_INJECTION64_PATH: the driver calls this at cuInit, on the program's thread and outside
 * the loader lock, so the first use and the poller start here. */
struct api_env {
    const char *const *names, *const *values;
    size_t n;
};

static const char *api_env_get(void *ctx, const char *name)
{
    const struct api_env *e = ctx;
    const char *v = NULL;

    for (size_t i = 0; i < e->n; i++)
        if (e->names[i] && e->values[i] && strcmp(e->names[i], name) == 0)
            v = e->values[i]; /* the last one wins, like a dict */
    return v;
}

MSMON_API int msmon_dynamic_job_key(const char *const *names, const char *const *values, size_t n, int32_t ppid,
                                    int32_t pid, char *buf, size_t cap, char *source, size_t scap)
{
    struct api_env e = { names, values, n };
    const struct job_key_env env = { .get = api_env_get, .ctx = &e };
    char src[160];

    if ((n && (!names || !values)) || !buf)
        return -EINVAL;
    if (job_key_of(&env, (pid_t)ppid, (pid_t)pid, buf, cap, src, sizeof(src)) != 0)
        return -ENOSPC;
    if (source && scap)
        snprintf(source, scap, "%s", src);
    return 0;
}

MSMON_API int msmon_dynamic_use_daemon(const char *msmon, const char *kineto, char *why, size_t cap)
{
    return shm_mode_use_daemon(msmon, kineto, why, cap) ? 1 : 0;
}

MSMON_API int msmon_dynamic_trace_info(struct msmon_trace_info *ret)
{
    struct monitor_window_view v;

    if (!ret)
        return -EINVAL;
    memset(ret, 0, sizeof(*ret));
    monitor_window_view(&v);
    ret->state = v.state;
    ret->start_step = v.start;
    ret->stop_step = v.stop;
    ret->step = v.step;
    ret->rank = v.rank;
    ret->flags = v.flags;
    ret->windows = v.windows;
    snprintf(ret->log_dir, sizeof(ret->log_dir), "%s", v.log_dir);
    monitor_last_artifact(ret->last_trace, sizeof(ret->last_trace));
    return 0;
}

MSMON_API uint32_t msmon_dynamic_trace_epoch(void)
{
    return monitor_window_epoch();
}

MSMON_API int InitializeInjection(void)
{
    api_init();
    if ((penv_is_one(PENV_USE_DAEMON) || penv_is_one(PENV_KINETO_USE_DAEMON)) && penv_is_one(PENV_NATIVE_POLL))
        (void)native_poller_start();
    return 1;
}
