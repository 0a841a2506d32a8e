/* npoll: a 2-second loop on its own thread. It retries registration until the daemon is
 * reachable, so a job started before the daemon is picked up once the daemon appears. */
#include "plugin/control/npoll.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/strutil.h"
#include "msmon/ipc_wire.h"
#include "msmon/msmonitor.h"
#include "plugin/control/dyno.h"
#include "plugin/penv.h"

#define NPOLL_PERIOD_NS 2000000000ull
#define NPOLL_MAX_ITEMS 64

static pthread_mutex_t npoll_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t npoll_cond;
static pthread_once_t npoll_once = PTHREAD_ONCE_INIT;
static bool npoll_running, npoll_stop_req;
static pthread_t npoll_thread;

static void npoll_cond_init(void)
{
    pthread_condattr_t a;

    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&npoll_cond, &a);
    pthread_condattr_destroy(&a);
}

int npoll_apply_text(const char *text, size_t len)
{
    char *copy, *line, *save = NULL;
    const char *keys[NPOLL_MAX_ITEMS], *values[NPOLL_MAX_ITEMS];
    size_t n = 0;
    int rc;

    if (!memmem(text, len, "NPU_MONITOR_START", strlen("NPU_MONITOR_START"))) {
        LOG_INFO("MsMonitorPoll: ignored a config that is not an npu-monitor config (%zu bytes)", len);
        return -ENOMSG;
    }
    copy = malloc(len + 1);
    if (!copy)
        return -ENOMEM;
    memcpy(copy, text, len);
    copy[len] = '\0';
    for (line = copy; line && n < NPOLL_MAX_ITEMS; line = save) {
        char *nl = strchr(line, '\n'), *eq;
        save = nl ? nl + 1 : NULL;
        if (nl)
            *nl = '\0';
        eq = strchr(line, '=');
        if (!eq || strchr(eq + 1, '='))
            continue; /* exactly two parts, like torch_npu */
        *eq = '\0';
        keys[n] = line;
        values[n] = eq + 1;
        n++;
    }
    rc = msmon_enable_npu_monitor(keys, values, n);
    free(copy);
    return rc;
}

static int32_t npoll_rank(void)
{
    int32_t r;
    const char *v = penv_get(PENV_RANK);

    if (v && str_to_i32(v, &r) == 0)
        return r;
    v = penv_get(PENV_RANK_ID);
    if (v && str_to_i32(v, &r) == 0)
        return r;
    return 0;
}

static void *npoll_main(void *arg)
{
    static char buf[DYNO_MAX_CONFIG + 64];
    bool registered = false;
    uint64_t next = 0;

    (void)arg;
    pthread_setname_np(pthread_self(), "MsMonitorPoll");
    pthread_mutex_lock(&npoll_lock);
    while (!npoll_stop_req) {
        uint64_t now = clock_mono_ns();
        if (now < next) {
            struct timespec ts = { .tv_sec = (time_t)(next / 1000000000ull), .tv_nsec = (long)(next % 1000000000ull) };
            pthread_cond_timedwait(&npoll_cond, &npoll_lock, &ts);
            continue;
        }
        next = now + NPOLL_PERIOD_NS;
        pthread_mutex_unlock(&npoll_lock);
        if (!registered)
            registered = msmon_init_dyno(npoll_rank()) == 1;
        if (registered) {
            size_t len = 0;
            if (msmon_poll_dyno(buf, sizeof(buf), &len) == 0 && len > 0)
                (void)npoll_apply_text(buf, len);
            (void)msmon_update_profiler_status(IPC_STATUS_IDLE, -1, -1, -1);
        }
        pthread_mutex_lock(&npoll_lock);
    }
    pthread_mutex_unlock(&npoll_lock);
    if (registered)
        (void)msmon_update_profiler_status(-1, -1, -1, -1);
    return NULL;
}

int npoll_start(void)
{
    sigset_t all, old;
    int rc = 0;

    pthread_once(&npoll_once, npoll_cond_init);
    pthread_mutex_lock(&npoll_lock);
    if (npoll_running)
        goto out;
    npoll_stop_req = false;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    rc = -pthread_create(&npoll_thread, NULL, npoll_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        LOG_ERROR("MsMonitorPoll: cannot create the poller thread: %s", errno_name(-rc));
        goto out;
    }
    npoll_running = true;
    LOG_INFO("MsMonitorPoll: native poller started");
out:
    pthread_mutex_unlock(&npoll_lock);
    return rc;
}

void npoll_stop(void)
{
    pthread_t t;

    pthread_once(&npoll_once, npoll_cond_init);
    pthread_mutex_lock(&npoll_lock);
    if (!npoll_running) {
        pthread_mutex_unlock(&npoll_lock);
        return;
    }
    npoll_stop_req = true;
    npoll_running = false;
    t = npoll_thread;
    pthread_cond_signal(&npoll_cond);
    pthread_mutex_unlock(&npoll_lock);
    pthread_join(t, NULL);
}
