/* api: the exported C API of libmsmonitor.so (include/msmon/msmonitor.h), the only file that
 * includes that header. Thin: every call makes sure logging and the backend are set up (first
 * use), then delegates down to the control layer (control, dyno, npoll, dynamic) or the
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
#include "plugin/outputs/proc_memory.h"
#include "plugin/control/control.h"
#include "plugin/control/dynamic.h"
#include "plugin/control/dyno.h"
#include "plugin/control/monitor.h"
#include "plugin/control/npoll.h"
#include "plugin/penv.h"

/* Standalone results live in proc_memory.c (plugin data area). */

static pthread_once_t api_once = PTHREAD_ONCE_INIT;

static void api_atexit(void)
{
    npoll_stop();           /* sends the -1 statuses */
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
    return dyno_init(npu_id);
}

MSMON_API int msmon_poll_dyno(char *buf, size_t cap, size_t *len)
{
    api_init();
    return dyno_poll(buf, cap, len);
}

MSMON_API int msmon_enable_npu_monitor(const char *const *keys, const char *const *values, size_t n)
{
    api_init();
    return control_apply_config(keys, values, n);
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
    return control_report_status(status, current_step, start_step, stop_step);
}

MSMON_API int msmon_native_poll_start(void)
{
    api_init();
    return npoll_start();
}

MSMON_API void msmon_native_poll_stop(void)
{
    npoll_stop();
}

MSMON_API int msmon_dynamic_init(void)
{
    return msmon_dynamic_init_ex(-1, 0);
}

MSMON_API int msmon_dynamic_init_ex(int32_t rank, unsigned flags)
{
    api_init(); /* first, so dynamic's atexit clean-up runs before api_atexit */
    return dyn_init(rank, (flags & MSMON_DYNAMIC_ECHO) ? DYN_INIT_ECHO : 0);
}

MSMON_API int msmon_dynamic_step(void)
{
    return dyn_step();
}

MSMON_API int msmon_dynamic_step_nowait(void)
{
    return dyn_step_nowait();
}

MSMON_API void msmon_dynamic_finalize(void)
{
    dyn_finalize();
}

MSMON_API void msmon_dynamic_set_stop_hook(void (*fn)(void *ctx), void *ctx)
{
    dyn_set_stop_hook(fn, ctx);
}

MSMON_API int msmon_dynamic_info(struct msmon_dynamic_info *ret)
{
    struct dyn_info i;

    if (!ret)
        return -EINVAL;
    dyn_get_info(&i);
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
    rc = dyn_attach_or_create(path, dyn_stale_seconds(penv_get(PENV_SHM_STALE_S)), ret_fd, &creator, err, errcap);
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
    rc = proc_memory_set_requested_kinds(kept, nk);
    if (rc != 0)
        return rc;
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

MSMON_API int msmon_monitor_kinds(int32_t *out, size_t cap, size_t *ret_n)
{
    return proc_memory_kinds(out, cap, ret_n);
}

MSMON_API int msmon_monitor_results(int32_t kind, const struct msmon_result **ret_arr, size_t *ret_n)
{
    return proc_memory_results(kind, ret_arr, ret_n);
}

/* CUDA_INJECTION64_PATH: the driver calls this at cuInit, on the program's thread and outside
 * the loader lock, so the first use and the poller start here. */
MSMON_API int InitializeInjection(void)
{
    api_init();
    if ((penv_is_one(PENV_USE_DAEMON) || penv_is_one(PENV_KINETO_USE_DAEMON)) && penv_is_one(PENV_NATIVE_POLL))
        (void)npoll_start();
    return 1;
}
