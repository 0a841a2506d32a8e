/* data_sink: validates each metric datagram, logs it compactly and turns it into sink
 * records: one per upstream sum/marker line, one per op entry of an OpStats message. */
#include "daemon/ipc/data_sink.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/jw.h"
#include "common/log.h"
#include "common/logesc.h"
#include "common/strutil.h"
#include "contract/cjx.h"
#include "contract/datamsg.h"
#include "daemon/ipc/health.h"
#include "daemon/ipc/peer.h"
#include "daemon/ipc/steps.h"

#define DATA_MAX_DEPTH 10

void data_router_init(struct data_router *dr) { memset(dr, 0, sizeof(*dr)); }

int data_router_add(struct data_router *dr, struct sink s)
{
    if (dr->nsinks >= DATA_MAX_SINKS)
        return -ENOSPC;
    dr->sinks[dr->nsinks++] = s;
    return 0;
}

void data_router_fini(struct data_router *dr)
{
    for (size_t i = 0; i < dr->nsinks; i++) {
        if (dr->sinks[i].ops->flush)
            dr->sinks[i].ops->flush(dr->sinks[i].self);
        if (dr->sinks[i].ops->destroy)
            dr->sinks[i].ops->destroy(dr->sinks[i].self);
    }
    dr->nsinks = 0;
}

void data_router_names(const struct data_router *dr, char *out, size_t cap)
{
    size_t len = 0;
    if (cap == 0)
        return;
    out[0] = '\0';
    for (size_t i = 0; i < dr->nsinks; i++) {
        int n = snprintf(out + len, cap - len, "%s%s", i ? "," : "", dr->sinks[i].ops->name);
        if (n < 0 || (size_t)n >= cap - len)
            break;
        len += (size_t)n;
    }
}

const char *data_norm_device(const char *text)
{
    if (strcmp(text, "-1") == 0 || strcmp(text, "4294967295") == 0 ||
        strcmp(text, "18446744073709551615") == 0 || strcmp(text, "host") == 0)
        return "host";
    return text;
}

static bool nonneg_int(const cJSON *v)
{
    int64_t i = -1;
    enum cjx_num k = cjx_number(v, &i, NULL, NULL);

    return (k == CJX_INT && i >= 0) || k == CJX_UINT;
}

/* Numbers keep their exact integer form (ns timestamps do not fit a double). */
static void set_num(struct sink_kv *kv, const char *key, const cJSON *v)
{
    kv->key = key;
    switch (cjx_number(v, &kv->i, &kv->u, &kv->d)) {
    case CJX_UINT:
        kv->type = SINK_UINT;
        break;
    case CJX_DOUBLE:
        kv->type = SINK_DOUBLE;
        break;
    case CJX_INT:
        kv->type = SINK_INT;
        break;
    default:
        kv->type = SINK_INT;
        kv->i = cJSON_IsTrue(v);
        break;
    }
}

static bool is_num(const cJSON *v)
{
    return cJSON_IsNumber(v);
}

static bool is_str(const cJSON *v)
{
    return cJSON_IsString(v);
}

static void set_str(struct sink_kv *kv, const char *key, const char *s, size_t n)
{
    kv->key = key;
    kv->type = SINK_STR;
    kv->s = s;
    kv->slen = n;
}

int data_router_write(struct data_router *dr, const struct sink_record *rec)
{
    for (size_t i = 0; i < dr->nsinks; i++)
        dr->sinks[i].ops->write(dr->sinks[i].self, rec);
    return 1;
}

static int router_view_write(void *self, const struct sink_record *rec)
{
    return data_router_write(self, rec);
}

struct sink data_router_sink(struct data_router *dr)
{
    static const struct sink_ops ops = { .name = "router", .write = router_view_write };
    return (struct sink){ .ops = &ops, .self = dr };
}

