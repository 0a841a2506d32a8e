/* steps: per-(job, rank) rings of step summaries (see steps.h). Every field of a summary is
 * checked before anything is stored; a message is taken whole or not at all. */
#include "daemon/ipc/steps.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "contract/cjx.h"

#define ROWS_PER_MSG_MAX 256 /* a datagram holds ~30; more is not a summary */

struct win {
    struct steps_rank r; /* rows used as a ring: oldest at head */
    size_t head;
};

struct steps_store {
    pthread_mutex_t mu;
    struct win **w;
    size_t n;
    uint64_t refused, evicted;
    struct log_ratelimit rl;
};

int steps_create(struct steps_store **ret)
{
    struct steps_store *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->w = calloc(STEPS_MAX_RANKS, sizeof(*s->w));
    if (!s->w) {
        free(s);
        return -ENOMEM;
    }
    pthread_mutex_init(&s->mu, NULL);
    *ret = s;
    return 0;
}

void steps_destroy(struct steps_store *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        free(s->w[i]);
    free(s->w);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static int get_u64(const cJSON *o, const char *key, uint64_t *ret)
{
    int64_t i = 0;
    uint64_t u = 0;
    enum cjx_num k = cjx_number(cjx_get(o, key), &i, &u, NULL);
    if (k == CJX_INT && i >= 0)
        *ret = (uint64_t)i;
    else if (k == CJX_UINT)
        *ret = u;
    else
        return -EINVAL;
    return 0;
}

/* Parse one row; -EINVAL names nothing (the caller logs the message). */
static int parse_row(const cJSON *o, struct datamsg_step *r)
{
    if (!cJSON_IsObject(o) || cjx_to_i64(cjx_get(o, "step"), INT64_MIN, INT64_MAX, &r->step) != 0 ||
        get_u64(o, "start", &r->start_ns) || get_u64(o, "wall", &r->wall_ns) ||
        get_u64(o, "compute", &r->compute_ns) || get_u64(o, "comm", &r->comm_ns) ||
        get_u64(o, "memcpy", &r->memcpy_ns) || get_u64(o, "host", &r->host_ns))
        return -EINVAL;
    /* the split came later: a summary without it is all transfer */
    r->wait_ns = 0;
    r->transfer_ns = r->comm_ns;
    if ((cjx_get(o, "wait") && get_u64(o, "wait", &r->wait_ns)) ||
        (cjx_get(o, "transfer") && get_u64(o, "transfer", &r->transfer_ns)) ||
        r->wait_ns > r->comm_ns || r->transfer_ns > r->comm_ns)
        return -EINVAL;
    return 0;
}

/* mu held: the window of (job, rank) (or pid when rank < 0), created if needed. */
static struct win *find(struct steps_store *s, int64_t job, int32_t rank, int32_t pid, uint64_t mono_ns)
{
    size_t stalest = 0;
    for (size_t i = 0; i < s->n; i++) {
        struct steps_rank *r = &s->w[i]->r;
        if (r->job == job && r->rank == rank && (rank >= 0 || r->pid == pid))
            return s->w[i];
        if (r->updated_ns < s->w[stalest]->r.updated_ns)
            stalest = i;
    }
    struct win *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    if (s->n == STEPS_MAX_RANKS) {
        free(s->w[stalest]);
        s->w[stalest] = w;
        s->evicted++;
    } else {
        s->w[s->n++] = w;
    }
    w->r.job = job;
    w->r.rank = rank;
    w->r.pid = pid;
    w->r.updated_ns = mono_ns;
    return w;
}

static struct datamsg_step *row_at(struct win *w, size_t i)
{
    return &w->r.rows[(w->head + i) % STEPS_WINDOW];
}

/* mu held. Returns true when the row is new (not a repeat of a step already held). */
static bool put_row(struct win *w, const struct datamsg_step *row)
{
    if (w->r.n > 0) {
        const struct datamsg_step *last = row_at(w, w->r.n - 1);
        if (row->step <= last->step) {
            /* a repeat (or out of order): replace the same step if held, else drop */
            for (size_t i = 0; i < w->r.n; i++) {
                struct datamsg_step *x = row_at(w, i);
                if (x->step == row->step) {
                    *x = *row;
                    return false;
                }
            }
            return false;
        }
    }
    if (w->r.n < STEPS_WINDOW) {
        *row_at(w, w->r.n) = *row;
        w->r.n++;
    } else {
        w->r.rows[w->head] = *row;
        w->head = (w->head + 1) % STEPS_WINDOW;
    }
    return true;
}

/* The per-rank step series: a record without "kind" whose numeric keys are the family names
 * (docs/cluster.md §2), so a Prometheus-style sink exports each key as one family with the
 * record's job/pid/rank labels; values in ns like the other duration families. */
static void emit(const struct sink *out, const struct datamsg_step *r, const struct steps_rank *who, uint64_t wall_ns)
{
    struct sink_kv kv[9];
    size_t n = 0;
#define U(k, v) kv[n++] = (struct sink_kv){ .key = k, .type = SINK_UINT, .u = (v) }
    kv[n++] = (struct sink_kv){ .key = "msmonitor_step", .type = SINK_INT, .i = r->step };
    U("msmonitor_step_comm_ns", r->comm_ns);
    U("msmonitor_step_compute_ns", r->compute_ns);
    U("msmonitor_step_host_ns", r->host_ns);
    U("msmonitor_step_memcpy_ns", r->memcpy_ns);
    U("msmonitor_step_transfer_ns", r->transfer_ns);
    U("msmonitor_step_wait_ns", r->wait_ns);
    U("msmonitor_step_wall_ns", r->wall_ns);
    U("timestamp", r->start_ns);
#undef U
    struct sink_record rec = { wall_ns, "host", kv, n, who->pid, who->rank < 0 ? SINK_NO_RANK : who->rank,
                               who->job, who->pod[0] ? who->pod : NULL,
                               who->pod_namespace[0] ? who->pod_namespace : NULL,
                               who->container[0] ? who->container : NULL };
    (void)out->ops->write(out->self, &rec);
}

int steps_take(struct steps_store *s, const struct sink *out, const cJSON *msg, uint64_t wall_ns,
               uint64_t mono_ns, const struct steps_who *who)
{
    const cJSON *rows = cjx_get(msg, "steps"), *src = cjx_get(msg, "src");
    struct datamsg_step parsed[ROWS_PER_MSG_MAX];
    int64_t pid = 0, rank = -1, job = 0;
    uint64_t dropped = 0;
    size_t n = 0;
    int stored = 0;

    if (cjx_to_i64(cjx_get(msg, "pid"), 1, INT32_MAX, &pid) != 0 ||
        cjx_to_i64(cjx_get(msg, "rank"), -1, INT32_MAX, &rank) != 0 || !cJSON_IsArray(rows) ||
        (cjx_get(msg, "job") && cjx_to_i64(cjx_get(msg, "job"), INT64_MIN, INT64_MAX, &job) != 0) ||
        (cjx_get(msg, "dropped") && get_u64(msg, "dropped", &dropped) != 0) ||
        (src && (!cJSON_IsString(src) || (strcmp(src->valuestring, "step") && strcmp(src->valuestring, "interval")))))
        goto bad;
    for (const cJSON *c = rows->child; c; c = c->next) {
        if (n == ROWS_PER_MSG_MAX || parse_row(c, &parsed[n]) != 0)
            goto bad;
        n++;
    }
    if (who && who->pid > 0)
        pid = who->pid; /* the node's number of the sender, not its container's */
    pthread_mutex_lock(&s->mu);
    struct win *w = find(s, job, (int32_t)rank, (int32_t)pid, mono_ns);
    if (!w) {
        pthread_mutex_unlock(&s->mu);
        return -ENOMEM;
    }
    if (w->r.pid != (int32_t)pid) { /* the rank restarted as a new process: a fresh window */
        w->r.pid = (int32_t)pid;
        w->r.n = 0;
        w->head = 0;
    }
    snprintf(w->r.src, sizeof(w->r.src), "%s", src ? src->valuestring : "step");
    snprintf(w->r.pod, sizeof(w->r.pod), "%s", who && who->pod ? who->pod : "");
    snprintf(w->r.pod_namespace, sizeof(w->r.pod_namespace), "%s", who && who->pod_namespace ? who->pod_namespace : "");
    snprintf(w->r.container, sizeof(w->r.container), "%s", who && who->container ? who->container : "");
    w->r.updated_ns = mono_ns;
    w->r.plugin_dropped = dropped;
    for (size_t i = 0; i < n; i++) {
        if (put_row(w, &parsed[i])) {
            stored++;
            if (out)
                emit(out, &parsed[i], &w->r, wall_ns);
        }
    }
    pthread_mutex_unlock(&s->mu);
    return stored;
bad:
    pthread_mutex_lock(&s->mu);
    s->refused++;
    pthread_mutex_unlock(&s->mu);
    LOG_RL(&s->rl, 1000, LOG_LVL_ERROR, "steps: refused a StepSummary message (pid, rank or steps invalid)");
    return -EINVAL;
}

static int rank_cmp(const void *x, const void *y)
{
    const struct steps_rank *a = x, *b = y;
    if (a->job != b->job)
        return a->job < b->job ? -1 : 1;
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    return a->pid < b->pid ? -1 : a->pid > b->pid;
}

int steps_snapshot(struct steps_store *s, struct steps_rank **ret, size_t *ret_n)
{
    struct steps_rank *out;

    pthread_mutex_lock(&s->mu);
    out = malloc((s->n ? s->n : 1) * sizeof(*out));
    if (!out) {
        pthread_mutex_unlock(&s->mu);
        return -ENOMEM;
    }
    for (size_t i = 0; i < s->n; i++) {
        struct win *w = s->w[i];
        out[i] = w->r;
        for (size_t k = 0; k < w->r.n; k++)
            out[i].rows[k] = *row_at(w, k);
    }
    *ret_n = s->n;
    pthread_mutex_unlock(&s->mu);
    qsort(out, *ret_n, sizeof(*out), rank_cmp);
    *ret = out;
    return 0;
}

void steps_counters(struct steps_store *s, size_t *ret_ranks, uint64_t *ret_refused, uint64_t *ret_evicted)
{
    pthread_mutex_lock(&s->mu);
    *ret_ranks = s->n;
    *ret_refused = s->refused;
    *ret_evicted = s->evicted;
    pthread_mutex_unlock(&s->mu);
}
