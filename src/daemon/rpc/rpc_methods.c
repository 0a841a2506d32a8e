/* rpc_methods: request validation (no reply for anything malformed, with upstream's log
 * texts), nlohmann-compatible field errors, and the method handlers. Replies are written
 * with jw in sorted key order, byte-identical to upstream's dump(). */
#include "daemon/rpc/rpc_methods.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/jw.h"
#include "common/log.h"
#include "common/logesc.h"
#include "common/strutil.h"
#include "contract/names.h"
#include "contract/cfgkeys.h"
#include "contract/cfgcanon.h"
#include "contract/cjx.h"
#include "contract/kvtext.h"
#include "daemon/ipc/health.h"
#include "daemon/rpc/rpc_steps.h"

#define REPLY_MAX (1u << 20)

/* Everything below is triggered by whoever reaches the port: at most one line a second per
 * kind of complaint, with the count of those folded (log.h LOG_RL). */
static const struct pathnorm_roots *allowed_log_dirs;

void rpc_set_allowed_log_dirs(const struct pathnorm_roots *roots)
{
    allowed_log_dirs = roots;
}

static struct log_ratelimit rl_parse, rl_shape, rl_nofn, rl_unknown, rl_field, rl_refused;
static struct log_burst lb_received;

typedef int (*rpc_handler_fn)(const struct rpc_ctx *ctx, const cJSON *req, struct jw *w);

