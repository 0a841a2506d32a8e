/* status: last-reporter records plus a small per-process table (linear scans: at most 1024
 * entries, updated a few times per second per rank). */
#include "daemon/ipc/status.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct status_table {
    pthread_mutex_t mu;
    struct status_last last;
    struct status_entry *e;
    size_t n;
    struct status_daemon daemon;
};

static void init_record(struct ipc_status *s)
{
    memset(s, 0, sizeof(*s));
    s->status = -1;
    s->current_step = -1;
    s->start_step = -1;
    s->stop_step = -1;
}

int status_create(struct status_table **ret)
{
    struct status_table *st = calloc(1, sizeof(*st));
    if (!st)
        return -ENOMEM;
    st->e = calloc(STATUS_MAX_ENTRIES, sizeof(*st->e));
    if (!st->e) {
        free(st);
        return -ENOMEM;
    }
    init_record(&st->last.trace);
    init_record(&st->last.monitor);
    pthread_mutex_init(&st->mu, NULL);
    *ret = st;
    return 0;
}

void status_destroy(struct status_table *st)
{
    if (!st)
        return;
    pthread_mutex_destroy(&st->mu);
    free(st->e);
    free(st);
}

void status_update(struct status_table *st, enum status_dim dim, const struct ipc_status *s,
                   uint64_t now_ns)
{
    status_update_ns(st, dim, s, s->pid, now_ns);
}

void status_update_ns(struct status_table *st, enum status_dim dim, const struct ipc_status *s, int32_t ns_pid,
                      uint64_t now_ns)
{
    pthread_mutex_lock(&st->mu);
    st->last.any_received = true;
    if (dim == STATUS_TRACE)
        st->last.trace = *s;
    else
        st->last.monitor = *s;
    size_t i;
    for (i = 0; i < st->n; i++)
        if (st->e[i].pid == s->pid && st->e[i].job == s->job_id)
            break;
    if (i == st->n) {
        /* an unknown pid reporting -1 would be removed at once (both -1): do not evict a
         * live entry for it */
        if (s->status == -1) {
            pthread_mutex_unlock(&st->mu);
            return;
        }
        if (st->n == STATUS_MAX_ENTRIES) {
            /* evict the least recently updated entry */
            size_t old = 0;
            for (size_t k = 1; k < st->n; k++)
                if (st->e[k].updated_ns < st->e[old].updated_ns)
                    old = k;
            st->e[old] = st->e[--st->n];
            i = st->n;
        }
        st->e[i] = (struct status_entry){ .job = s->job_id, .pid = s->pid, .ns_pid = ns_pid, .trace = -1,
                                          .monitor = -1, .current_step = -1, .start_step = -1,
                                          .stop_step = -1 };
        st->n++;
    }
    struct status_entry *e = &st->e[i];
    e->ns_pid = ns_pid;
    if (dim == STATUS_TRACE) {
        e->trace = s->status;
        e->current_step = s->current_step;
        e->start_step = s->start_step;
        e->stop_step = s->stop_step;
    } else {
        e->monitor = s->status;
    }
    e->updated_ns = now_ns;
    if (e->trace == -1 && e->monitor == -1)
        st->e[i] = st->e[--st->n];   /* the poller's exit report */
    pthread_mutex_unlock(&st->mu);
}

void status_fold_stats(struct status_entry *e, const struct status_stats *s)
{
    if (e->has_stats && s->consumed >= e->stats.consumed && s->kept >= e->stats.kept) {
#define STATUS_DELTA(f, ...) e->interval.f = s->f >= e->stats.f ? s->f - e->stats.f : 0;
        STATUS_STATS_FIELDS(STATUS_DELTA)
#undef STATUS_DELTA
    } else {
        e->interval = *s; /* the first report of a session covers its first interval */
        e->quiet_intervals = 0;
    }
    e->has_interval = true;
    if (e->interval.consumed == 0)
        e->quiet_intervals++;
    else
        e->quiet_intervals = 0;
    e->stats = *s;
    e->has_stats = true;
}

int status_set_stats(struct status_table *st, int32_t pid, const struct status_stats *s)
{
    int rc = -ENOENT;

    pthread_mutex_lock(&st->mu);
    for (size_t i = 0; i < st->n; i++) {
        if (st->e[i].pid != pid)
            continue;
        status_fold_stats(&st->e[i], s);
        rc = 0;
    }
    pthread_mutex_unlock(&st->mu);
    return rc;
}

int status_set_health(struct status_table *st, int32_t pid, bool vouched, const struct status_health *h,
                      uint64_t now_ns)
{
    return status_set_health_ns(st, pid, pid, vouched, h, now_ns);
}

