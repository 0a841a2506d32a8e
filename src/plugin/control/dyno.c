/* dyno: registration, polling and status reports of this process to dynolog. All state is
 * under one mutex; polling drains queued replies before asking so a late ack or reply
 * never shifts configs by one poll (D3). */
#include "plugin/control/dyno.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/strutil.h"
#include "plugin/control/backlog.h"
#include "plugin/control/ipc_client.h"
#include "plugin/penv.h"

struct dyno_state {
    struct ipc_client *client;       /* created at first use */
    bool registered;
    int32_t npu;
    uint64_t reg_stamp;              /* identity of dynolog.sock at registration */
    bool ctrl_failed;                /* last control send failed: repeats are not logged */
    unsigned registrations;          /* successful ctxt sends (first and re-registrations) */
    int32_t last_monitor_status;
    int32_t last_trace[4];           /* status, current, start, stop of the last trace status sent */
    int32_t pids[IPC_PLUGIN_MAX_PIDS];
    int npids;
    char *pending;                   /* non-empty config not yet returned */
    size_t pending_len;
    /* data channel, under dyno_client_lock (never held across a send) */
    struct backlog *backlog;         /* undelivered data, created at the first data send */
    bool data_failing;               /* data channel currently failing (log once) */
    bool data_dropping;              /* the backlog dropped since it last drained (log once) */
    uint64_t data_dropped_logged;    /* backlog drop total at the last recovery line */
    struct log_ratelimit data_drop_rl;
};

/* The load-time state; dyno_reset() returns to it. */
#define DYNO_STATE_INIT { .last_monitor_status = IPC_STATUS_IDLE, .last_trace = { IPC_STATUS_IDLE, -1, -1, -1 } }
static pthread_mutex_t dyno_lock = PTHREAD_MUTEX_INITIALIZER; /* registration, polling, pending */
static struct dyno_state dyno = DYNO_STATE_INIT;
static pthread_mutex_t dyno_client_lock = PTHREAD_MUTEX_INITIALIZER;

static struct ipc_client *dyno_client(void)
{
    struct ipc_client *c;

    pthread_mutex_lock(&dyno_client_lock);
    if (!dyno.client && ipc_client_create(NULL, &dyno.client) != 0)
        dyno.client = NULL;
    c = dyno.client;
    pthread_mutex_unlock(&dyno_client_lock);
    return c;
}

/* Parent pid from /proc/<pid>/stat: field 4, parsed after the last ')'. */
static int dyno_ppid(int32_t pid, int32_t *ret)
{
    char path[64], buf[1024];
    const char *p;
    char field[24];
    size_t n = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "re");
    if (!f)
        return -errno;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')');
    if (!p || sscanf(p + 1, " %*c %23s", field) != 1)
        return -EINVAL;
    return str_to_i32(field, ret);
}

static void dyno_compute_pids(void)
{
    int32_t pid = (int32_t)getpid(), ppid;

    dyno.pids[0] = pid;
    dyno.npids = 1;
    while (dyno.npids < IPC_PLUGIN_MAX_PIDS && dyno_ppid(pid, &ppid) == 0 && ppid > 1) {
        dyno.pids[dyno.npids++] = ppid;
        pid = ppid;
    }
}

/* Control sends run every period from the poller; while the daemon is away only the first
 * failure is logged at ERROR (collectd-style), and the recovery once at INFO. A daemon known
 * to be away gets one attempt, no retries: the poller's back-off does the retrying, and a
 * stale socket then costs one refused send instead of ~10 s of retry sleeps. */
static int dyno_send_ctrl(struct ipc_client *c, const char *tag, const void *payload, size_t len)
{
    bool was_failing = dyno.ctrl_failed;
    int rc = ipc_client_send(c, IPC_CLIENT_CTRL, tag, payload, len, was_failing ? 0 : IPC_CLIENT_CTRL_RETRIES,
                             IPC_CLIENT_CTRL_FIRST_SLEEP_NS, was_failing ? IPC_CLIENT_QUIET : 0);
    dyno.ctrl_failed = rc != 0;
    if (rc == 0 && was_failing)
        LOG_INFO("dyno: the daemon is reachable again");
    return rc;
}