static int m_get_status(const struct rpc_ctx *ctx, const cJSON *req, struct jw *w);
static int m_get_version(const struct rpc_ctx *ctx, const cJSON *req, struct jw *w);
static int pid_cmp(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

static int m_set_ondemand(const struct rpc_ctx *ctx, const cJSON *req, struct jw *w);
static int m_get_outcomes(const struct rpc_ctx *ctx, const cJSON *req, struct jw *w);
static int m_get_steps(const struct rpc_ctx *ctx, const cJSON *req, struct jw *w)
{
    return rpc_steps_get(ctx->steps, req, w);
}

static const struct {
    const char *name;
    rpc_handler_fn fn;
} methods[] = {
    { "getConfigOutcomes", m_get_outcomes },
    { "getStatus", m_get_status },
    { "getSteps", m_get_steps },
    { "getVersion", m_get_version },
    { "setKinetOnDemandRequest", m_set_ondemand },
};

const char *rpc_gate(enum reg_kind kind, int32_t trace, int32_t monitor)
{
    if (kind == REG_KIND_NPU_MONITOR) {
        if (trace == 1 || monitor == -1)
            return "ineffective";
        if (trace == 0 || trace == 2)
            return "effective";
        return "unknown";
    }
    if (monitor == 1 || trace == -1)
        return "ineffective";
    if (monitor == 0)
        return "effective";
    return "unknown";
}

/* start_step/stop_step are present only while a trace is Running or Ready (docs/design/rpc.md#getstatus). */
static bool has_steps(int32_t trace) { return trace == 1 || trace == 2; }

static int leaf_cmp(const void *a, const void *b)
{
    const struct reg_leaf *x = a, *y = b;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    return x->job < y->job ? -1 : x->job > y->job;
}

static bool (*pid_gone_fn)(int32_t pid);

void rpc_set_pid_gone(bool (*fn)(int32_t pid))
{
    pid_gone_fn = fn;
}

static bool pid_gone(int32_t pid)
{
    return pid_gone_fn && pid_gone_fn(pid);
}

/* The pod fields and cgroup attribution of the process of node pid (docs/deploy.md#attribution);
 * -ENOENT when the daemon knows nothing of it. An entry pushed out of the sender cache is made
 * again (its cgroup and environment are read back; the report returns with the next one). */
static int pod_of(const struct rpc_ctx *ctx, int32_t pid, struct podid_self *ret, struct podid_cgroup *ret_cg)
{
    struct peer_id id;
    if (!ctx->peers || pid <= 0)
        return -ENOENT;
    if (peer_self(ctx->peers, pid, ret, ret_cg) == 0)
        return 0;
    if (peer_lookup(ctx->peers, pid, &id) != 0)
        return -ENOENT;
    return peer_self(ctx->peers, pid, ret, ret_cg);
}

/* getStatus "pod": {"container","container_id","name","namespace","node","runtime","uid"}, the
 * keys that are known (sorted). Nothing when nothing is. */
static void write_pod(struct jw *w, const struct podid_self *me, const struct podid_cgroup *cg)
{
    bool any = cg->container_id[0] || cg->pod_uid[0];
    for (int f = 0; f < PODID_NFIELDS; f++)
        any = any || me->v[f][0];
    if (!any)
        return;
    jw_key(w, "pod");
    jw_obj_begin(w);
    if (me->v[PODID_CONTAINER][0])
        jw_kv_str(w, "container", me->v[PODID_CONTAINER]);
    if (cg->container_id[0])
        jw_kv_str(w, "container_id", cg->container_id);
    if (me->v[PODID_POD][0])
        jw_kv_str(w, "name", me->v[PODID_POD]);
    if (me->v[PODID_NAMESPACE][0])
        jw_kv_str(w, "namespace", me->v[PODID_NAMESPACE]);
    if (me->v[PODID_NODE][0])
        jw_kv_str(w, "node", me->v[PODID_NODE]);
    if (cg->runtime && cg->runtime[0])
        jw_kv_str(w, "runtime", cg->runtime);
    if (cg->pod_uid[0])
        jw_kv_str(w, "uid", cg->pod_uid);
    jw_obj_end(w);
}

/* One delivery's outcome as a JSON object (keys sorted); with_pid adds who it went to: the
 * node's pid, the container's and the pod name. `rank`: the rank getStatus shows for the process
 * (its health report), -1 when it reported none: then the acknowledgement's. One rank per process
 * in every reply, so an outcome line and a status line agree. */
static void write_outcome(const struct rpc_ctx *ctx, struct jw *w, const struct reg_cfg_entry *e, bool with_pid,
                          int32_t rank)
{
    char id[24];
    struct podid_self me;
    bool pod = with_pid && pod_of(ctx, e->pid, &me, NULL) == 0 && me.v[PODID_POD][0];
    snprintf(id, sizeof(id), "%llu", (unsigned long long)e->id);
    jw_obj_begin(w);
    jw_key(w, "id");          /* a string: 64-bit ids do not survive a double */
    jw_str(w, id);
    if (with_pid && e->ns_pid > 0 && e->ns_pid != e->pid) {
        jw_kv_int(w, "ns_pid", e->ns_pid);
    }
    jw_kv_str(w, "outcome", registry_outcome_name(e->outcome));
    if (with_pid) {
        jw_kv_int(w, "pid", e->pid);
    }
    if (pod) {
        jw_kv_str(w, "pod", me.v[PODID_POD]);
    }
    jw_kv_int(w, "rank", rank >= 0 ? rank : e->rank);
    jw_kv_str(w, "reason", e->reason);
    jw_kv_str(w, "state", e->state);
    jw_obj_end(w);
}

/* Ours: the last config this process was handed and what became of it, under a
 * key of its own so that other per-process additions merge beside it. */
static void write_config_status(const struct rpc_ctx *ctx, struct jw *w, int32_t pid, int32_t rank)
{
    struct reg_cfg_entry e;
    if (registry_last_outcome(ctx->reg, pid, &e) != 0)
        return;
    jw_key(w, "config");
    write_outcome(ctx, w, &e, false, rank);
}

/* The rank a process reported in its health (getStatus's `health.rank`), -1 if none. ents is
 * sorted by (pid, job). */
static int ent_pid_cmp(const void *key, const void *elem)
{
    int32_t pid = *(const int32_t *)key, other = ((const struct status_entry *)elem)->pid;
    return pid < other ? -1 : pid > other;
}

static int32_t health_rank(const struct status_entry *ents, size_t n, int32_t pid)
{
    const struct status_entry *hit = n ? bsearch(&pid, ents, n, sizeof(*ents), ent_pid_cmp) : NULL;

    if (!hit)
        return -1;
    while (hit > ents && hit[-1].pid == pid) /* the jobs of one pid are adjacent: from the first */
        hit--;
    for (; hit < ents + n && hit->pid == pid; hit++)
        if (hit->has_health && hit->health.rank >= 0)
            return hit->health.rank;
    return -1;
}

static int m_get_status(const struct rpc_ctx *ctx, const cJSON *req, struct jw *w)
{
    struct status_last last;
    struct status_daemon dmn;
    struct status_entry *ents = NULL;
    struct reg_leaf *leaves = NULL;
    size_t ne = 0, nl = 0;
    int rc;
    (void)req;
    status_get_last(ctx->st, &last);
    rc = status_list(ctx->st, &ents, &ne);
    if (rc)
        goto out;
    rc = registry_leaves(ctx->reg, &leaves, &nl);
    if (rc)
        goto out_ents;
    /* leaves: sort by (pid, job) so the union with the status table is a merge */
    qsort(leaves, nl, sizeof(*leaves), leaf_cmp);
    jw_obj_begin(w);
    jw_kv_int(w, "current_step", last.trace.current_step);
    status_get_daemon(ctx->st, &dmn);
    if (dmn.start_mono_ns) { /* ours: daemon-level keys, upstream keys unchanged */
        uint64_t now = clock_mono_ns();
        jw_kv_uint(w, "daemon_uptime_s", now > dmn.start_mono_ns ? (now - dmn.start_mono_ns) / 1000000000u : 0);
        /* what the IPC sockets refused and why (dyno doctor names the fix) */
        jw_key(w, "ipc_drops");
        jw_obj_begin(w);
        jw_kv_uint(w, "no_pid", dmn.drops[STATUS_DROP_NO_PID]);
        jw_kv_uint(w, "speaks_for", dmn.drops[STATUS_DROP_SPEAKS_FOR]);
        jw_kv_uint(w, "uid", dmn.drops[STATUS_DROP_UID]);
        if (dmn.drops[STATUS_DROP_UID]) {
            jw_kv_uint(w, "uid_last", dmn.drop_uid);
        }
        jw_obj_end(w);
        if (dmn.nuids) {
            jw_key(w, "ipc_uids");
            jw_arr_begin(w);
            for (size_t i = 0; i < dmn.nuids; i++)
                jw_uint(w, dmn.uids[i]);
            jw_arr_end(w);
        }
        jw_key(w, "loggers");
        jw_arr_begin(w);
        for (const char *p = dmn.loggers; *p;) {
            const char *c = strchr(p, ',');
            size_t n = c ? (size_t)(c - p) : strlen(p);
            jw_strn(w, p, n);
            p += n + (c != NULL);
        }
        jw_arr_end(w);
    }
    if (dmn.net_ns) { /* ours: the daemon's namespaces, for dyno doctor in a container */
        jw_kv_uint(w, "net_ns", dmn.net_ns);
    }
    if (ctx->prom_stats) { /* ours: what the series bounds folded, so status shows the overflow */
        struct rpc_prom_stats ps = { 0 };
        ctx->prom_stats(ctx->prom_arg, &ps);
        jw_key(w, "prometheus");
        jw_obj_begin(w);
        jw_kv_uint(w, "series", ps.series);
        jw_kv_uint(w, "folded_process", ps.folded_process);
        jw_kv_uint(w, "folded_daemon", ps.folded_daemon);
        jw_kv_uint(w, "processes_folded", ps.processes_folded);
        jw_obj_end(w);
    }
    jw_kv_str(w, "npumonitor", names_ipc_status(last.monitor.status));
    jw_kv_str(w, "nputrace", names_ipc_status(last.trace.status));
    if (dmn.pid_ns) {
        jw_kv_uint(w, "pid_ns", dmn.pid_ns);
    }
    jw_key(w, "processes");
    jw_arr_begin(w);
    size_t a = 0, b = 0;
    while (a < ne || b < nl) {
        struct status_entry e = { .trace = -1, .monitor = -1, .current_step = -1 };
        uint64_t last_poll_ns = 0, pidns = 0;
        const char *lib_backend = NULL, *lib_path = "";
        bool polling = false;
        int32_t ns_pid = 0;
        int cmp;
        if (a >= ne)
            cmp = 1;
        else if (b >= nl)
            cmp = -1;
        else if (ents[a].pid != leaves[b].pid)
            cmp = ents[a].pid < leaves[b].pid ? -1 : 1;
        else
            cmp = ents[a].job < leaves[b].job ? -1 : ents[a].job > leaves[b].job;
        if (cmp <= 0) {
            e = ents[a++];
            ns_pid = e.ns_pid;
        }
        if (cmp >= 0) {
            e.pid = leaves[b].pid;
            e.job = leaves[b].job;
            ns_pid = leaves[b].ns_pid;
            pidns = leaves[b].pidns;
            polling = true;
            /* the same leaf may poll with several ancestor sets: list it once, newest poll */
            for (; b < nl && leaves[b].pid == e.pid && leaves[b].job == e.job; b++) {
                if (leaves[b].last_ns > last_poll_ns)
                    last_poll_ns = leaves[b].last_ns;
                if (leaves[b].backend[0]) {
                    lib_backend = leaves[b].backend;
                    lib_path = leaves[b].library;
                }
            }
        }
        bool gone = pid_gone(e.pid);
        struct peer_id pid_id;
        if (gone)
            polling = false;
        else if (ctx->peers && (ns_pid <= 0 || !pidns) && peer_lookup(ctx->peers, e.pid, &pid_id) == 0) {
            ns_pid = ns_pid > 0 ? ns_pid : pid_id.ns_pid;
            pidns = pidns ? pidns : pid_id.pidns;
        }
        jw_obj_begin(w);
        if (lib_backend) { /* ours: the vendor library this process loaded */
            jw_kv_str(w, "backend", lib_backend);
        }
        write_config_status(ctx, w, e.pid, e.has_health ? e.health.rank : health_rank(ents, ne, e.pid));
        jw_kv_int(w, "current_step", e.current_step);
        if (health_has(&e, gone)) { /* ours: live health and its marks */
            jw_key(w, "health");
            health_write(w, &e, gone, clock_mono_ns());
        }
        jw_kv_int(w, "job_id", e.job);
        if (polling) { /* ours (`dyno doctor`): how long ago this poller last polled */
            uint64_t now = clock_mono_ns();
            jw_kv_uint(w, "last_poll_age_ms", now > last_poll_ns ? (now - last_poll_ns) / 1000000u : 0);
        }
        if (lib_backend) {
            jw_kv_str(w, "library", lib_path);
        }
        jw_kv_str(w, "npumonitor", names_ipc_status(e.monitor));
        jw_kv_str(w, "nputrace", names_ipc_status(e.trace));
        /* ours: the pid a process in a container knows itself by, beside the node's */
        if (ns_pid > 0 && ns_pid != e.pid) {
            jw_kv_int(w, "ns_pid", ns_pid);
        }
        jw_kv_int(w, "pid", e.pid);
        if (pidns) {
            jw_kv_uint(w, "pid_ns", pidns);
        }
        {
            struct podid_self me;
            struct podid_cgroup cg;
            if (pod_of(ctx, e.pid, &me, &cg) == 0)
                write_pod(w, &me, &cg);
        }
        jw_kv_bool(w, "polling", polling);
        if (e.has_stats) { /* ours: the session's counters (keys sorted, like every reply) */
            jw_key(w, "session_stats");
            jw_obj_begin(w);
#define STATS_KEY(f, ...) \
    jw_key(w, #f);     \
    jw_uint(w, e.stats.f);
            STATUS_STATS_FIELDS(STATS_KEY)
#undef STATS_KEY
            jw_obj_end(w);
        }
        if (has_steps(e.trace)) {
            jw_kv_int(w, "start_step", e.start_step);
            jw_kv_int(w, "stop_step", e.stop_step);
        }
        jw_obj_end(w);
    }
    jw_arr_end(w);
    if (dmn.start_mono_ns) {
        jw_kv_uint(w, "registered_processes", registry_count(ctx->reg));
    }
    if (has_steps(last.trace.status)) {
        jw_kv_int(w, "start_step", last.trace.start_step);
        jw_kv_int(w, "stop_step", last.trace.stop_step);
    }
    jw_obj_end(w);
    free(leaves);
out_ents:
    free(ents);
out:
    return rc;
}

static int m_get_version(const struct rpc_ctx *ctx, const cJSON *req, struct jw *w)
{
    (void)req;
    jw_obj_begin(w);
    jw_kv_str(w, "version", ctx->version);
    jw_obj_end(w);
    return 0;
}

static void write_status_only(struct jw *w, const char *status)
{
    jw_obj_begin(w);
    jw_kv_str(w, "status", status);
    jw_obj_end(w);
}


/* The last trace reporter says Ready/Running and still exists (EPERM: exists, other uid; a
 * zombie does not count: it traces nothing). */
static bool trace_busy(const struct ipc_status *t)
{
    if (t->status != 1 && t->status != 2)
        return false;
    return t->pid > 0 && !pid_gone(t->pid);
}

/* Who may receive a config: the status gate (docs/design/rpc.md#status-gate) and, with --pod or
 * --namespace, the pod the process reported (docs/cli.md#selecting-processes-by-pod). */
struct selection {
    const struct rpc_ctx *ctx;
    enum reg_kind kind;
    bool effective;
    const char *pod, *ns; /* NULL: any */
};

static bool eligible(enum reg_origin origin, int32_t pid, void *arg)
{
    const struct selection *a = arg;
    struct podid_self me;
    if (origin == REG_ORIGIN_KINETO ? a->kind != REG_KIND_TRACE : !a->effective)
        return false;
    if (!a->pod && !a->ns)
        return true;
    if (pod_of(a->ctx, pid, &me, NULL) != 0)
        return false;
    return (!a->pod || strcmp(me.v[PODID_POD], a->pod) == 0) &&
           (!a->ns || strcmp(me.v[PODID_NAMESPACE], a->ns) == 0);
}

/* The selection echoed in the reply (ours, sorted between eventProfilersTriggered and
 * processesMatched), so that dyno knows this daemon applied --pod/--namespace. */
static void write_sel(struct jw *w, const struct selection *sel)
{
    if (sel && sel->ns) {
        jw_kv_str(w, "namespace", sel->ns);
    }
    if (sel && sel->pod) {
        jw_kv_str(w, "pod", sel->pod);
    }
}

static void write_int_array(struct jw *w, const int32_t *v, size_t n)
{
    jw_arr_begin(w);
    for (size_t i = 0; i < n; i++)
        jw_int(w, v[i]);
    jw_arr_end(w);
}

/* skipped >= 0 (a client that sent client_token) adds processesSkipped (ours). */
static void write_full(struct jw *w, int busy, const int32_t *trig, size_t ntrig,
                       const char *cmd, const int32_t *matched, size_t nmatched, long long skipped,
                       const struct selection *sel)
{
    jw_obj_begin(w);
    jw_kv_int(w, "activityProfilersBusy", busy);
    jw_key(w, "activityProfilersTriggered");
    write_int_array(w, trig, ntrig);
    jw_kv_str(w, "commandStatus", cmd);
    jw_kv_int(w, "eventProfilersBusy", 0);
    jw_key(w, "eventProfilersTriggered");
    jw_arr_begin(w);
    jw_arr_end(w);
    write_sel(w, sel);
    jw_key(w, "processesMatched");
    write_int_array(w, matched, nmatched);
    if (skipped >= 0) {
        jw_kv_int(w, "processesSkipped", skipped);
    }
    jw_obj_end(w);
}

/* Field type error in nlohmann's words; logged and returned as the failed status. */
static void type_error(struct jw *w, const char *expected, const cJSON *actual)
{
    char msg[160];
    snprintf(msg, sizeof(msg),
             "failed with exception = [json.exception.type_error.302] type must be %s, but is %s",
             expected, cjx_type_name(actual));
    LOG_RL(&rl_field, 1000, LOG_LVL_ERROR, "setKinetOnDemandRequest: parsing exception = %s",
           msg + strlen("failed with exception = "));
    write_status_only(w, msg);
}

/* A number of the right type but outside the field's range: say so plainly (
 * nlohmann's "type must be number, but is number" told the user nothing). */
static void field_error(struct jw *w, const char *field, const cJSON *v, int rc, int64_t lo,
                        int64_t hi)
{
    char msg[256], val[64] = "?";
    struct jw vw;
    if (rc != -ERANGE) {
        type_error(w, "number", v);
        return;
    }
    jw_init_dyn(&vw, 4096);
    cjx_write(&vw, v);
    if (!vw.err && vw.buf)
        snprintf(val, sizeof(val), "%s", vw.buf);
    jw_fini(&vw);
    snprintf(msg, sizeof(msg), "failed: %s %s is out of range %lld..%lld", field, val,
             (long long)lo, (long long)hi);
    LOG_RL(&rl_field, 1000, LOG_LVL_ERROR, "setKinetOnDemandRequest: %s", msg + strlen("failed: "));
    write_status_only(w, msg);
}

static int check_one(const struct pathnorm_roots *roots, const char *key, const char *value,
                     char *why, size_t whycap)
{
    char reason[PATHNORM_MAX + 128], list[512];
    if (pathnorm_roots_allow(roots, value, reason, sizeof(reason)))
        return 0;
    pathnorm_roots_str(roots, list, sizeof(list));
    snprintf(why, whycap, "%s %s (--allowed_log_dirs=%s)", key, reason, list);
    return -EACCES;
}

int rpc_check_log_dirs(const struct pathnorm_roots *roots, const char *config, size_t len,
                       bool trace, char *why, size_t whycap)
{
    struct kvtext kv;
    int rc = 0;
    if (!roots || roots->n == 0)
        return 0;
    /* config is the canonical text (cfgcanon): every consumer reads this same dict out of
     * it, so what is checked here is exactly what the process will use */
    rc = kvtext_parse(config, len, &kv);
    if (rc) {
        snprintf(why, whycap, "config text cannot be parsed (%s)", errno_name(-rc));
        rc = -EACCES;
        goto out;
    }
    const char *mon = kvtext_get(&kv, CFGKEY_NPU_MONITOR_LOG_FILE);
    const char *act = kvtext_get(&kv, CFGKEY_ACTIVITIES_LOG_FILE);
    if (mon && mon[0] && (rc = check_one(roots, CFGKEY_NPU_MONITOR_LOG_FILE, mon, why, whycap)))
        goto out;
    if (act && act[0] && (rc = check_one(roots, CFGKEY_ACTIVITIES_LOG_FILE, act, why, whycap)))
        goto out;
    if (trace && !(act && act[0])) {
        /* without a path the framework picks its own directory, which nobody checked */
        snprintf(why, whycap, "a trace config must name its " CFGKEY_ACTIVITIES_LOG_FILE
                              " when --allowed_log_dirs is set");
        rc = -EACCES;
    }
out:
    kvtext_fini(&kv);
    return rc;
}

/* client_token (ours): what a waiting dyno asks getConfigOutcomes for. */
static bool token_ok(const char *t)
{
    size_t n = strlen(t);
    if (n == 0 || n >= REG_TOKEN_CAP)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((t[i] >= '0' && t[i] <= '9') || (t[i] >= 'a' && t[i] <= 'z') ||
              (t[i] >= 'A' && t[i] <= 'Z') || t[i] == '_' || t[i] == '-'))
            return false;
    return true;
}

/* getConfigOutcomes (ours): {"fn":"getConfigOutcomes","client_token":"<t>"} ->
 * {"outcomes":[{"id","outcome","pid","rank","reason","state"}, ...]}, every delivery the
 * setKinetOnDemandRequest with that token made that the daemon still remembers. */
static int m_get_outcomes(const struct rpc_ctx *ctx, const cJSON *req, struct jw *w)
{
    const cJSON *t = cjx_get(req, "client_token");
    struct reg_cfg_entry *v = NULL;
    size_t n = 0;
    int rc;
    if (!cJSON_IsString(t) || !token_ok(t->valuestring)) {
        write_status_only(w, "failed: client_token must be 1-64 characters [0-9A-Za-z_-]");
        return 0;
    }
    struct status_entry *ents = NULL;
    size_t ne = 0;
    rc = registry_outcomes(ctx->reg, t->valuestring, &v, &n);
    if (rc)
        return rc;
    if (n > 0 && status_list(ctx->st, &ents, &ne) != 0)
        ne = 0; /* no table: the acknowledgements' ranks */
    jw_obj_begin(w);
    jw_key(w, "outcomes");
    jw_arr_begin(w);
    for (size_t i = 0; i < n; i++)
        write_outcome(ctx, w, &v[i], true, health_rank(ents, ne, v[i].pid));
    jw_arr_end(w);
    jw_obj_end(w);
    free(ents);
    free(v);
    return 0;
}

/* A requested pid that no process has as its node pid but processes of several pid namespaces
 * have as their own (two containers each with a pid 5) names more than one process, whether or
 * not each polls: -EEXIST, *ret_pid and the candidates' node pids (caller frees *ret_cand). The
 * processes are every one the daemon lists (the status table's and the registry's). */
static int ambiguous_pid(const struct rpc_ctx *ctx, const int32_t *pids, size_t n, int32_t *ret_pid,
                         int32_t **ret_cand, size_t *ret_ncand)
{
    struct status_entry *ents = NULL;
    struct reg_leaf *leaves = NULL;
    size_t ne = 0, nl = 0;
    int rc = 0;

    *ret_cand = NULL;
    *ret_ncand = 0;
    if (!ctx->peers || status_list(ctx->st, &ents, &ne) != 0)
        return 0;
    if (registry_leaves(ctx->reg, &leaves, &nl) != 0) {
        free(ents);
        return 0;
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        int32_t want = pids[i], *cand = malloc((ne + nl + 1) * sizeof(*cand));
        uint64_t ns0 = 0;
        size_t nc = 0;
        bool node = false, several = false;
        if (!cand) {
            rc = -ENOMEM;
            break;
        }
        for (size_t k = 0; k < ne + nl && !node; k++) {
            int32_t pid = k < ne ? ents[k].pid : leaves[k - ne].pid;
            int32_t nsp = k < ne ? ents[k].ns_pid : leaves[k - ne].ns_pid;
            struct peer_id id;
            if (pid == want) {
                node = true;
                break;
            }
            if (nsp != want || nsp == pid)
                continue;
            bool dup = false;
            for (size_t j = 0; j < nc; j++)
                dup |= cand[j] == pid;
            if (dup)
                continue;
            uint64_t ns = peer_lookup(ctx->peers, pid, &id) == 0 ? id.pidns : 0;
            several |= nc > 0 && (ns == 0 || ns != ns0);
            if (nc == 0)
                ns0 = ns;
            cand[nc++] = pid;
        }
        if (!node && several) {
            qsort(cand, nc, sizeof(*cand), pid_cmp);
            *ret_pid = want;
            *ret_cand = cand;
            *ret_ncand = nc;
            rc = -EEXIST;
        } else {
            free(cand);
        }
    }
    free(ents);
    free(leaves);
    return rc;
}

static int m_set_ondemand(const struct rpc_ctx *ctx, const cJSON *req, struct jw *w)
{
    const cJSON *config = cjx_get(req, "config");
    const cJSON *pids = cjx_get(req, "pids");
    const cJSON *job = cjx_get(req, "job_id");
    const cJSON *limit_v = cjx_get(req, "process_limit");
    const cJSON *token_v = cjx_get(req, "client_token");
    const cJSON *pod_v = cjx_get(req, "pod"), *ns_v = cjx_get(req, "namespace");
    const char *token = NULL;
    int32_t *pidv = NULL, *node_pids = NULL, *cand = NULL;
    struct selection sel = { .ctx = ctx };
    char *canon = NULL;
    size_t npids = 0, config_len = 0;
    int64_t job_id = 0, limit = 1000;
    int rc = 0;
    if (!config || !pids) {
        write_status_only(w, "failed");
        return 0;
    }
    if (!cJSON_IsString(config)) {
        type_error(w, "string", config);
        return 0;
    }
    if (!cJSON_IsArray(pids)) {
        type_error(w, "array", pids);
        return 0;
    }
    if (token_v) {
        if (!cJSON_IsString(token_v)) {
            type_error(w, "string", token_v);
            return 0;
        }
        if (!token_ok(token_v->valuestring)) {
            LOG_RL(&rl_field, 1000, LOG_LVL_ERROR, "setKinetOnDemandRequest: invalid client_token");
            write_status_only(w, "failed: client_token must be 1-64 characters [0-9A-Za-z_-]");
            return 0;
        }
        token = token_v->valuestring;
    }
    /* ours: --pod / --namespace select processes by what they reported about their pod */
    for (int k = 0; k < 2; k++) {
        const cJSON *v = k ? ns_v : pod_v;
        enum podid_field f = k ? PODID_NAMESPACE : PODID_POD;
        char msg[160], esc[LOGESC_CAP(64)];
        if (!v)
            continue;
        if (!cJSON_IsString(v)) {
            type_error(w, "string", v);
            return 0;
        }
        if (!podid_valid(f, v->valuestring, strlen(v->valuestring))) {
            snprintf(msg, sizeof(msg), "failed: %s '%s' is not a valid name", k ? "namespace" : "pod",
                     logesc(v->valuestring, strlen(v->valuestring) < 64 ? strlen(v->valuestring) : 64, esc,
                            sizeof(esc)));
            LOG_RL(&rl_field, 1000, LOG_LVL_ERROR, "setKinetOnDemandRequest: %s", msg + strlen("failed: "));
            write_status_only(w, msg);
            return 0;
        }
        if (k)
            sel.ns = v->valuestring;
        else
            sel.pod = v->valuestring;
    }
    pidv = malloc(((size_t)cJSON_GetArraySize(pids) + 1) * sizeof(*pidv));
    if (!pidv)
        return -ENOMEM;
    for (const cJSON *c = pids->child; c; c = c->next) {
        int64_t x;
        int frc = cjx_to_i64(c, INT32_MIN, INT32_MAX, &x);
        if (frc != 0) {
            field_error(w, "pids element", c, frc, INT32_MIN, INT32_MAX);
            goto out_pids;
        }
        pidv[npids++] = (int32_t)x;
    }
    /* upstream reads pids into a std::set<int>: sorted, duplicates collapsed (the registry
     * binary-searches it, so a 4000-pid request stays O(registry size)) */
    qsort(pidv, npids, sizeof(*pidv), pid_cmp);
    size_t u = 0;
    for (size_t k = 0; k < npids; k++)
        if (u == 0 || pidv[u - 1] != pidv[k])
            pidv[u++] = pidv[k];
    npids = u;
    int frc;
    if (job && (frc = cjx_to_i64(job, INT64_MIN, INT64_MAX, &job_id)) != 0) {
        field_error(w, "job_id", job, frc, INT64_MIN, INT64_MAX);
        goto out_pids;
    }
    if (limit_v && (frc = cjx_to_i64(limit_v, INT64_MIN, INT64_MAX, &limit)) != 0) {
        field_error(w, "process_limit", limit_v, frc, INT64_MIN, INT64_MAX);
        goto out_pids;
    }
    /* The one reading (docs/security.md, "Config text: one reading"): from here on only the
     * canonical text exists; it is what is classified, checked, queued and handed out. */
    char why[PATHNORM_MAX * 2 + 256];
    int crc = cfgcanon_text(config->valuestring, strlen(config->valuestring), &canon,
                            &config_len, why, sizeof(why));
    if (crc == -ENOMEM) {
        rc = crc;
        goto out_pids;
    }
    enum reg_kind kind = crc == 0 && cfgkeys_is_npu_monitor_text(canon, config_len)
                             ? REG_KIND_NPU_MONITOR : REG_KIND_TRACE;
    if (crc != 0 || rpc_check_log_dirs(allowed_log_dirs, canon, config_len,
                                       kind == REG_KIND_TRACE, why, sizeof(why)) != 0) {
        /* refused before the registry: no process ever receives this config */
        char esc[LOGESC_CAP(512)];
        LOG_RL(&rl_refused, 1000, LOG_LVL_WARNING, "refused config: %s",
               logesc(why, strlen(why), esc, sizeof(esc)));
        jw_obj_begin(w);
        jw_kv_str(w, "commandStatus", "refused");
        jw_kv_str(w, "reason", why);
        jw_obj_end(w);
        goto out_pids;
    }
    struct status_last last;
    status_get_last(ctx->st, &last);
    const char *gate = rpc_gate(kind, last.trace.status, last.monitor.status);
    /* Ours: a second nputrace while one is armed or tracing would be dropped by the
     * rank anyway; say so here, unless the reporter is gone (a killed rank must not block the
     * node). Kineto processes are untouched: they never report NPU status. */
    char busy[160] = "";
    if (kind == REG_KIND_TRACE && strcmp(gate, "effective") == 0 && trace_busy(&last.trace)) {
        snprintf(busy, sizeof(busy), "nputrace is already %s in pid %d (steps %d-%d); wait until it is Idle",
                 names_ipc_status(last.trace.status), (int)last.trace.pid,
                 (int)last.trace.start_step, (int)last.trace.stop_step);
        gate = "ineffective";
    }
    sel.kind = kind;
    sel.effective = strcmp(gate, "effective") == 0;
    /* --pids names node pids (what ps on the node prints); a container's own pid is taken when it
     * names processes of one container only (docs/cli.md#selecting-processes-by-pod) */
    size_t nnode = npids;
    if (!(npids == 0 || (npids == 1 && pidv[0] == 0))) {
        int32_t amb = 0;
        size_t ncand = 0;
        rc = ambiguous_pid(ctx, pidv, npids, &amb, &cand, &ncand);
        if (rc == 0)
            rc = registry_resolve_pids(ctx->reg, job_id, pidv, npids, &node_pids, &nnode, &amb, &cand, &ncand);
        if (rc == -EEXIST) {
            /* the candidates by node pid and pod, so the user can pick (at most 8 named) */
            size_t o = (size_t)snprintf(why, sizeof(why), "pid %d is a container's own pid in %zu processes of "
                                        "different containers; pass the node's pid (dyno status: \"pid\"):",
                                        (int)amb, ncand);
            for (size_t i = 0; i < ncand && i < 8 && o < sizeof(why); i++) {
                struct podid_self me;
                bool named = pod_of(ctx, cand[i], &me, NULL) == 0 && me.v[PODID_POD][0];
                int wn = snprintf(why + o, sizeof(why) - o, "%s node pid %d%s%s%s%s%s", i ? "," : "", (int)cand[i],
                                  named ? " (pod " : "", named ? me.v[PODID_NAMESPACE] : "",
                                  named && me.v[PODID_NAMESPACE][0] ? "/" : "", named ? me.v[PODID_POD] : "",
                                  named ? ")" : "");
                o += wn > 0 ? (size_t)wn : 0;
            }
            if (ncand > 8 && o < sizeof(why))
                snprintf(why + o, sizeof(why) - o, ", ... (%zu in all)", ncand);
            LOG_RL(&rl_refused, 1000, LOG_LVL_WARNING, "refused config: %s", why);
            jw_obj_begin(w);
            jw_kv_str(w, "commandStatus", "refused");
            jw_kv_str(w, "reason", why);
            jw_obj_end(w);
            rc = 0;
            goto out_pids;
        }
        if (rc)
            goto out_pids;
    }
    struct reg_set_result res;
    rc = registry_set_config(ctx->reg, job_id, node_pids ? node_pids : pidv, nnode, canon, config_len, limit,
                             eligible, &sel, token, &res);
    if (rc)
        goto out_pids;
    if (res.n_matched > 0) {
        /* a replaced pending config is not busy any more: the process gets this one */
        write_full(w, 0, res.triggered, res.n_triggered, "effective", res.matched,
                   res.n_matched, token ? (long long)res.n_skipped : -1, &sel);
    } else {
        const char *cmd = sel.effective ? "ineffective" : gate;
        char nopod[PODID_VALUE_CAP * 2 + 96] = "";
        if (sel.effective && (sel.pod || sel.ns))
            snprintf(nopod, sizeof(nopod), "no registered process of %s%s%s%s%s reported it", sel.pod ? "pod " : "",
                     sel.pod ? sel.pod : "", sel.pod && sel.ns ? " in " : "", sel.ns ? "namespace " : "",
                     sel.ns ? sel.ns : "");
        if (kind == REG_KIND_TRACE && !last.any_received && !nopod[0]) {
            write_full(w, 0, NULL, 0, cmd, NULL, 0, -1, &sel);   /* Kineto's dyno needs the keys */
        } else if (busy[0] || nopod[0]) {
            jw_obj_begin(w);
            jw_kv_str(w, "commandStatus", cmd);
            write_sel(w, &sel);
            jw_kv_str(w, "reason", busy[0] ? busy : nopod);
            jw_obj_end(w);
        } else {
            jw_obj_begin(w);
            jw_kv_str(w, "commandStatus", cmd);
            write_sel(w, &sel);
            jw_obj_end(w);
        }
    }
    reg_set_result_fini(&res);
out_pids:
    free(canon);
    free(pidv);
    free(node_pids);
    free(cand);
    return rc;
}

int rpc_handle(const struct rpc_ctx *ctx, const char *body, size_t len, char **ret_reply,
               size_t *ret_len)
{
    cJSON *req = NULL;
    struct jw w;
    int rc = 0;
    *ret_reply = NULL;
    *ret_len = 0;
    /* the body is outside text: escaped, so a newline in it cannot forge a log line; cut to
     * RPC_LOG_BODY_MAX bytes and rate-limited, so a flood of 8 KB bodies cannot flood the log
     * (docs/security.md, "Remote and local resource limits") */
    size_t shown = len < RPC_LOG_BODY_MAX ? len : RPC_LOG_BODY_MAX;
    char *esc = malloc(LOGESC_CAP(shown) + 48);
    if (!esc)
        return -ENOMEM;
    logesc(body, shown, esc, LOGESC_CAP(shown));
    if (shown < len)
        snprintf(esc + strlen(esc), 48, "... (%zu bytes)", len);
    LOG_BURST(&lb_received, RPC_LOG_PER_SEC, RPC_LOG_BURST, LOG_LVL_INFO, "RPC message received = %s", esc);
    if (cjx_parse(body, len, RPC_MAX_DEPTH, &req) != 0) {
        LOG_RL(&rl_parse, 1000, LOG_LVL_ERROR, "Error parsing message = %s", esc);
        free(esc);
        return 0;
    }
    free(esc);
    if (!cJSON_IsObject(req) || !req->child) {
        LOG_RL(&rl_shape, 1000, LOG_LVL_ERROR,
               "Request message should not be empty and should be json object.");
        goto out_req;
    }
    jw_init_dyn(&w, REPLY_MAX);
    const cJSON *fn = cjx_get(req, "fn");
    if (!fn) {
        cjx_write(&w, req);
        LOG_RL(&rl_nofn, 1000, LOG_LVL_ERROR,
               "Request must contain a 'fn' field for the RPC call request json = %s",
               w.err ? "" : w.buf);
        goto out_w;
    }
    rpc_handler_fn handler = NULL;
    for (size_t i = 0; cJSON_IsString(fn) && i < sizeof(methods) / sizeof(methods[0]); i++)
        if (strcmp(methods[i].name, fn->valuestring) == 0)
            handler = methods[i].fn;
    if (!handler) {
        cjx_write(&w, fn);
        LOG_RL(&rl_unknown, 1000, LOG_LVL_ERROR, "Unknown RPC call = %s", w.err ? "" : w.buf);
        goto out_w;
    }
    rc = handler(ctx, req, &w);
    if (rc == 0 && w.err)
        rc = w.err;
    if (rc == 0) {
        *ret_reply = w.buf;
        *ret_len = w.len;
        w.buf = NULL;
    }
out_w:
    jw_fini(&w);
out_req:
    cJSON_Delete(req);
    return rc;
}
