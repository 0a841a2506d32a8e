/* registry: a sorted array of processes keyed by (job, sorted pid set). Sorting gives the
 * upstream std::map<std::set<int>> iteration order for free and O(log n) lookup on the poll
 * hot path; inserts memmove at most 4096 pointers. */
#include "daemon/ipc/registry.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

struct reg_proc {
    int64_t job;
    int nset;
    int32_t set[REGISTRY_MAX_PIDS];    /* sorted, unique: the key */
    int npids;
    int32_t pids[REGISTRY_MAX_PIDS];   /* as received, leaf first (the process's own namespace) */
    int32_t node;                      /* the leaf as the node numbers it (the key's tie-break) */
    int nnode;
    int32_t node_set[REGISTRY_MAX_PIDS]; /* leaf and ancestors as the node numbers them, sorted */
    uint64_t pidns;                    /* the leaf's pid namespace (0 unknown) */
    enum reg_origin origin;
    char *pending;                     /* wrapped config, NULL = empty mailbox */
    size_t pending_len;
    uint64_t last_ns;
    uid_t uid;                         /* who registered it (quota) */
    char backend[REG_BACKEND_CAP];     /* PluginInfo: "" until reported */
    char library[REG_LIBRARY_CAP];     /* PluginInfo: "" = not found (when backend is set) */
    bool acks;                         /* PluginInfo: it acknowledges configs */
    uint64_t pending_id;               /* id of `pending` */
    struct reg_cfg_entry hist[REG_CFG_HISTORY];   /* ring of recent deliveries */
    unsigned nhist;                    /* deliveries so far; newest at (nhist - 1) % CAP */
};

struct reg_ctxt {
    int64_t job;
    int32_t npu;
    int32_t pid;
};

struct registry {
    pthread_mutex_t mu;
    char hostname[256];
    struct reg_proc **procs;           /* sorted by proc_cmp, REGISTRY_MAX_PROCS slots */
    size_t nprocs;
    struct reg_ctxt ctxt[REGISTRY_MAX_CTXT];
    int nctxt;
    struct log_ratelimit rl_full;      /* "registry full" is logged once a second at most */
    struct log_ratelimit rl_ctxt_full; /* so is "Max register count reached" */
    struct log_ratelimit rl_quota;     /* and a uid at its quota */
    struct log_ratelimit rl_dead;      /* and a registration of a dead pid */
    int uid_quota;                     /* <= 0: none */
    bool check_alive;
    uint64_t seq;                      /* deliveries so far: makes each config id unique */
};

void registry_set_policy(struct registry *r, int uid_quota, bool check_alive)
{
    pthread_mutex_lock(&r->mu);
    r->uid_quota = uid_quota;
    r->check_alive = check_alive;
    pthread_mutex_unlock(&r->mu);
}