#define DYNO_LOG_FAILURE(was_failing, ...)                                                           \
    do {                                                                                            \
        if (was_failing)                                                                            \
            LOG_DEBUG(__VA_ARGS__);                                                                 \
        else                                                                                        \
            LOG_ERROR(__VA_ARGS__);                                                                 \
    } while (0)

static int dyno_send_status_locked(struct ipc_client *c, const char *tag, int32_t status, int32_t cur,
                                   int32_t start, int32_t stop)
{
    struct ipc_status st = {
        .status = status, .current_step = cur, .start_step = start, .stop_step = stop,
        .pid = (int32_t)getpid(), ._pad = 0, .job_id = 0,
    };
    int rc = dyno_send_ctrl(c, tag, &st, sizeof(st));
    if (rc == 0 && strcmp(tag, IPC_TYPE_MONITOR_STATUS) == 0) {
        dyno.last_monitor_status = status;
    } else if (rc == 0) {
        dyno.last_trace[0] = status;
        dyno.last_trace[1] = cur;
        dyno.last_trace[2] = start;
        dyno.last_trace[3] = stop;
    }
    return rc;
}

static int dyno_register_locked(struct ipc_client *c)
{
    struct ipc_ctxt ctxt = { .npu = dyno.npu, .pid = (int32_t)getpid(), .job_id = 0 };
    bool was_failing = dyno.ctrl_failed;
    int rc;

    dyno.reg_stamp = ipc_client_dest_stamp(c, IPC_CLIENT_CTRL);
    rc = dyno_send_ctrl(c, IPC_TYPE_CTXT, &ctxt, sizeof(ctxt));
    if (rc != 0) {
        DYNO_LOG_FAILURE(was_failing, "Failed to send register ctxt for pid %d with dyno", (int)getpid());
        return rc;
    }
    LOG_INFO("Resigter pid %d for dynolog success!", (int)getpid());
    dyno.registrations++;
    return 0;
}

int dyno_init(int32_t npu_id)
{
    struct ipc_client *c;
    int ok = 0;

    pthread_mutex_lock(&dyno_lock);
    if (dyno.registered) {
        LOG_WARN("DynoLog npu monitor already initialized");
        ok = 1;
        goto out;
    }
    c = dyno_client();
    if (!c)
        goto out;
    if (dyno.npids == 0)
        dyno_compute_pids();
    dyno.npu = npu_id;
    if (dyno_register_locked(c) != 0)
        goto out;
    dyno.registered = true;
    LOG_INFO("DynoLog npu monitor initialized successfully");
    (void)dyno_send_status_locked(c, IPC_TYPE_TRACE_STATUS, IPC_STATUS_IDLE, -1, -1, -1);
    (void)dyno_send_status_locked(c, IPC_TYPE_MONITOR_STATUS, IPC_STATUS_IDLE, -1, -1, -1);
    ok = 1;
out:
    pthread_mutex_unlock(&dyno_lock);
    return ok;
}

/* Keep `text` as the newest non-empty config; a superseded one is logged. */
static void dyno_keep(const uint8_t *text, size_t len)
{
    char *copy;

    if (len == 0)
        return;
    if (dyno.pending_len) {
        const char *old = dyno.pending;
        size_t n = 0;
        while (n < dyno.pending_len && (old[n] == '\n' || old[n] == ' '))
            n++;
        size_t e = n;
        while (e < dyno.pending_len && old[e] != '\n')
            e++;
        LOG_WARN("Superseded an unread npu config: %.*s", (int)(e - n), old + n);
    }
    copy = realloc(dyno.pending, len + 1);
    if (!copy) {
        LOG_ERROR("dyno: out of memory keeping a config of %zu bytes", len);
        return;
    }
    memcpy(copy, text, len);
    copy[len] = '\0';
    dyno.pending = copy;
    dyno.pending_len = len;
}

/* Handle one received datagram; returns true if it was a `req` reply. */
static bool dyno_handle(const struct ipc_client_msg *m)
{
    switch (m->type) {
    case IPC_T_CTXT:
        LOG_INFO("Regist to dynolog daemon successfully");
        return false;
    case IPC_T_REQ:
        dyno_keep(m->payload, m->len);
        return true;
    default:
        LOG_WARN("dyno: ignored unexpected '%s' datagram from the daemon", m->type_str);
        return false;
    }
}