/* OpStats: one record per entry of "ops" (docs/design/outputs.md#json-logger), keys in sorted order. */
/* The pod labels of a sender's records: what it reported (or its environment said), kept for
 * the duration of one message. */
struct pod_labels {
    struct podid_self self;
};

static void label_pod(struct data_router *dr, struct sink_record *rec, int32_t pid, struct pod_labels *pl)
{
    if (!dr->peers || pid <= 0 || peer_self(dr->peers, pid, &pl->self, NULL) != 0)
        return;
    if (pl->self.v[PODID_POD][0])
        rec->pod = pl->self.v[PODID_POD];
    if (pl->self.v[PODID_NAMESPACE][0])
        rec->pod_namespace = pl->self.v[PODID_NAMESPACE];
    if (pl->self.v[PODID_CONTAINER][0])
        rec->container = pl->self.v[PODID_CONTAINER];
}

/* pid/job (and pod) labels of a record from a kernel-vouched sender; the daemon never learns a
 * rank */
static void label_sender(struct data_router *dr, struct sink_record *rec, const struct data_sender *sender,
                         struct pod_labels *pl)
{
    if (!sender || sender->pid <= 0)
        return;
    rec->pid = sender->pid;
    if (!dr->st || status_job_of(dr->st, sender->pid, &rec->job) != 0)
        rec->job = SINK_NO_JOB;
    label_pod(dr, rec, sender->pid, pl);
}

static int emit_opstats(struct data_router *dr, const cJSON *msg, const char *dev,
                        uint64_t now_ns, const struct data_sender *sender)
{
    const cJSON *ops = cjx_get(msg, "ops");
    const cJSON *activity = cjx_get(msg, "activity");
    const cJSON *ts = cjx_get(msg, "timestamp");
    int written = 0;
    struct pod_labels pl;
    if (!cJSON_IsArray(ops))
        return 0;
    for (const cJSON *op = ops->child; op; op = op->next) {
        struct sink_kv kv[12];
        size_t n = 0;
        if (!cJSON_IsObject(op))
            continue;
        const cJSON *f;
        if (is_str(activity))
            set_str(&kv[n++], "activity", activity->valuestring, strlen(activity->valuestring));
        if (is_num(f = cjx_get(op, "avg")))
            set_num(&kv[n++], "avg", f);
        if (is_num(f = cjx_get(op, "bytes")))
            set_num(&kv[n++], "bytes", f);
        if (is_num(f = cjx_get(op, "count")))
            set_num(&kv[n++], "count", f);
        set_str(&kv[n++], "deviceId", dev, strlen(dev));
        if (is_str(f = cjx_get(op, "domain")))
            set_str(&kv[n++], "domain", f->valuestring, strlen(f->valuestring));
        set_str(&kv[n++], "kind", DATAMSG_OP_STATS, sizeof(DATAMSG_OP_STATS) - 1);
        if (is_num(f = cjx_get(op, "max")))
            set_num(&kv[n++], "max", f);
        if (is_num(f = cjx_get(op, "min")))
            set_num(&kv[n++], "min", f);
        if (is_str(f = cjx_get(op, "name")))
            set_str(&kv[n++], "name", f->valuestring, strlen(f->valuestring));
        set_num(&kv[n++], "timestamp", ts);
        if (is_num(f = cjx_get(op, "total")))
            set_num(&kv[n++], "total", f);
        struct sink_record rec = { now_ns, dev, kv, n, SINK_NO_PID, SINK_NO_RANK, SINK_NO_JOB, NULL, NULL, NULL };
        label_sender(dr, &rec, sender, &pl);
        written += data_router_write(dr, &rec);
    }
    return written;
}

/* PluginStats (ours): {"pid":<int>,"stats":{<counter>:<uint>,…}} beside the usual keys. The
 * counters go to the pid's status entries for getStatus; a malformed stats object is ignored
 * for status (the message is still logged like any other). Any local process can write to
 * the data socket, so the counters are shown, never acted on. */
