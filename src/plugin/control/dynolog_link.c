/* dynolog_link: registration, polling, status reports and data of this process to dynolog
 * (its log lines keep the `dyno:` prefix users grep for). All state is under one mutex;
 * polling drains queued replies before asking so a late ack or reply never shifts configs by
 * one poll. */
#include "plugin/control/dynolog_link.h"

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

struct link_state {
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
    /* data channel, under link_client_lock (never held across a send) */
    struct backlog *backlog;         /* undelivered data, created at the first data send */
    bool data_failing;               /* data channel currently failing (log once) */
    bool data_dropping;              /* the backlog dropped since it last drained (log once) */
    uint64_t data_dropped_logged;    /* backlog drop total at the last recovery line */
    struct log_ratelimit data_drop_rl;
};

/* The load-time state; dynolog_reset() returns to it. */
#define LINK_STATE_INIT { .last_monitor_status = IPC_STATUS_IDLE, .last_trace = { IPC_STATUS_IDLE, -1, -1, -1 } }
static pthread_mutex_t link_lock = PTHREAD_MUTEX_INITIALIZER; /* registration, polling, pending */
static struct link_state lk = LINK_STATE_INIT;
static pthread_mutex_t link_client_lock = PTHREAD_MUTEX_INITIALIZER;

static struct ipc_client *link_client(void)
{
    struct ipc_client *c;

    pthread_mutex_lock(&link_client_lock);
    if (!lk.client && ipc_client_create(NULL, &lk.client) != 0)
        lk.client = NULL;
    c = lk.client;
    pthread_mutex_unlock(&link_client_lock);
    return c;
}

/* Parent pid from /proc/<pid>/stat: field 4, parsed after the last ')'. */
static int link_ppid(int32_t pid, int32_t *ret)
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

static void link_compute_pids(void)
{
    int32_t pid = (int32_t)getpid(), ppid;

    lk.pids[0] = pid;
    lk.npids = 1;
    while (lk.npids < IPC_PLUGIN_MAX_PIDS && link_ppid(pid, &ppid) == 0 && ppid > 1) {
        lk.pids[lk.npids++] = ppid;
        pid = ppid;
    }
}

/* Control sends run every period from the poller; while the daemon is away only the first
 * failure is logged at ERROR (collectd-style), and the recovery once at INFO. A daemon known
 * to be away gets one attempt, no retries: the poller's back-off does the retrying, and a
 * stale socket then costs one refused send instead of ~10 s of retry sleeps. */