/* EPERM means the process exists under another uid: alive. */
static bool pid_dead(int32_t pid)
{
    return pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* A sorted pid set contains pid (binary search). */
static bool set_has(const int32_t *set, int n, int32_t pid)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (set[mid] < pid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && set[lo] == pid;
}

static void proc_free(struct reg_proc *p)
{
    free(p->pending);
    free(p);
}

/* Drop every process whose leaf is dead, and the ctxt registrations of dead pids; called
 * under the lock when room is needed. Returns the number of processes dropped. */
static size_t purge_dead(struct registry *r)
{
    size_t w = 0, n0 = r->nprocs;
    for (size_t i = 0; i < r->nprocs; i++) {
        if (pid_dead(r->procs[i]->node)) {
            LOG_INFO("Stopped tracking process (%d) from job %lld: the process is gone",
                     r->procs[i]->node, (long long)r->procs[i]->job);
            proc_free(r->procs[i]);
            continue;
        }
        r->procs[w++] = r->procs[i];
    }
    r->nprocs = w;
    for (int c = 0; c < r->nctxt;) {
        if (pid_dead(r->ctxt[c].pid))
            r->ctxt[c] = r->ctxt[--r->nctxt];
        else
            c++;
    }
    return n0 - w;
}

static int uid_count(const struct registry *r, uid_t uid)
{
    int n = 0;
    for (size_t i = 0; i < r->nprocs; i++)
        n += r->procs[i]->uid == uid;
    return n;
}

int registry_create(const char *hostname, struct registry **ret)
{
    struct registry *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->procs = calloc(REGISTRY_MAX_PROCS, sizeof(*r->procs));
    if (!r->procs) {
        free(r);
        return -ENOMEM;
    }
    snprintf(r->hostname, sizeof(r->hostname), "%s", hostname ? hostname : "");
    pthread_mutex_init(&r->mu, NULL);
    *ret = r;
    return 0;
}

void registry_destroy(struct registry *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->nprocs; i++) {
        free(r->procs[i]->pending);
        free(r->procs[i]);
    }
    free(r->procs);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

uint64_t registry_fnv1a64(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

uint64_t registry_config_id(const char *hostname, int32_t leaf, int64_t secs, uint64_t seq)
{
    char key[360];
    int kn = snprintf(key, sizeof(key), "%s:%d:%lld:%llu", hostname, leaf, (long long)secs,
                      (unsigned long long)seq);
    if (kn < 0 || (size_t)kn >= sizeof(key))
        kn = (int)strlen(key);
    uint64_t id = registry_fnv1a64(key, (size_t)kn);
    return id ? id : 1;   /* 0 means "no id" in the outcome table */
}

char *registry_wrap_config(uint64_t id, const char *cfg, size_t cfg_len, size_t *ret_len)
{
    static const char pad[] = "            "; /* 12 spaces */
    size_t cap = cfg_len + 2 * 12 + 64;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    size_t o = 0;
    out[o++] = '\n';
    memcpy(out + o, pad, 12);
    o += 12;
    memcpy(out + o, cfg, cfg_len);
    o += cfg_len;
    out[o++] = '\n';
    memcpy(out + o, pad, 12);
    o += 12;
    int n = snprintf(out + o, cap - o, "REQUEST_TRACE_ID=%llu", (unsigned long long)id);
    o += (size_t)n;
    *ret_len = o;
    return out;
}

const char *registry_outcome_name(enum reg_outcome o)
{
    switch (o) {
    case REG_OUT_NONE: return "none";
    case REG_OUT_PENDING: return "pending";
    case REG_OUT_DELIVERED: return "delivered";
    case REG_OUT_UNACKED: return "delivered (unacknowledged)";
    case REG_OUT_APPLIED: return "applied";
    case REG_OUT_REJECTED: return "rejected";
    case REG_OUT_SUPERSEDED: return "superseded";
    }
    return "none";
}

bool registry_outcome_final(enum reg_outcome o)
{
    return o == REG_OUT_UNACKED || o == REG_OUT_APPLIED || o == REG_OUT_REJECTED ||
           o == REG_OUT_SUPERSEDED;
}

static struct reg_cfg_entry *hist_find(struct reg_proc *p, uint64_t id)
{
    unsigned n = p->nhist < REG_CFG_HISTORY ? p->nhist : REG_CFG_HISTORY;
    for (unsigned i = 0; i < n; i++)
        if (p->hist[i].id == id)
            return &p->hist[i];
    return NULL;
}

static struct reg_cfg_entry *hist_push(struct reg_proc *p)
{
    struct reg_cfg_entry *e = &p->hist[p->nhist++ % REG_CFG_HISTORY];
    memset(e, 0, sizeof(*e));
    e->rank = -1;
    return e;
}

/* Key order: job, then the sorted sets lexicographically (a proper prefix first). */
static int key_cmp(int64_t job, const int32_t *set, int nset, int32_t node, const struct reg_proc *p)
{
    if (job != p->job)
        return job < p->job ? -1 : 1;
    int m = nset < p->nset ? nset : p->nset;
    for (int i = 0; i < m; i++)
        if (set[i] != p->set[i])
            return set[i] < p->set[i] ? -1 : 1;
    if (nset != p->nset)
        return nset < p->nset ? -1 : 1;
    /* equal sets in two containers (both creators are pid 4 in their namespaces) stay two
     * processes: the node pid tells them apart */
    return node < p->node ? -1 : node > p->node;
}

/* Index of the first process not less than the key; *found when equal. */
static size_t find(const struct registry *r, int64_t job, const int32_t *set, int nset, int32_t node, bool *found)
{
    size_t lo = 0, hi = r->nprocs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (key_cmp(job, set, nset, node, r->procs[mid]) > 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < r->nprocs && key_cmp(job, set, nset, node, r->procs[lo]) == 0;
    return lo;
}

static int make_set(const int32_t *pids, int n, int32_t *set)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        int j = k;
        while (j > 0 && set[j - 1] > pids[i])
            j--;
        if (j > 0 && set[j - 1] == pids[i])
            continue;
        memmove(set + j + 1, set + j, (size_t)(k - j) * sizeof(*set));
        set[j] = pids[i];
        k++;
    }
    return k;
}

static void join_pids(const int32_t *pids, int n, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; i < n && o < cap; i++) {
        int w = snprintf(out + o, cap - o, i ? ", %d" : "%d", pids[i]);
        if (w < 0)
            break;
        o += (size_t)w;
    }
}