/* Daemon restarted (new socket file) or the last control send failed: register again. */
static void dyno_recover_locked(struct ipc_client *c)
{
    uint64_t stamp;

    if (!dyno.registered)
        return;
    stamp = ipc_client_dest_stamp(c, IPC_CLIENT_CTRL);
    if (stamp == 0 || (stamp == dyno.reg_stamp && !dyno.ctrl_failed))
        return;
    LOG_INFO("dyno: daemon socket changed or was unreachable, registering again");
    if (dyno_register_locked(c) == 0) {
        /* A new daemon knows neither status; its npu-monitor gate needs both. */
        (void)dyno_send_status_locked(c, IPC_TYPE_TRACE_STATUS, dyno.last_trace[0], dyno.last_trace[1],
                                      dyno.last_trace[2], dyno.last_trace[3]);
        (void)dyno_send_status_locked(c, IPC_TYPE_MONITOR_STATUS, dyno.last_monitor_status, -1, -1, -1);
    }
}

static int dyno_take(char *buf, size_t cap, size_t *ret_len)
{
    *ret_len = 0;
    if (!dyno.pending_len)
        return 0;
    *ret_len = dyno.pending_len;
    if (dyno.pending_len + 1 > cap)
        return -ENOSPC; /* kept for the next call */
    memcpy(buf, dyno.pending, dyno.pending_len + 1);
    LOG_INFO("Received NPU configuration successfully");
    free(dyno.pending);
    dyno.pending = NULL;
    dyno.pending_len = 0;
    return 0;
}

int dyno_poll(char *buf, size_t cap, size_t *ret_len)
{
    uint8_t reqbuf[sizeof(struct ipc_req) + IPC_PLUGIN_MAX_PIDS * sizeof(int32_t)];
    struct ipc_req req;
    struct ipc_client_msg m;
    struct ipc_client *c;
    uint64_t deadline;
    bool was_failing;
    int rc;

    if (!buf || !ret_len)
        return -EINVAL;
    pthread_mutex_lock(&dyno_lock);
    *ret_len = 0;
    c = dyno_client();
    if (!c) {
        rc = -ENOTCONN;
        goto out;
    }
    if (dyno.npids == 0)
        dyno_compute_pids();
    while (ipc_client_recv(c, 0, &m) == 0)
        (void)dyno_handle(&m);
    dyno_recover_locked(c);

    req.type = IPC_REQ_EVENTS | IPC_REQ_ACTIVITIES;
    req.n = dyno.npids;
    req.job_id = 0;
    memcpy(reqbuf, &req, sizeof(req));
    memcpy(reqbuf + sizeof(req), dyno.pids, (size_t)dyno.npids * sizeof(int32_t));
    was_failing = dyno.ctrl_failed;
    if (dyno_send_ctrl(c, IPC_TYPE_REQ, reqbuf, sizeof(req) + (size_t)dyno.npids * sizeof(int32_t)) != 0) {
        DYNO_LOG_FAILURE(was_failing, "Failed to send config to dyno server");
        rc = dyno_take(buf, cap, ret_len);
        goto out;
    }
    /* 5 x 10 ms: the daemon answers within its loop iteration. */
    deadline = clock_mono_ns() + 50000000ull;
    for (;;) {
        uint64_t now = clock_mono_ns();
        if (now >= deadline)
            break;
        if (ipc_client_recv(c, (int)((deadline - now + 999999) / 1000000), &m) != 0)
            break;
        if (dyno_handle(&m))
            break;
    }
    rc = dyno_take(buf, cap, ret_len);
out:
    pthread_mutex_unlock(&dyno_lock);
    return rc;
}

int dyno_send_trace_status(int32_t status, int32_t cur, int32_t start, int32_t stop)
{
    struct ipc_client *c = dyno_client();
    int rc;

    if (!c)
        return -ENOTCONN;
    pthread_mutex_lock(&dyno_lock);
    rc = dyno_send_status_locked(c, IPC_TYPE_TRACE_STATUS, status, cur, start, stop);
    pthread_mutex_unlock(&dyno_lock);
    return rc;
}