static int link_send_ctrl(struct ipc_client *c, const char *tag, const void *payload, size_t len)
{
    bool was_failing = lk.ctrl_failed;
    int rc = ipc_client_send(c, IPC_CLIENT_CTRL, tag, payload, len, was_failing ? 0 : IPC_CLIENT_CTRL_RETRIES,
                             IPC_CLIENT_CTRL_FIRST_SLEEP_NS, was_failing ? IPC_CLIENT_QUIET : 0);
    lk.ctrl_failed = rc != 0;
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

static int link_send_status_locked(struct ipc_client *c, const char *tag, int32_t status, int32_t cur,
                                   int32_t start, int32_t stop)
{
    struct ipc_status st = {
        .status = status, .current_step = cur, .start_step = start, .stop_step = stop,
        .pid = (int32_t)getpid(), ._pad = 0, .job_id = 0,
    };
    int rc = link_send_ctrl(c, tag, &st, sizeof(st));
    if (rc == 0 && strcmp(tag, IPC_TYPE_MONITOR_STATUS) == 0) {
        lk.last_monitor_status = status;
    } else if (rc == 0) {
        lk.last_trace[0] = status;
        lk.last_trace[1] = cur;
        lk.last_trace[2] = start;
        lk.last_trace[3] = stop;
    }
    return rc;
}

static int link_register_locked(struct ipc_client *c)
{
    struct ipc_ctxt ctxt = { .npu = lk.npu, .pid = (int32_t)getpid(), .job_id = 0 };
    bool was_failing = lk.ctrl_failed;
    int rc;

    lk.reg_stamp = ipc_client_dest_stamp(c, IPC_CLIENT_CTRL);
    rc = link_send_ctrl(c, IPC_TYPE_CTXT, &ctxt, sizeof(ctxt));
    if (rc != 0) {
        DYNO_LOG_FAILURE(was_failing, "Failed to send register ctxt for pid %d with dyno", (int)getpid());
        return rc;
    }
    LOG_INFO("Resigter pid %d for dynolog success!", (int)getpid());
    lk.registrations++;
    return 0;
}

int dynolog_init(int32_t npu_id)
{
    struct ipc_client *c;
    int ok = 0;

    pthread_mutex_lock(&link_lock);
    if (lk.registered) {
        LOG_WARN("DynoLog npu monitor already initialized");
        ok = 1;
        goto out;
    }
    c = link_client();
    if (!c)
        goto out;
    if (lk.npids == 0)
        link_compute_pids();
    lk.npu = npu_id;
    if (link_register_locked(c) != 0)
        goto out;
    lk.registered = true;
    LOG_INFO("DynoLog npu monitor initialized successfully");
    (void)link_send_status_locked(c, IPC_TYPE_TRACE_STATUS, IPC_STATUS_IDLE, -1, -1, -1);
    (void)link_send_status_locked(c, IPC_TYPE_MONITOR_STATUS, IPC_STATUS_IDLE, -1, -1, -1);
    ok = 1;
out:
    pthread_mutex_unlock(&link_lock);
    return ok;
}

/* Keep `text` as the newest non-empty config; a superseded one is logged. */
static void link_keep(const uint8_t *text, size_t len)
{
    char *copy;

    if (len == 0)
        return;
    if (lk.pending_len) {
        const char *old = lk.pending;
        size_t n = 0;
        while (n < lk.pending_len && (old[n] == '\n' || old[n] == ' '))
            n++;
        size_t e = n;
        while (e < lk.pending_len && old[e] != '\n')
            e++;
        LOG_WARN("Superseded an unread npu config: %.*s", (int)(e - n), old + n);
    }
    copy = realloc(lk.pending, len + 1);
    if (!copy) {
        LOG_ERROR("dyno: out of memory keeping a config of %zu bytes", len);
        return;
    }
    memcpy(copy, text, len);
    copy[len] = '\0';
    lk.pending = copy;
    lk.pending_len = len;
}

/* Handle one received datagram; returns true if it was a `req` reply. */
static bool link_handle(const struct ipc_client_msg *m)
{
    switch (m->type) {
    case IPC_T_CTXT:
        LOG_INFO("Regist to dynolog daemon successfully");
        return false;
    case IPC_T_REQ:
        link_keep(m->payload, m->len);
        return true;
    default:
        LOG_WARN("dyno: ignored unexpected '%s' datagram from the daemon", m->type_str);
        return false;
    }
}

/* Daemon restarted (new socket file) or the last control send failed: register again. */
static void link_recover_locked(struct ipc_client *c)
{
    uint64_t stamp;

    if (!lk.registered)
        return;
    stamp = ipc_client_dest_stamp(c, IPC_CLIENT_CTRL);
    if (stamp == 0 || (stamp == lk.reg_stamp && !lk.ctrl_failed))
        return;
    LOG_INFO("dyno: daemon socket changed or was unreachable, registering again");
    if (link_register_locked(c) == 0) {
        /* A new daemon knows neither status; its npu-monitor gate needs both. */
        (void)link_send_status_locked(c, IPC_TYPE_TRACE_STATUS, lk.last_trace[0], lk.last_trace[1],
                                      lk.last_trace[2], lk.last_trace[3]);
        (void)link_send_status_locked(c, IPC_TYPE_MONITOR_STATUS, lk.last_monitor_status, -1, -1, -1);
    }
}

static int link_take(char *buf, size_t cap, size_t *ret_len)
{
    *ret_len = 0;
    if (!lk.pending_len)
        return 0;
    *ret_len = lk.pending_len;
    if (lk.pending_len + 1 > cap)
        return -ENOSPC; /* kept for the next call */
    memcpy(buf, lk.pending, lk.pending_len + 1);
    LOG_INFO("Received NPU configuration successfully");
    free(lk.pending);
    lk.pending = NULL;
    lk.pending_len = 0;
    return 0;
}

int dynolog_poll(char *buf, size_t cap, size_t *ret_len)
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
    pthread_mutex_lock(&link_lock);
    *ret_len = 0;
    c = link_client();
    if (!c) {
        rc = -ENOTCONN;
        goto out;
    }
    if (lk.npids == 0)
        link_compute_pids();
    while (ipc_client_recv(c, 0, &m) == 0)
        (void)link_handle(&m);
    link_recover_locked(c);

    req.type = IPC_REQ_EVENTS | IPC_REQ_ACTIVITIES;
    req.n = lk.npids;
    req.job_id = 0;
    memcpy(reqbuf, &req, sizeof(req));
    memcpy(reqbuf + sizeof(req), lk.pids, (size_t)lk.npids * sizeof(int32_t));
    was_failing = lk.ctrl_failed;
    if (link_send_ctrl(c, IPC_TYPE_REQ, reqbuf, sizeof(req) + (size_t)lk.npids * sizeof(int32_t)) != 0) {
        DYNO_LOG_FAILURE(was_failing, "Failed to send config to dyno server");
        rc = link_take(buf, cap, ret_len);
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
        if (link_handle(&m))
            break;
    }
    rc = link_take(buf, cap, ret_len);
out:
    pthread_mutex_unlock(&link_lock);
    return rc;
}