int registry_poll(struct registry *r, int64_t job, const int32_t *pids, int n, int32_t type,
                  enum reg_origin origin, uint64_t now_ns, char **ret_cfg, size_t *ret_len)
{
    return registry_poll_uid(r, geteuid(), job, pids, n, type, origin, now_ns, ret_cfg, ret_len);
}

int registry_poll_uid(struct registry *r, uid_t uid, int64_t job, const int32_t *pids, int n,
                      int32_t type, enum reg_origin origin, uint64_t now_ns, char **ret_cfg,
                      size_t *ret_len)
{
    return registry_poll_who(r, uid, NULL, job, pids, n, type, origin, now_ns, ret_cfg, ret_len);
}

int registry_poll_who(struct registry *r, uid_t uid, const struct reg_who *who, int64_t job,
                      const int32_t *pids, int n, int32_t type, enum reg_origin origin, uint64_t now_ns,
                      char **ret_cfg, size_t *ret_len)
{
    int32_t set[REGISTRY_MAX_PIDS];
    char txt[REGISTRY_MAX_PIDS * 13];
    int rc = 0;
    bool found;
    *ret_cfg = NULL;
    *ret_len = 0;
    if (n <= 0)
        return -EINVAL;
    if (n > REGISTRY_MAX_PIDS)
        n = REGISTRY_MAX_PIDS;
    int nset = make_set(pids, n, set);
    /* the node's numbers: the kernel's word (ipc_server), or the received ones when the
     * sender shares our namespace or no credentials were checked */
    int32_t node = who && who->node > 0 ? who->node : pids[0];
    pthread_mutex_lock(&r->mu);
    size_t at = find(r, job, set, nset, node, &found);
    struct reg_proc *p;
    if (found) {
        p = r->procs[at];
    } else {
        join_pids(pids, n, txt, sizeof(txt));
        if (r->check_alive && pid_dead(node)) {
            LOG_RL(&r->rl_dead, 1000, LOG_LVL_WARNING,
                   "not registering process (%s) for job %lld: pid %d is not running", txt,
                   (long long)job, node);
            rc = -ESRCH;
            goto out_unlock;
        }
        bool at_quota = r->uid_quota > 0 && uid_count(r, uid) >= r->uid_quota;
        if (r->check_alive && (r->nprocs >= REGISTRY_MAX_PROCS || at_quota) && purge_dead(r) > 0) {
            at = find(r, job, set, nset, node, &found);   /* the array moved */
            at_quota = r->uid_quota > 0 && uid_count(r, uid) >= r->uid_quota;
        }
        if (at_quota) {
            LOG_RL(&r->rl_quota, 1000, LOG_LVL_WARNING,
                   "uid %u holds its quota of %d registry entries, not registering process (%s) for job %lld",
                   (unsigned)uid, r->uid_quota, txt, (long long)job);
            rc = -EDQUOT;
            goto out_unlock;
        }
        if (r->nprocs >= REGISTRY_MAX_PROCS) {
            /* every poll of every unregistered process lands here: once a second at most */
            LOG_RL(&r->rl_full, 1000, LOG_LVL_ERROR,
                   "Process registry full (%d processes), not registering process (%s) for job %lld",
                   REGISTRY_MAX_PROCS, txt, (long long)job);
            rc = -ENOSPC;
            goto out_unlock;
        }
        p = calloc(1, sizeof(*p));
        if (!p) {
            rc = -ENOMEM;
            goto out_unlock;
        }
        p->job = job;
        p->nset = nset;
        memcpy(p->set, set, (size_t)nset * sizeof(*set));
        p->npids = n;
        memcpy(p->pids, pids, (size_t)n * sizeof(*pids));
        p->node = node;
        int32_t lin[REGISTRY_MAX_PIDS];
        size_t nl = who && who->node > 0 && who->lineage ? who->lineage(who->arg, node, lin, (size_t)n) : 0;
        if (nl > 0)
            p->nnode = make_set(lin, (int)nl, p->node_set);
        else
            p->nnode = make_set(set, nset, p->node_set);
        p->pidns = who ? who->pidns : 0;
        p->origin = origin;
        p->uid = uid;
        memmove(r->procs + at + 1, r->procs + at, (r->nprocs - at) * sizeof(*r->procs));
        r->procs[at] = p;
        r->nprocs++;
        if (node != pids[0])
            LOG_INFO("Registered process (%s) for job %lld. (pid %d on the node)", txt, (long long)job, node);
        else
            LOG_INFO("Registered process (%s) for job %lld.", txt, (long long)job);
    }
    if ((type & 2) && p->pending) {
        /* one-shot mailbox: hand the text over with its trailing newline */
        char *cfg = realloc(p->pending, p->pending_len + 2);
        if (!cfg) {
            rc = -ENOMEM;
            goto out_unlock;
        }
        cfg[p->pending_len] = '\n';
        cfg[p->pending_len + 1] = '\0';
        *ret_cfg = cfg;
        *ret_len = p->pending_len + 1;
        p->pending = NULL;
        p->pending_len = 0;
        struct reg_cfg_entry *e = hist_find(p, p->pending_id);
        if (e && e->outcome == REG_OUT_PENDING)
            e->outcome = p->acks ? REG_OUT_DELIVERED : REG_OUT_UNACKED;
        p->pending_id = 0;
        join_pids(p->pids, p->npids, txt, sizeof(txt));
        LOG_INFO("Returning activity profiler config for process (%s) in job %lld", txt, (long long)job);
    }
    p->last_ns = now_ns;
    LOG_DEBUG("req from %d (job %lld, type %d)", pids[0], (long long)job, type);
out_unlock:
    pthread_mutex_unlock(&r->mu);
    return rc;
}