int status_set_health_ns(struct status_table *st, int32_t pid, int32_t ns_pid, bool vouched,
                         const struct status_health *h, uint64_t now_ns)
{
    int rc = -ENOENT;

    pthread_mutex_lock(&st->mu);
    for (size_t i = 0; i < st->n; i++) {
        if (st->e[i].pid != pid)
            continue;
        st->e[i].health = *h;
        st->e[i].ns_pid = ns_pid;
        st->e[i].health.received_ns = now_ns;
        st->e[i].has_health = true;
        st->e[i].updated_ns = now_ns;
        rc = 0;
    }
    if (rc == 0 || !vouched || pid <= 0)
        goto out;
    if (st->n == STATUS_MAX_ENTRIES) {
        /* a full table keeps the processes that report status: health alone does not evict */
        rc = -ENOSPC;
        goto out;
    }
    st->e[st->n] = (struct status_entry){ .job = 0, .pid = pid, .ns_pid = ns_pid, .trace = -1, .monitor = -1, .current_step = -1,
                                          .start_step = -1, .stop_step = -1, .updated_ns = now_ns,
                                          .has_health = true, .health = *h };
    st->e[st->n].health.received_ns = now_ns;
    st->n++;
    rc = 0;
out:
    pthread_mutex_unlock(&st->mu);
    return rc;
}

int status_job_of(struct status_table *st, int32_t pid, int64_t *ret_job)
{
    int rc = -ENOENT;
    uint64_t newest = 0;

    pthread_mutex_lock(&st->mu);
    for (size_t i = 0; i < st->n; i++) {
        if (st->e[i].pid == pid && (rc != 0 || st->e[i].updated_ns > newest)) {
            *ret_job = st->e[i].job;
            newest = st->e[i].updated_ns;
            rc = 0;
        }
    }
    pthread_mutex_unlock(&st->mu);
    return rc;
}

void status_get_last(struct status_table *st, struct status_last *ret)
{
    pthread_mutex_lock(&st->mu);
    *ret = st->last;
    pthread_mutex_unlock(&st->mu);
}

static int entry_cmp(const void *a, const void *b)
{
    const struct status_entry *x = a, *y = b;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    if (x->job != y->job)
        return x->job < y->job ? -1 : 1;
    return 0;
}

int status_list(struct status_table *st, struct status_entry **ret, size_t *ret_n)
{
    int rc = 0;
    pthread_mutex_lock(&st->mu);
    *ret = malloc((st->n + 1) * sizeof(**ret));
    *ret_n = 0;
    if (!*ret) {
        rc = -ENOMEM;
        goto out_unlock;
    }
    memcpy(*ret, st->e, st->n * sizeof(**ret));
    *ret_n = st->n;
out_unlock:
    pthread_mutex_unlock(&st->mu);
    if (rc == 0)
        qsort(*ret, *ret_n, sizeof(**ret), entry_cmp);
    return rc;
}

int status_gc(struct status_table *st, uint64_t now_ns, uint64_t age_ns)
{
    int removed = 0;
    pthread_mutex_lock(&st->mu);
    for (size_t i = 0; i < st->n;) {
        struct status_entry *e = &st->e[i];
        if (now_ns > e->updated_ns && now_ns - e->updated_ns > age_ns && e->pid > 0 &&
            kill(e->pid, 0) != 0 && errno == ESRCH) {
            st->e[i] = st->e[--st->n];
            removed++;
            continue;
        }
        i++;
    }
    pthread_mutex_unlock(&st->mu);
    return removed;
}

void status_set_daemon(struct status_table *st, uint64_t start_mono_ns, const char *loggers)
{
    pthread_mutex_lock(&st->mu);
    st->daemon.start_mono_ns = start_mono_ns;
    snprintf(st->daemon.loggers, sizeof(st->daemon.loggers), "%s", loggers ? loggers : "");
    pthread_mutex_unlock(&st->mu);
}

void status_count_drop(struct status_table *st, enum status_drop why, uint32_t uid)
{
    if ((int)why < 0 || why >= STATUS_DROP_KINDS)
        return;
    pthread_mutex_lock(&st->mu);
    st->daemon.drops[why]++;
    if (why == STATUS_DROP_UID)
        st->daemon.drop_uid = uid;
    pthread_mutex_unlock(&st->mu);
}

void status_set_namespaces(struct status_table *st, uint64_t pid_ns, uint64_t net_ns)
{
    pthread_mutex_lock(&st->mu);
    st->daemon.pid_ns = pid_ns;
    st->daemon.net_ns = net_ns;
    pthread_mutex_unlock(&st->mu);
}

void status_set_ipc_uids(struct status_table *st, const uint32_t *uids, size_t n)
{
    pthread_mutex_lock(&st->mu);
    st->daemon.nuids = n < STATUS_UIDS_MAX ? n : STATUS_UIDS_MAX;
    memcpy(st->daemon.uids, uids, st->daemon.nuids * sizeof(*uids));
    pthread_mutex_unlock(&st->mu);
}

void status_get_daemon(struct status_table *st, struct status_daemon *ret)
{
    pthread_mutex_lock(&st->mu);
    *ret = st->daemon;
    pthread_mutex_unlock(&st->mu);
}