int dynolog_send_trace_status(int32_t status, int32_t cur, int32_t start, int32_t stop)
{
    struct ipc_client *c = link_client();
    int rc;

    if (!c)
        return -ENOTCONN;
    pthread_mutex_lock(&link_lock);
    rc = link_send_status_locked(c, IPC_TYPE_TRACE_STATUS, status, cur, start, stop);
    pthread_mutex_unlock(&link_lock);
    return rc;
}

int dynolog_send_monitor_status(int32_t status)
{
    struct ipc_client *c = link_client();
    int rc;

    if (!c)
        return -ENOTCONN;
    pthread_mutex_lock(&link_lock);
    rc = link_send_status_locked(c, IPC_TYPE_MONITOR_STATUS, status, -1, -1, -1);
    pthread_mutex_unlock(&link_lock);
    return rc;
}

/* The byte cap of the backlog: MSMONITOR_DATA_BACKLOG_BYTES (tests), else the default. */
static size_t link_backlog_bytes(void)
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

static struct backlog *link_backlog(void)
{
    struct backlog *b;

    pthread_mutex_lock(&link_client_lock);
    if (!lk.backlog && backlog_create(link_backlog_bytes(), BACKLOG_DEFAULT_ENTRIES, &lk.backlog) != 0)
        lk.backlog = NULL;
    b = lk.backlog;
    pthread_mutex_unlock(&link_client_lock);
    return b;
}

/* One call's allowance, shared by every payload it sends (the queue first, then the new
 * one): the retry schedule of one plain data send (5 sleeps from 1 ms, 31 ms in all) and as
 * much time again for sending a long queue, so a call never blocks much longer than the send
 * it replaces; what is left goes with the next call or poll. */
#define DYNO_DATA_CALL_NS 31000000ull

struct link_data_try {
    struct ipc_client *c;
    unsigned sleeps_left;
    uint64_t sleep_ns;
    uint64_t deadline_ns;
    bool tried;             /* the first payload of a call is always tried */
};