int registry_ctxt(struct registry *r, int64_t job, int32_t npu, int32_t pid)
{
    int rc = 0, count = 0;
    bool exists = false, known = false;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->nctxt; i++) {
        if (r->ctxt[i].job == job && r->ctxt[i].pid == pid) {
            known = true;
            if (r->ctxt[i].npu == npu)
                exists = true;
        }
    }
    if (!exists) {
        if (r->nctxt >= REGISTRY_MAX_CTXT && r->check_alive)
            purge_dead(r);
        if (r->nctxt >= REGISTRY_MAX_CTXT) {
            /* a refused client retrying in a loop would write this on every datagram */
            LOG_RL(&r->rl_ctxt_full, 1000, LOG_LVL_ERROR,
                   "Max register count reached, can not register more libkineto contexts.");
            rc = -ENOSPC;
            goto out_unlock;
        }
        r->ctxt[r->nctxt++] = (struct reg_ctxt){ job, npu, pid };
    }
    for (int i = 0; i < r->nctxt; i++)
        if (r->ctxt[i].job == job && r->ctxt[i].npu == npu)
            count++;
    rc = count;
    /* the registration line once per (pid, job): a process that re-sends ctxt in a loop would
     * otherwise write it on every datagram (593 k lines in 20 s in a registration flood) */
    if (known)
        LOG_DEBUG("Registered process (%d) for job %lld. (already registered)", pid, (long long)job);
    else
        LOG_INFO("Registered process (%d) for job %lld.", pid, (long long)job);