/* A counter message speaks for the pid it names; with a kernel-vouched sender that must be
 * the sender itself, or any local process could rewrite another rank's counters. The payload
 * says the pid the process knows itself by (its container's number); what it is known by from
 * then on is the node's (*ret_pid). */
static bool from_sender(struct data_router *dr, const char *kind, int64_t pid, const struct data_sender *sender,
                        int32_t *ret_pid)
{
    if (!sender || sender->pid <= 0) {
        *ret_pid = (int32_t)pid;
        return true;
    }
    if (pid == sender->ns_pid) {
        *ret_pid = sender->pid;
        return true;
    }
    dr->spoofed++;
    LOG_RL(&dr->rl_spoof, 1000, LOG_LVL_WARNING,
           "data: ignored %s from pid %d naming pid %lld (%llu so far)", kind, (int)sender->pid,
           (long long)pid, (unsigned long long)dr->spoofed);
    return false;
}

static bool take_stats(struct data_router *dr, const cJSON *msg, const struct data_sender *sender,
                       struct status_stats *ret, int32_t *ret_pid)
{
    const cJSON *pidv = cjx_get(msg, "pid"), *sv = cjx_get(msg, "stats"), *f;
    struct status_stats s = { 0 };
    int64_t pid = 0;
    uint64_t u = 0;
    int64_t i = 0;
    enum cjx_num k;