static int link_data_send_one(void *ctx, const void *data, size_t len)
{
    struct link_data_try *t = ctx;

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
 * (dynolog_data_backlog); nothing here writes into a session. */
static void link_data_account(struct backlog *b, int rc)
{
    struct backlog_stats st;
    uint64_t fresh = backlog_take_dropped(b);

    backlog_get_stats(b, &st);
    pthread_mutex_lock(&link_client_lock);
    if (rc != 0 && rc != -EINPROGRESS && !lk.data_failing) {
        lk.data_failing = true;
        LOG_ERROR("dyno: sending metric data to the daemon failed: %s; keeping undelivered data for when it is "
                  "back (further failures not logged)", errno_name(-rc));
    } else if (rc == 0 && lk.data_failing && st.entries == 0) {
        lk.data_failing = false;
        LOG_INFO("dyno: sending metric data to the daemon works again (%llu kept datagrams delivered so far)",
                 (unsigned long long)st.flushed);
    }
    if (fresh && !lk.data_dropping) {
        lk.data_dropping = true;
        LOG_RL(&lk.data_drop_rl, 10000, LOG_LVL_WARNING,
               "dyno: the undelivered metric data backlog is full; dropping the oldest datagrams (counted as "
               "dropped_offline)");
    } else if (lk.data_dropping && st.entries == 0) {
        lk.data_dropping = false;
        LOG_WARN("dyno: %llu metric datagrams dropped from the full backlog while the daemon was unreachable "
                 "(%llu in total)", (unsigned long long)(st.dropped - lk.data_dropped_logged),
                 (unsigned long long)st.dropped);
        lk.data_dropped_logged = st.dropped;
    }
    pthread_mutex_unlock(&link_client_lock);
}

/* Deliver `json` after everything kept before it (NULL: only the kept ones). Sends run on
 * the caller's thread (the session actor, or the poller) under no dyno lock. */
static int link_data_deliver(const char *json, size_t len)
{
    struct ipc_client *c = link_client();
    struct backlog *b = link_backlog();
    struct link_data_try t = { c, IPC_CLIENT_DATA_RETRIES, IPC_CLIENT_DATA_FIRST_SLEEP_NS,
                               clock_mono_ns() + DYNO_DATA_CALL_NS, false };
    int rc;

    if (!c)
        return -ENOTCONN;
    if (!b) { /* no memory for the backlog: the plain send, as before it existed */
        rc = ipc_client_send(c, IPC_CLIENT_DATA, IPC_TYPE_DATA, json, len, IPC_CLIENT_DATA_RETRIES,
                             IPC_CLIENT_DATA_FIRST_SLEEP_NS, IPC_CLIENT_QUIET);
        return rc;
    }
    rc = backlog_send(b, json, len, link_data_send_one, &t);
    if (rc != -EBUSY)
        link_data_account(b, rc);
    return rc == -EINPROGRESS ? 0 : rc; /* kept behind a queue that is going out */
}

int dynolog_send_data(void *ctx, const char *json, size_t len)
{
    (void)ctx;
    return link_data_deliver(json, len);
}

int dynolog_send_once(const char *json, size_t len)
{
    struct ipc_client *c = link_client();

    if (!c)
        return -ENOTCONN;
    return ipc_client_send(c, IPC_CLIENT_DATA, IPC_TYPE_DATA, json, len, 0, 0, IPC_CLIENT_QUIET);
}

int dynolog_flush_data(void)
{
    struct backlog_stats st;
    struct backlog *b;

    pthread_mutex_lock(&link_client_lock);
    b = lk.backlog;
    pthread_mutex_unlock(&link_client_lock);
    if (!b)
        return 0;
    backlog_get_stats(b, &st);
    if (st.entries == 0)
        return 0;
    return link_data_deliver(NULL, 0);
}

void dynolog_data_backlog(struct dynolog_data_stats *ret)
{
    struct backlog_stats st = { 0 };
    struct backlog *b;

    pthread_mutex_lock(&link_client_lock);
    b = lk.backlog;
    pthread_mutex_unlock(&link_client_lock);
    if (b)
        backlog_get_stats(b, &st);
    ret->entries = st.entries;
    ret->bytes = st.bytes;
    ret->dropped = st.dropped;
    ret->flushed = st.flushed;
}

bool dynolog_reachable(void)
{
    bool ok;

    pthread_mutex_lock(&link_lock);
    ok = lk.client && !lk.ctrl_failed;
    pthread_mutex_unlock(&link_lock);
    return ok;
}

unsigned dynolog_registrations(void)
{
    unsigned n;

    pthread_mutex_lock(&link_lock);
    n = lk.registrations;
    pthread_mutex_unlock(&link_lock);
    return n;
}

void dynolog_reset(void)
{
    pthread_mutex_lock(&link_lock);
    pthread_mutex_lock(&link_client_lock);
    ipc_client_destroy(lk.client);
    free(lk.pending);
    backlog_destroy(lk.backlog);
    lk = (struct link_state)LINK_STATE_INIT;
    pthread_mutex_unlock(&link_client_lock);
    pthread_mutex_unlock(&link_lock);
}

int dynolog_send_status(int32_t status, int32_t current_step, int32_t start_step, int32_t stop_step)
{
    int rc, rc2;

    rc = dynolog_send_trace_status(status, current_step, start_step, stop_step);
    if (status == IPC_STATUS_UNINITIALIZED) {
        rc2 = dynolog_send_monitor_status(IPC_STATUS_UNINITIALIZED);
        if (rc == 0)
            rc = rc2;
    }
    return rc;
}