out_unlock:
    pthread_mutex_unlock(&r->mu);
    return rc;
}

void registry_mark_msmon(struct registry *r, int32_t pid)
{
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->nprocs; i++)
        if (r->procs[i]->node == pid)
            r->procs[i]->origin = REG_ORIGIN_MSMON;
    pthread_mutex_unlock(&r->mu);
}

int registry_set_library(struct registry *r, int32_t pid, const char *backend, const char *library)
{
    int rc = -ENOENT;

    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->nprocs; i++) {
        if (r->procs[i]->node != pid)
            continue;
        snprintf(r->procs[i]->backend, sizeof(r->procs[i]->backend), "%s", backend);
        snprintf(r->procs[i]->library, sizeof(r->procs[i]->library), "%s", library);
        rc = 0;
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

void reg_set_result_fini(struct reg_set_result *res)
{
    free(res->matched);
    free(res->triggered);
    memset(res, 0, sizeof(*res));
}

/* pids is sorted ascending (registry_set_config's contract): one binary search per pid of
 * the process keeps a request naming thousands of pids O(registry size). The pids are the node's
 * (registry_resolve_pids translated a container's own). */
static bool requested(const struct reg_proc *p, const int32_t *pids, size_t npids)
{
    for (int i = 0; i < p->nnode; i++) {
        size_t lo = 0, hi = npids;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (pids[mid] < p->node_set[i])
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < npids && pids[lo] == p->node_set[i])
            return true;
    }
    return false;
}

int registry_set_config(struct registry *r, int64_t job, const int32_t *pids, size_t npids,
                        const char *config, size_t config_len, int64_t limit,
                        reg_eligible_fn eligible, void *arg, const char *token,
                        struct reg_set_result *res)
{
    int rc = 0;
    bool trace_all = npids == 0 || (npids == 1 && pids[0] == 0);
    char txt[256];
    size_t o = 0, len = 0;
    int64_t secs = (int64_t)time(NULL);
    memset(res, 0, sizeof(*res));
    txt[0] = '\0';
    for (size_t i = 0; i < npids && o < sizeof(txt); i++) {
        int w = snprintf(txt + o, sizeof(txt) - o, i ? ", %d" : "%d", pids[i]);
        if (w < 0)
            break;
        o += (size_t)w;
    }
    LOG_INFO("Initiating on-demand GPU profiling for job ID %lld, pids [%s]", (long long)job, txt);
    pthread_mutex_lock(&r->mu);
    res->matched = malloc((r->nprocs + 1) * sizeof(int32_t));
    res->triggered = malloc((r->nprocs + 1) * sizeof(int32_t));
    if (!res->matched || !res->triggered) {
        rc = -ENOMEM;
        goto out_unlock;
    }
    for (size_t i = 0; i < r->nprocs; i++) {
        struct reg_proc *p = r->procs[i];
        if (p->job != job)
            continue;
        if (!trace_all && !requested(p, pids, npids))
            continue;
        /* a dead process neither matches nor takes a process_limit slot; GC forgets it */
        if (r->check_alive && pid_dead(p->node))
            continue;
        if (eligible && !eligible(p->origin, p->node, arg))
            continue;
        res->matched[res->n_matched++] = p->node;
        /* beyond the limit a process is matched but neither triggered nor replaced; it is
         * counted as skipped so the reply can say so */
        if ((int64_t)res->n_triggered >= limit) {
            res->n_skipped++;
            continue;
        }
        uint64_t id = registry_config_id(r->hostname, p->node, secs, ++r->seq);
        char *text = registry_wrap_config(id, config, config_len, &len);
        if (!text) {
            rc = -ENOMEM;
            goto out_unlock;
        }
        if (p->pending) {
            /* last wins: the process never saw the older config, so a stop right after a
             * start replaces it instead of being refused as busy (and lost) */
            struct reg_cfg_entry *old = hist_find(p, p->pending_id);
            if (old && old->outcome == REG_OUT_PENDING) {
                old->outcome = REG_OUT_SUPERSEDED;
                snprintf(old->reason, sizeof(old->reason),
                         "replaced by a newer command before the process polled");
            }
            free(p->pending);
            res->busy++;
        }
        p->pending = text;
        p->pending_len = len;
        p->pending_id = id;
        struct reg_cfg_entry *e = hist_push(p);
        e->id = id;
        e->pid = p->node;
        e->ns_pid = p->pids[0];
        e->outcome = REG_OUT_PENDING;
        if (token)
            snprintf(e->token, sizeof(e->token), "%s", token);
        res->triggered[res->n_triggered++] = p->node;
        LOG_INFO(" PID: %d, Trace Id: %llu", p->node, (unsigned long long)id);
    }
    LOG_INFO("On-demand request: %zu matching processes", res->n_matched);
    LOG_INFO("Installed activity profiler config for %zu process(es) (%d replaced a pending one, "
             "%zu beyond the process limit)", res->n_triggered, res->busy, res->n_skipped);
out_unlock:
    pthread_mutex_unlock(&r->mu);
    if (rc)
        reg_set_result_fini(res);
    return rc;
}