int dyno_send_monitor_status(int32_t status)
{
    struct ipc_client *c = dyno_client();
    int rc;

    if (!c)
        return -ENOTCONN;
    pthread_mutex_lock(&dyno_lock);
    rc = dyno_send_status_locked(c, IPC_TYPE_MONITOR_STATUS, status, -1, -1, -1);
    pthread_mutex_unlock(&dyno_lock);
    return rc;
}

/* The byte cap of the backlog: MSMONITOR_DATA_BACKLOG_BYTES (tests), else the default. */
static size_t dyno_backlog_bytes(void)
{
    const char *raw = penv_get(PENV_DATA_BACKLOG_BYTES);
    uint64_t v;

    if (!raw)
        return BACKLOG_DEFAULT_BYTES;
    if (str_to_u64(raw, &v) != 0 || v > BACKLOG_MAX_BYTES) {
        LOG_WARN("dyno: %s='%s' invalid (0..%u bytes), using %u", penv_name(PENV_DATA_BACKLOG_BYTES), raw,
                 BACKLOG_MAX_BYTES, BACKLOG_DEFAULT_BYTES);
        return BACKLOG_DEFAULT_BYTES;
    }
    return (size_t)v;
}

static struct backlog *dyno_backlog(void)
{
    struct backlog *b;

    pthread_mutex_lock(&dyno_client_lock);
    if (!dyno.backlog && backlog_create(dyno_backlog_bytes(), BACKLOG_DEFAULT_ENTRIES, &dyno.backlog) != 0)
        dyno.backlog = NULL;
    b = dyno.backlog;
    pthread_mutex_unlock(&dyno_client_lock);
    return b;
}

/* One call's allowance, shared by every payload it sends (the queue first, then the new
 * one): the retry schedule of one plain data send (5 sleeps from 1 ms, 31 ms in all) and as
 * much time again for sending a long queue, so a call never blocks much longer than the send
 * it replaces; what is left goes with the next call or poll. */
#define DYNO_DATA_CALL_NS 31000000ull

struct dyno_data_try {
    struct ipc_client *c;
    unsigned sleeps_left;
    uint64_t sleep_ns;
    uint64_t deadline_ns;
    bool tried;             /* the first payload of a call is always tried */
};

static int dyno_data_send_one(void *ctx, const void *data, size_t len)
{
    struct dyno_data_try *t = ctx;

    if (t->tried && clock_mono_ns() >= t->deadline_ns)
        return -EINPROGRESS;
    t->tried = true;
    for (;;) {
        int rc = ipc_client_send(t->c, IPC_CLIENT_DATA, IPC_TYPE_DATA, data, len, 0, 0, IPC_CLIENT_QUIET);
        if (rc == 0 || (rc != -EAGAIN && rc != -EWOULDBLOCK && rc != -ECONNREFUSED) || t->sleeps_left == 0)
            return rc;
        struct timespec ts = { .tv_sec = (time_t)(t->sleep_ns / 1000000000ull),
                               .tv_nsec = (long)(t->sleep_ns % 1000000000ull) };
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
        t->sleep_ns *= 2;
        t->sleeps_left--;
    }
}

/* collectd-style complaints after a send or flush: once when sending starts failing and
 * once when it works again; once (rate-limited) when the backlog starts dropping and once
 * with the total when it has drained. The session reads the drop total for its counters
 * (dyno_data_backlog); nothing here writes into a session. */
static void dyno_data_account(struct backlog *b, int rc)
{
    struct backlog_stats st;
    uint64_t fresh = backlog_take_dropped(b);

    backlog_get_stats(b, &st);
    pthread_mutex_lock(&dyno_client_lock);
    if (rc != 0 && rc != -EINPROGRESS && !dyno.data_failing) {
        dyno.data_failing = true;
        LOG_ERROR("dyno: sending metric data to the daemon failed: %s; keeping undelivered data for when it is "
                  "back (further failures not logged)", errno_name(-rc));
    } else if (rc == 0 && dyno.data_failing && st.entries == 0) {
        dyno.data_failing = false;
        LOG_INFO("dyno: sending metric data to the daemon works again (%llu kept datagrams delivered so far)",
                 (unsigned long long)st.flushed);
    }
    if (fresh && !dyno.data_dropping) {
        dyno.data_dropping = true;
        LOG_RL(&dyno.data_drop_rl, 10000, LOG_LVL_WARNING,
               "dyno: the undelivered metric data backlog is full; dropping the oldest datagrams (counted as "
               "dropped_offline)");
    } else if (dyno.data_dropping && st.entries == 0) {
        dyno.data_dropping = false;
        LOG_WARN("dyno: %llu metric datagrams dropped from the full backlog while the daemon was unreachable "
                 "(%llu in total)", (unsigned long long)(st.dropped - dyno.data_dropped_logged),
                 (unsigned long long)st.dropped);
        dyno.data_dropped_logged = st.dropped;
    }
    pthread_mutex_unlock(&dyno_client_lock);
}