    int32_t node = 0;
    if (!cJSON_IsObject(sv) || cjx_number(pidv, &pid, NULL, NULL) != CJX_INT || pid <= 0 ||
        pid > INT32_MAX || !from_sender(dr, DATAMSG_PLUGIN_STATS, pid, sender, &node))
        return false;
#define TAKE(name, ...)                                                   \
    f = cjx_get(sv, #name);                                               \
    k = cjx_number(f, &i, &u, NULL);                                      \
    if (!f)                                                               \
        s.name = 0; /* an older plugin without this counter */            \
    else if (k == CJX_INT && i >= 0)                                      \
        s.name = (uint64_t)i;                                             \
    else if (k == CJX_UINT)                                               \
        s.name = u;                                                       \
    else                                                                  \
        return false;
    STATUS_STATS_FIELDS(TAKE)
#undef TAKE
    if (dr->st)
        (void)status_set_stats(dr->st, node, &s);
    *ret = s;
    *ret_pid = node;
    return true;
}

/* The session counters as a record of their own for the loggers: the upstream keys of the
 * message (deviceId, duration = consumer CPU ns, kind, timestamp) plus one uint per counter,
 * labelled with the sending pid. */
static int emit_stats(struct data_router *dr, const char *dev, const cJSON *dur, const cJSON *ts,
                      const struct status_stats *s, int32_t pid, uint64_t now_ns)
{
    struct sink_kv kv[4 + 16];
    size_t n = 0;
    set_str(&kv[n++], "deviceId", dev, strlen(dev));
    set_num(&kv[n++], "duration", dur);
    set_str(&kv[n++], "kind", DATAMSG_PLUGIN_STATS, sizeof(DATAMSG_PLUGIN_STATS) - 1);
    set_num(&kv[n++], "timestamp", ts);
#define EMIT(f, ...) kv[n++] = (struct sink_kv){ .key = #f, .type = SINK_UINT, .u = s->f };
    STATUS_STATS_FIELDS(EMIT)
#undef EMIT
    struct sink_record rec = { now_ns, dev, kv, n, pid, SINK_NO_RANK, SINK_NO_JOB, NULL, NULL, NULL };
    struct pod_labels pl;
    /* the job comes from the pid's status reports; the daemon never learns a rank */
    if (dr->st && status_job_of(dr->st, pid, &rec.job) != 0)
        rec.job = SINK_NO_JOB;
    label_pod(dr, &rec, pid, &pl);
    return data_router_write(dr, &rec);
}

/* PluginInfo (ours): {"backend":"mspti"|"cupti","library":"<path>"|"","pid":<int>} beside the
 * usual keys, sent after each registration: which vendor library the process loaded, "" when
 * none was found. Shown by getStatus (`dyno doctor`); like the counters, displayed only. */
static void take_info(struct data_router *dr, const cJSON *msg, const struct data_sender *sender)
{
    const cJSON *pidv = cjx_get(msg, "pid"), *bv = cjx_get(msg, "backend"), *lv = cjx_get(msg, "library");
    int64_t pid = 0;
    int32_t node = 0;

    if (!dr->reg || !is_str(bv) || !is_str(lv) || cjx_number(pidv, &pid, NULL, NULL) != CJX_INT || pid <= 0 ||
        pid > INT32_MAX || !bv->valuestring[0] || !str_printable(bv->valuestring, REG_BACKEND_CAP) ||
        !str_printable(lv->valuestring, REG_LIBRARY_CAP) || !from_sender(dr, DATAMSG_PLUGIN_INFO, pid, sender, &node))
        return;
    (void)registry_set_library(dr->reg, node, bv->valuestring, lv->valuestring);
    if (cJSON_IsTrue(cjx_get(msg, "acks")))
        (void)registry_set_acks(dr->reg, node, true);
}

/* ConfigAck (ours): {"id":"<REQUEST_TRACE_ID>","outcome":"applied"|"rejected"|
 * "superseded","pid":<int>,"rank":<int>,"reason":"<line>","state":"<state>"} beside the usual
 * keys: what the process made of one config. Like the counters it speaks for its sender
 * only; it is recorded for getStatus and waiting dyno clients, never acted on. */
static void bad_ack(struct data_router *dr, const char *why)
{
    static struct log_ratelimit rl;
    dr->bad_acks++;
    LOG_RL(&rl, 1000, LOG_LVL_WARNING, "data: ignored ConfigAck: %s (%llu so far)", why,
           (unsigned long long)dr->bad_acks);
}

static void take_ack(struct data_router *dr, const cJSON *msg, const struct data_sender *sender)
{
    const cJSON *idv = cjx_get(msg, "id"), *ov = cjx_get(msg, "outcome"), *rv = cjx_get(msg, "reason");
    const cJSON *sv = cjx_get(msg, "state");
    int64_t pid = 0, rank = -1;
    int32_t node = 0;
    uint64_t id = 0;
    enum reg_outcome o;

    if (!dr->reg || !is_str(idv) || !is_str(ov) || str_to_u64(idv->valuestring, &id) != 0 || id == 0 ||
        cjx_number(cjx_get(msg, "pid"), &pid, NULL, NULL) != CJX_INT || pid <= 0 || pid > INT32_MAX ||
        (rv && (!is_str(rv) || !str_printable(rv->valuestring, REG_REASON_CAP))) ||
        (sv && (!is_str(sv) || !str_printable(sv->valuestring, REG_STATE_CAP))) ||
        !from_sender(dr, DATAMSG_CONFIG_ACK, pid, sender, &node)) {
        bad_ack(dr, "malformed or not from the process it names");
        return;
    }
    if (cjx_number(cjx_get(msg, "rank"), &rank, NULL, NULL) != CJX_INT || rank < -1 || rank > INT32_MAX)
        rank = -1;
    if (strcmp(ov->valuestring, "applied") == 0)
        o = REG_OUT_APPLIED;
    else if (strcmp(ov->valuestring, "rejected") == 0)
        o = REG_OUT_REJECTED;
    else if (strcmp(ov->valuestring, "superseded") == 0)
        o = REG_OUT_SUPERSEDED;
    else {
        bad_ack(dr, "unknown outcome");
        return;
    }
    int rc = registry_ack(dr->reg, node, id, o, (int32_t)rank, rv ? rv->valuestring : "",
                          sv ? sv->valuestring : "");
    if (rc != 0)
        bad_ack(dr, rc == -EALREADY ? "the config already has its outcome" : "no such delivery to that pid");
}

/* PluginHealth (ours, daemon/ipc/health.h): shown by getStatus, never acted on. A report from a
 * kernel-vouched sender about itself lists that process even before it reports a status. */
static void take_health(struct data_router *dr, const cJSON *msg, const struct data_sender *sender,
                        uint64_t now_ns)
{
    struct status_health h;
    struct podid_self pod;
    int32_t pid = 0, node = 0;

    if (!dr->st || health_parse(msg, &h, &pid) != 0) {
        dr->health_rejected++;
        LOG_RL(&dr->rl_health, 1000, LOG_LVL_WARNING, "data: ignored a malformed %s (%llu so far)", HEALTH_MSG_KIND,
               (unsigned long long)dr->health_rejected);
        return;
    }
    if (!from_sender(dr, HEALTH_MSG_KIND, pid, sender, &node))
        return;
    (void)status_set_health_ns(dr->st, node, pid, sender && sender->pid > 0, &h, clock_mono_ns());
    /* the pod fields are the process's claim about itself: names only, refused otherwise */
    int refused = health_parse_pod(msg, &pod);
    if (refused) {
        dr->pod_refused += (uint64_t)refused;
        LOG_RL(&dr->rl_pod, 1000, LOG_LVL_WARNING,
               "data: pid %d reported %d pod field(s) that are not valid names ([A-Za-z0-9._-], Kubernetes "
               "lengths); left out (%llu so far)", (int)node, refused, (unsigned long long)dr->pod_refused);
    }
    if (dr->peers && sender && sender->pid > 0)
        (void)peer_set_self(dr->peers, node, &pod);
    (void)now_ns;
}

int data_handle(struct data_router *dr, const char *payload, size_t len, uint64_t now_ns)
{
    return data_handle_sender(dr, payload, len, now_ns, NULL);
}

int data_handle_from(struct data_router *dr, const char *payload, size_t len, uint64_t now_ns,
                     int32_t sender_pid)
{
    struct data_sender s = { sender_pid, sender_pid };
    return data_handle_sender(dr, payload, len, now_ns, sender_pid > 0 ? &s : NULL);
}

int data_handle_sender(struct data_router *dr, const char *payload, size_t len, uint64_t now_ns,
                       const struct data_sender *sender)
{
    cJSON *msg = NULL;
    const cJSON *kind, *dur, *ts, *devv;
    int64_t dev_i = 0;
    uint64_t dev_u = 0;
    enum cjx_num dev_num;
    char devbuf[32];
    const char *dev;
    struct jw w;
    char line[8192];
    int rc = -EINVAL;
    if (cjx_parse(payload, len, DATA_MAX_DEPTH, &msg) != 0)
        goto bad;
    kind = cjx_get(msg, "kind");
    dur = cjx_get(msg, "duration");
    ts = cjx_get(msg, "timestamp");
    devv = cjx_get(msg, "deviceId");
    dev_num = cjx_number(devv, &dev_i, &dev_u, NULL);
    if (!cJSON_IsObject(msg) || !is_str(kind) || !nonneg_int(dur) || !nonneg_int(ts) ||
        !(dev_num == CJX_INT || dev_num == CJX_UINT || is_str(devv)))
        goto bad;
    if (is_str(devv)) {
        dev = data_norm_device(devv->valuestring);
    } else {
        if (dev_num == CJX_INT)
            snprintf(devbuf, sizeof(devbuf), "%" PRId64, dev_i);
        else
            snprintf(devbuf, sizeof(devbuf), "%" PRIu64, dev_u);
        dev = data_norm_device(devbuf);
    }
    jw_init(&w, line, sizeof(line));
    cjx_write(&w, msg);
    if (strcmp(kind->valuestring, HEALTH_MSG_KIND) == 0) /* every poll period per rank: no event */
        LOG_DEBUG("Received data message : %s", w.err ? "(too long to log)" : line);
    else
        LOG_INFO("Received data message : %s", w.err ? "(too long to log)" : line);
    dr->accepted++;
    struct status_stats stats;
    int32_t stats_pid = 0;
    bool is_stats = strcmp(kind->valuestring, DATAMSG_PLUGIN_STATS) == 0 &&
                    take_stats(dr, msg, sender, &stats, &stats_pid);
    if (strcmp(kind->valuestring, DATAMSG_PLUGIN_INFO) == 0)
        take_info(dr, msg, sender);
    if (strcmp(kind->valuestring, DATAMSG_CONFIG_ACK) == 0) {
        take_ack(dr, msg, sender);
        rc = 0;   /* control traffic: recorded in the registry, not a metric for the sinks */
    } else if (is_stats) {
        rc = emit_stats(dr, dev, dur, ts, &stats, stats_pid, now_ns);
    } else if (strcmp(kind->valuestring, STEPS_KIND) == 0) {
        /* per-rank step summaries: the window for getSteps, one sink record per new step */
        int64_t spid = 0;
        int32_t node = 0;
        if (sender && sender->pid > 0 && cjx_number(cjx_get(msg, "pid"), &spid, NULL, NULL) == CJX_INT &&
            !from_sender(dr, STEPS_KIND, spid, sender, &node))
            rc = 0; /* another process's window is not ours to write */
        else
            if (dr->steps) {
                struct sink out = data_router_sink(dr);
                struct pod_labels pl;
                struct sink_record who = { 0 };
                label_pod(dr, &who, sender ? sender->pid : 0, &pl);
                struct steps_who sw = { sender && sender->pid > 0 ? sender->pid : 0, who.pod, who.pod_namespace,
                                        who.container };
                rc = steps_take(dr->steps, &out, msg, now_ns, clock_mono_ns(), &sw);
            } else {
                rc = 0;
            }
        if (rc < 0)
            rc = 0; /* counted and logged by steps; the payload itself was valid data */
    } else if (strcmp(kind->valuestring, HEALTH_MSG_KIND) == 0) {
        /* status only: a report every poll period per rank is no metric for the loggers */
        take_health(dr, msg, sender, now_ns);
        rc = 0;
    } else if (strcmp(kind->valuestring, DATAMSG_OP_STATS) == 0) {
        rc = emit_opstats(dr, msg, dev, now_ns, sender);
    } else {
        struct sink_kv kv[6];
        size_t n = 0;
        const cJSON *f;
        set_str(&kv[n++], "deviceId", dev, strlen(dev));
        if (is_str(f = cjx_get(msg, "domain")))
            set_str(&kv[n++], "domain", f->valuestring, strlen(f->valuestring));
        set_num(&kv[n++], "duration", dur);
        set_str(&kv[n++], "kind", kind->valuestring, strlen(kind->valuestring));
        if (is_str(f = cjx_get(msg, "name")))
            set_str(&kv[n++], "name", f->valuestring, strlen(f->valuestring));
        set_num(&kv[n++], "timestamp", ts);
        struct sink_record rec = { now_ns, dev, kv, n, SINK_NO_PID, SINK_NO_RANK, SINK_NO_JOB, NULL, NULL, NULL };
        struct pod_labels pl;
        label_sender(dr, &rec, sender, &pl);
        rc = data_router_write(dr, &rec);
    }
    cJSON_Delete(msg);
    return rc;
bad:
    dr->rejected++;
    {
        /* outside text: escaped (no forged lines), cut at 512 bytes, once a second at most */
        static struct log_ratelimit rl;
        char esc[LOGESC_CAP(512)];
        LOG_RL(&rl, 1000, LOG_LVL_ERROR, "Error parsing message = %s",
               logesc(payload, len < 512 ? len : 512, esc, sizeof(esc)));
    }
    cJSON_Delete(msg);
    return -EINVAL;
}