/* Drops every ctxt registration of a job (its last process was just collected). */
static void release_job(struct registry *r, int64_t job)
{
    LOG_INFO("Stopped tracking job %lld", (long long)job);
    for (int c = 0; c < r->nctxt;) {
        if (r->ctxt[c].job == job)
            r->ctxt[c] = r->ctxt[--r->nctxt];
        else
            c++;
    }
}

int registry_gc(struct registry *r, uint64_t now_ns, uint64_t age_ns)
{
    int removed = 0;
    char txt[REGISTRY_MAX_PIDS * 13];
    pthread_mutex_lock(&r->mu);
    size_t w = 0;
    /* procs are sorted by job, so each job is one run: it disappears when the pass removed
     * at least one of its processes and kept none (no fixed-size list of gone jobs) */
    int64_t run_job = 0;
    bool run_removed = false, run_kept = false;
    for (size_t i = 0; i < r->nprocs; i++) {
        struct reg_proc *p = r->procs[i];
        if (i == 0 || p->job != run_job) {
            if (run_removed && !run_kept)
                release_job(r, run_job);
            run_job = p->job;
            run_removed = run_kept = false;
        }
        if (!(now_ns > p->last_ns && now_ns - p->last_ns > age_ns)) {
            r->procs[w++] = p;
            run_kept = true;
            continue;
        }
        join_pids(p->pids, p->npids, txt, sizeof(txt));
        LOG_INFO("Stopped tracking process (%s) from job %lld", txt, (long long)p->job);
        /* ctxt registrations of this leaf go with it */
        for (int c = 0; c < r->nctxt;) {
            if (r->ctxt[c].job == p->job && r->ctxt[c].pid == p->node)
                r->ctxt[c] = r->ctxt[--r->nctxt];
            else
                c++;
        }
        run_removed = true;
        free(p->pending);
        free(p);
        removed++;
    }
    if (run_removed && !run_kept)
        release_job(r, run_job);
    r->nprocs = w;
    pthread_mutex_unlock(&r->mu);
    return removed;
}