/* Deliver `json` after everything kept before it (NULL: only the kept ones). Sends run on
 * the caller's thread (the session actor, or the poller) under no dyno lock. */
static int dyno_data_deliver(const char *json, size_t len)
{
    struct ipc_client *c = dyno_client();
    struct backlog *b = dyno_backlog();
    struct dyno_data_try t = { c, IPC_CLIENT_DATA_RETRIES, IPC_CLIENT_DATA_FIRST_SLEEP_NS,
                               clock_mono_ns() + DYNO_DATA_CALL_NS, false };
    int rc;

    if (!c)
        return -ENOTCONN;
    if (!b) { /* no memory for the backlog: the plain send, as before it existed */
        rc = ipc_client_send(c, IPC_CLIENT_DATA, IPC_TYPE_DATA, json, len, IPC_CLIENT_DATA_RETRIES,
                             IPC_CLIENT_DATA_FIRST_SLEEP_NS, IPC_CLIENT_QUIET);
        return rc;
    }
    rc = backlog_send(b, json, len, dyno_data_send_one, &t);
    if (rc != -EBUSY)
        dyno_data_account(b, rc);
    return rc == -EINPROGRESS ? 0 : rc; /* kept behind a queue that is going out */
}

int dyno_send_data(void *ctx, const char *json, size_t len)
{
    (void)ctx;
    return dyno_data_deliver(json, len);
}

int dyno_send_once(const char *json, size_t len)
{
    struct ipc_client *c = dyno_client();

    if (!c)
        return -ENOTCONN;
    return ipc_client_send(c, IPC_CLIENT_DATA, IPC_TYPE_DATA, json, len, 0, 0, IPC_CLIENT_QUIET);
}

int dyno_flush_data(void)
{
    struct backlog_stats st;
    struct backlog *b;

    pthread_mutex_lock(&dyno_client_lock);
    b = dyno.backlog;
    pthread_mutex_unlock(&dyno_client_lock);
    if (!b)
        return 0;
    backlog_get_stats(b, &st);
    if (st.entries == 0)
        return 0;
    return dyno_data_deliver(NULL, 0);
}

void dyno_data_backlog(struct dyno_data_stats *ret)
{
    struct backlog_stats st = { 0 };
    struct backlog *b;

    pthread_mutex_lock(&dyno_client_lock);
    b = dyno.backlog;
    pthread_mutex_unlock(&dyno_client_lock);
    if (b)
        backlog_get_stats(b, &st);
    ret->entries = st.entries;
    ret->bytes = st.bytes;
    ret->dropped = st.dropped;
    ret->flushed = st.flushed;
}

bool dyno_reachable(void)
{
    bool ok;

    pthread_mutex_lock(&dyno_lock);
    ok = dyno.client && !dyno.ctrl_failed;
    pthread_mutex_unlock(&dyno_lock);
    return ok;
}

unsigned dyno_registrations(void)
{
    unsigned n;

    pthread_mutex_lock(&dyno_lock);
    n = dyno.registrations;
    pthread_mutex_unlock(&dyno_lock);
    return n;
}

void dyno_reset(void)
{
    pthread_mutex_lock(&dyno_lock);
    pthread_mutex_lock(&dyno_client_lock);
    ipc_client_destroy(dyno.client);
    free(dyno.pending);
    backlog_destroy(dyno.backlog);
    dyno = (struct dyno_state)DYNO_STATE_INIT;
    pthread_mutex_unlock(&dyno_client_lock);
    pthread_mutex_unlock(&dyno_lock);
}