int registry_leaves(struct registry *r, struct reg_leaf **ret, size_t *ret_n)
{
    int rc = 0;
    pthread_mutex_lock(&r->mu);
    *ret = malloc((r->nprocs + 1) * sizeof(**ret));
    *ret_n = 0;
    if (!*ret) {
        rc = -ENOMEM;
        goto out_unlock;
    }
    for (size_t i = 0; i < r->nprocs; i++)
        {
        struct reg_leaf *l = &(*ret)[(*ret_n)++];
        *l = (struct reg_leaf){ r->procs[i]->node, r->procs[i]->job, r->procs[i]->last_ns, "", "",
                                r->procs[i]->pids[0], r->procs[i]->pidns };
        memcpy(l->backend, r->procs[i]->backend, sizeof(l->backend));
        memcpy(l->library, r->procs[i]->library, sizeof(l->library));
    }
out_unlock:
    pthread_mutex_unlock(&r->mu);
    return rc;
}

size_t registry_count(struct registry *r)
{
    pthread_mutex_lock(&r->mu);
    size_t n = r->nprocs;
    pthread_mutex_unlock(&r->mu);
    return n;
}

int registry_ctxt_count(struct registry *r)
{
    pthread_mutex_lock(&r->mu);
    int n = r->nctxt;
    pthread_mutex_unlock(&r->mu);
    return n;
}

static struct reg_proc *leaf_proc(struct registry *r, int32_t pid)
{
    /* several ancestor sets may share a leaf: the one polled last holds the deliveries */
    struct reg_proc *best = NULL;
    for (size_t i = 0; i < r->nprocs; i++)
        if (r->procs[i]->node == pid && (!best || r->procs[i]->last_ns > best->last_ns))
            best = r->procs[i];
    return best;
}

int registry_ack(struct registry *r, int32_t pid, uint64_t id, enum reg_outcome outcome,
                 int32_t rank, const char *reason, const char *state)
{
    int rc = -ENOENT;
    if (outcome != REG_OUT_APPLIED && outcome != REG_OUT_REJECTED && outcome != REG_OUT_SUPERSEDED)
        return -EINVAL;
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->nprocs; i++) {
        struct reg_proc *p = r->procs[i];
        struct reg_cfg_entry *e;
        if (p->node != pid || !(e = hist_find(p, id)))
            continue;
        /* an id the process never received (still pending, or replaced) cannot be answered */
        /* an id the process never received (pending, replaced) cannot be answered; an
         * unacknowledged one can (its PluginInfo came after the delivery) */
        if (e->outcome != REG_OUT_DELIVERED && e->outcome != REG_OUT_UNACKED) {
            rc = e->outcome == REG_OUT_PENDING ? -ENOENT : -EALREADY;
            continue;
        }
        e->outcome = outcome;
        e->rank = rank;
        snprintf(e->reason, sizeof(e->reason), "%s", reason ? reason : "");
        snprintf(e->state, sizeof(e->state), "%s", state ? state : "");
        rc = 0;
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

int registry_set_acks(struct registry *r, int32_t pid, bool acks)
{
    int rc = -ENOENT;
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->nprocs; i++) {
        if (r->procs[i]->node != pid)
            continue;
        r->procs[i]->acks = acks;
        rc = 0;
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

int registry_outcomes(struct registry *r, const char *token, struct reg_cfg_entry **ret,
                      size_t *ret_n)
{
    size_t n = 0, cap = 16;
    int rc = 0;
    *ret = NULL;
    *ret_n = 0;
    if (!token || !token[0])
        return -EINVAL;
    struct reg_cfg_entry *v = malloc(cap * sizeof(*v));
    if (!v)
        return -ENOMEM;
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->nprocs; i++) {
        struct reg_proc *p = r->procs[i];
        unsigned k = p->nhist < REG_CFG_HISTORY ? p->nhist : REG_CFG_HISTORY;
        for (unsigned j = 0; j < k; j++) {
            if (strcmp(p->hist[j].token, token) != 0)
                continue;
            if (n == cap) {
                struct reg_cfg_entry *nv = realloc(v, 2 * cap * sizeof(*v));
                if (!nv) {
                    rc = -ENOMEM;
                    goto out_unlock;
                }
                v = nv;
                cap *= 2;
            }
            v[n++] = p->hist[j];
        }
    }
out_unlock:
    pthread_mutex_unlock(&r->mu);
    if (rc) {
        free(v);
        return rc;
    }
    *ret = v;
    *ret_n = n;
    return 0;
}

int registry_last_outcome(struct registry *r, int32_t pid, struct reg_cfg_entry *ret)
{
    int rc = -ENOENT;
    pthread_mutex_lock(&r->mu);
    struct reg_proc *p = leaf_proc(r, pid);
    if (p && p->nhist > 0) {
        *ret = p->hist[(p->nhist - 1) % REG_CFG_HISTORY];
        rc = 0;
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

static int i32_cmp(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

int registry_resolve_pids(struct registry *r, int64_t job, const int32_t *pids, size_t n, int32_t **ret,
                          size_t *ret_n, int32_t *ret_ambiguous, int32_t **ret_cand, size_t *ret_ncand)
{
    int rc = 0;
    size_t cap = n + 1, k = 0;
    int32_t *out = NULL;

    *ret = NULL;
    *ret_n = 0;
    *ret_cand = NULL;
    *ret_ncand = 0;
    *ret_ambiguous = 0;
    pthread_mutex_lock(&r->mu);
    cap += r->nprocs;
    out = malloc(cap * sizeof(*out));
    if (!out) {
        rc = -ENOMEM;
        goto out_unlock;
    }
    for (size_t i = 0; i < n; i++) {
        int32_t pid = pids[i];
        bool on_node = false;
        size_t nin = 0;
        uint64_t ns0 = 0;
        int32_t node0 = 0;
        bool several = false;
        for (size_t j = 0; j < r->nprocs && !on_node; j++) {
            const struct reg_proc *p = r->procs[j];
            if (p->job == job && set_has(p->node_set, p->nnode, pid))
                on_node = true;
        }
        if (on_node || pid <= 0) {
            out[k++] = pid;
            continue;
        }
        /* a pid only some processes' own namespaces know: one namespace's, or ambiguous */
        for (size_t j = 0; j < r->nprocs; j++) {
            const struct reg_proc *p = r->procs[j];
            if (p->job != job || !set_has(p->set, p->nset, pid))
                continue;
            /* one namespace: the same known pid namespace, or (unknown) the same process */
            if (nin++ == 0) {
                ns0 = p->pidns;
                node0 = p->node;
            } else if (ns0 == 0 ? p->node != node0 : p->pidns != ns0) {
                several = true;
            }
        }
        if (nin == 0) {
            out[k++] = pid; /* matches nothing, as before */
            continue;
        }
        if (several) {
            int32_t *cand = malloc(nin * sizeof(*cand));
            size_t nc = 0;
            if (!cand) {
                rc = -ENOMEM;
                goto out_unlock;
            }
            for (size_t j = 0; j < r->nprocs && nc < nin; j++) {
                const struct reg_proc *p = r->procs[j];
                if (p->job == job && set_has(p->set, p->nset, pid))
                    cand[nc++] = p->node;
            }
            qsort(cand, nc, sizeof(*cand), i32_cmp);
            *ret_cand = cand;
            *ret_ncand = nc;
            *ret_ambiguous = pid;
            rc = -EEXIST;
            goto out_unlock;
        }
        for (size_t j = 0; j < r->nprocs && k < cap; j++) {
            const struct reg_proc *p = r->procs[j];
            if (p->job == job && set_has(p->set, p->nset, pid))
                out[k++] = p->node;
        }
    }
out_unlock:
    pthread_mutex_unlock(&r->mu);
    if (rc) {
        free(out);
        return rc;
    }
    qsort(out, k, sizeof(*out), i32_cmp);
    size_t u = 0;
    for (size_t i = 0; i < k; i++)
        if (u == 0 || out[u - 1] != out[i])
            out[u++] = out[i];
    *ret = out;
    *ret_n = u;
    return 0;
}
