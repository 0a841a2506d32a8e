/* promfam: sink record -> Prometheus samples, and the store of the latest value per series
 * that /metrics renders and remote write snapshots. Series live in one chained hash keyed by
 * "family\0name\0value\0..." (labels sorted by name); op series carry their report group so a
 * series absent from the latest OpStats report of its (process, device, kind) is removed. */
#include "daemon/sinks/promfam.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "contract/datamsg.h"
#include "contract/kinds.h"
#include "common/utf8.h"

#define OP_CANON "npu_op_total_ns"   /* the family whose series count against the op cap */
#define SCRATCH 16384

/* ---------------------------------------------------------------- HELP table (one place) */
static const struct {
    const char *family;
    const char *help;
} help_table[] = {
    { "cpu_core_util", "utilization percent of one CPU core over the last interval" },
    { "cpu_guest", "CPU time spent running guests, percent over the last interval" },
    { "cpu_guest_ms", "CPU time spent running guests over the last interval, ms" },
    { "cpu_guest_nice", "CPU time spent running niced guests, percent over the last interval" },
    { "cpu_guest_nice_ms", "CPU time spent running niced guests over the last interval, ms" },
    { "cpu_i", "CPU idle percent over the last interval" },
    { "cpu_n_ms", "CPU time in niced user mode over the last interval, ms" },
    { "cpu_s", "CPU system-mode percent over the last interval" },
    { "cpu_s_ms", "CPU time in system mode over the last interval, ms" },
    { "cpu_u", "CPU user-mode percent over the last interval" },
    { "cpu_u_ms", "CPU time in user mode over the last interval, ms" },
    { "cpu_util", "CPU utilization percent over the last interval" },
    { "cpu_w_ms", "CPU time waiting for I/O over the last interval, ms" },
    { "cpu_x_ms", "CPU time servicing interrupts over the last interval, ms" },
    { "cpu_y_ms", "CPU time servicing softirqs over the last interval, ms" },
    { "cpu_z_ms", "CPU time stolen by the hypervisor over the last interval, ms" },
    { "disk_io_ms", "time the disk spent doing I/O over the last interval, ms" },
    { "disk_read_bytes", "bytes read from the disk over the last interval" },
    { "disk_reads", "reads completed by the disk over the last interval" },
    { "disk_util", "disk busy percent over the last interval" },
    { "disk_write_bytes", "bytes written to the disk over the last interval" },
    { "disk_writes", "writes completed by the disk over the last interval" },
    { "load_15m", "load average over 15 minutes" },
    { "load_1m", "load average over 1 minute" },
    { "load_5m", "load average over 5 minutes" },
    { "mem_available_kb", "memory available for new work (MemAvailable), kB" },
    { "mem_buffers_kb", "memory in buffers (Buffers), kB" },
    { "mem_cached_kb", "memory in the page cache (Cached), kB" },
    { "mem_free_kb", "unused memory (MemFree), kB" },
    { "mem_swap_free_kb", "unused swap (SwapFree), kB" },
    { "mem_swap_total_kb", "total swap (SwapTotal), kB" },
    { "mem_total_kb", "total usable memory (MemTotal), kB" },
    { "mem_used_pct", "memory in use, percent of MemTotal (MemTotal - MemAvailable)" },
    { "msmonitor_plugin_before_start", "records of the monitoring session that ended before it started (plugin counter)" },
    { "msmonitor_plugin_bytes_written", "bytes the monitoring session wrote to its outputs (plugin counter)" },
    { "msmonitor_plugin_consumed", "records the monitoring session took from the vendor library (plugin counter)" },
    { "msmonitor_plugin_cpu_ns", "CPU time of the monitoring session's consumer thread, ns (plugin counter)" },
    { "msmonitor_plugin_dropped_declined", "records dropped because an output declined them (plugin counter)" },
    { "msmonitor_plugin_dropped_offline", "metric datagrams dropped while the daemon was away (plugin counter)" },
    { "msmonitor_plugin_dropped_queue", "records dropped from a full queue (plugin counter)" },
    { "msmonitor_plugin_dropped_write", "records lost to write errors (plugin counter)" },
    { "msmonitor_plugin_filtered", "records removed by the session's filter (plugin counter)" },
    { "msmonitor_plugin_kept", "records the session kept after its filter (plugin counter)" },
    { "msmonitor_plugin_written", "records the session wrote to its outputs (plugin counter)" },
    { "msmonitor_prometheus_dropped_series", "new series refused by the series caps since the daemon started" },
    { "msmonitor_prometheus_series", "series held for Prometheus by the daemon" },
    { "msmonitor_remote_write_dropped_samples", "samples dropped by remote write since the daemon started (queue_full: oldest dropped from a full queue; rejected: refused by the receiver with a 4xx)" },
    { "msmonitor_remote_write_queue_bytes", "bytes waiting in the remote-write queue" },
    { "msmonitor_remote_write_queue_samples", "samples waiting in the remote-write queue" },
    { "msmonitor_remote_write_sent_samples", "samples accepted by the remote-write receiver since the daemon started" },
    { "msmonitor_remote_write_up", "1 when the last remote-write request succeeded, else 0" },
    { "msmonitor_step", "newest step number of the rank (docs/cluster.md)" },
    { "msmonitor_step_comm_ns", "communication time in the rank's newest step (wait + transfer), ns" },
    { "msmonitor_step_compute_ns", "kernel time in the rank's newest step, ns" },
    { "msmonitor_step_host_ns", "host-side gaps (no device activity) in the rank's newest step, ns" },
    { "msmonitor_step_memcpy_ns", "memcpy and memset time in the rank's newest step, ns" },
    { "msmonitor_step_transfer_ns", "of the communication: data movement in the rank's newest step, ns" },
    { "msmonitor_step_wait_ns", "of the communication: waiting for the other members in the rank's newest step, ns" },
    { "msmonitor_step_wall_ns", "wall time of the rank's newest step, ns" },
    { "npu_activity_duration_ns", "sum of activity durations of the last report of a kind on a device, ns" },
    { "npu_marker_duration_ns", "duration of the most recent completed marker range, ns" },
    { "npu_op_avg_ns", "average duration of an op over the last report interval, ns" },
    { "npu_op_bytes", "bytes moved or set by an op over the last report interval" },
    { "npu_op_count", "number of executions of an op over the last report interval" },
    { "npu_op_max_ns", "longest execution of an op over the last report interval, ns" },
    { "npu_op_min_ns", "shortest execution of an op over the last report interval, ns" },
    { "npu_op_total_ns", "total duration of an op over the last report interval, ns" },
    { "procs_running", "runnable processes (from /proc/loadavg)" },
    { "procs_total", "processes and threads (from /proc/loadavg)" },
    { "rx_bytes", "bytes received by the interface over the last interval" },
    { "rx_drops", "received packets dropped by the interface over the last interval" },
    { "rx_errors", "receive errors of the interface over the last interval" },
    { "rx_packets", "packets received by the interface over the last interval" },
    { "tx_bytes", "bytes sent by the interface over the last interval" },
    { "tx_drops", "sent packets dropped by the interface over the last interval" },
    { "tx_errors", "send errors of the interface over the last interval" },
    { "tx_packets", "packets sent by the interface over the last interval" },
    { "uptime", "seconds since the host booted" },
};

const char *promfam_help(const char *family, char *buf, size_t cap)
{
    size_t lo = 0, hi = sizeof(help_table) / sizeof(help_table[0]);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(family, help_table[mid].family);
        if (c == 0)
            return help_table[mid].help;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    snprintf(buf, cap, "latest value of %s reported to the daemon", family);
    return buf;
}

/* ---------------------------------------------------------------- formatting pieces */
static bool name_start(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}

static bool name_char(unsigned char c) { return name_start(c) || (c >= '0' && c <= '9'); }

int promfam_sanitize_name(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    if (n == 0 || n > PROMFAM_NAME_MAX || cap < 2)
        return -EINVAL;
    if (!name_start((unsigned char)s[0]))
        out[o++] = '_';
    for (size_t i = 0; i < n; i++) {
        if (o + 1 >= cap)
            return -EINVAL;
        out[o++] = name_char((unsigned char)s[i]) ? s[i] : '_';
    }
    out[o] = '\0';
    return (int)o;
}

int promfam_format_value(double v, char *out, size_t cap)
{
    if (isnan(v))
        return snprintf(out, cap, "NaN");
    if (isinf(v))
        return snprintf(out, cap, v > 0 ? "+Inf" : "-Inf");
    /* integers print exactly as %.17g would, without the cost of snprintf's float path */
    if (v == floor(v) && fabs(v) < 9007199254740992.0) {
        char tmp[24];
        int n = 0, o = 0;
        int64_t x = (int64_t)v;
        uint64_t u = x < 0 ? (uint64_t)(-x) : (uint64_t)x;
        do {
            tmp[n++] = (char)('0' + u % 10);
            u /= 10;
        } while (u);
        if ((size_t)n + 2 > cap)
            return snprintf(out, cap, "%.17g", v);
        if (x < 0 || (x == 0 && signbit(v)))
            out[o++] = '-';
        while (n)
            out[o++] = tmp[--n];
        out[o] = '\0';
        return o;
    }
    return snprintf(out, cap, "%.17g", v);
}

/* ---------------------------------------------------------------- record mapping */
struct scratch {
    char buf[SCRATCH];
    size_t used;
};

/* A NUL-terminated copy of s[0..n) that is valid UTF-8 (invalid bytes become '?') and at
 * most PROMFAM_VALUE_MAX bytes; Prometheus refuses a whole write request over one bad label. */
static const char *sc_text(struct scratch *sc, const char *s, size_t n)
{
    char *o = sc->buf + sc->used;
    size_t room = SCRATCH - sc->used, k = 0;
    n = utf8_cut(s, n, PROMFAM_VALUE_MAX);
    if (room < 2)
        return "";
    for (size_t i = 0; i < n && k + 5 < room;) {
        size_t l = utf8_seq_len((const unsigned char *)s + i, n - i);
        if (l == 0 || (l == 1 && s[i] == '\0')) {
            o[k++] = '?';
            i++;
            continue;
        }
        memcpy(o + k, s + i, l);
        k += l;
        i += l;
    }
    o[k] = '\0';
    sc->used += k + 1;
    return o;
}

static const struct sink_kv *kv_get(const struct sink_record *rec, const char *key)
{
    for (size_t i = 0; i < rec->n; i++)
        if (strcmp(rec->kv[i].key, key) == 0)
            return &rec->kv[i];
    return NULL;
}

static bool kv_num(const struct sink_kv *kv, double *v)
{
    if (!kv)
        return false;
    switch (kv->type) {
    case SINK_INT: *v = (double)kv->i; return true;
    case SINK_UINT: *v = (double)kv->u; return true;
    case SINK_DOUBLE: *v = kv->d; return true;
    case SINK_STR: return false;
    }
    return false;
}

static bool kv_u64(const struct sink_kv *kv, uint64_t *v)
{
    if (!kv)
        return false;
    if (kv->type == SINK_UINT) {
        *v = kv->u;
        return true;
    }
    if (kv->type == SINK_INT && kv->i >= 0) {
        *v = (uint64_t)kv->i;
        return true;
    }
    return false;
}

static bool kv_is(const struct sink_kv *kv, const char *s)
{
    size_t n = strlen(s);
    return kv && kv->type == SINK_STR && kv->slen == n && memcmp(kv->s, s, n) == 0;
}

/* What the store needs beyond the samples: op records belong to a report group. */
struct map_info {
    bool op;
    uint64_t report_ts;
    char group[512];
};

struct labels {
    struct promfam_label l[PROMFAM_MAX_LABELS];
    size_t n;
};

static void lab_add(struct labels *ls, const char *name, const char *value)
{
    size_t j;
    if (ls->n >= PROMFAM_MAX_LABELS)
        return;
    /* insertion keeps them sorted by name */
    for (j = ls->n; j > 0 && strcmp(ls->l[j - 1].name, name) > 0; j--)
        ls->l[j] = ls->l[j - 1];
    ls->l[j].name = name;
    ls->l[j].value = value;
    ls->n++;
}

/* host_name, device, job/pid/rank and pod/namespace/container where known */
static void lab_common(struct labels *ls, struct scratch *sc, const struct sink_record *rec,
                       const char *host)
{
    char num[32];
    lab_add(ls, "host_name", host);
    if (rec->device)
        lab_add(ls, "device", sc_text(sc, rec->device, strlen(rec->device)));
    if (rec->job != SINK_NO_JOB) {
        snprintf(num, sizeof(num), "%" PRId64, rec->job);
        lab_add(ls, "job", sc_text(sc, num, strlen(num)));
    }
    if (rec->pid != SINK_NO_PID) {
        snprintf(num, sizeof(num), "%" PRId32, rec->pid);
        lab_add(ls, "pid", sc_text(sc, num, strlen(num)));
    }
    if (rec->rank != SINK_NO_RANK) {
        snprintf(num, sizeof(num), "%" PRId32, rec->rank);
        lab_add(ls, "rank", sc_text(sc, num, strlen(num)));
    }
    /* where the sender runs, as it reported it (docs/prometheus.md#labels): validated names,
     * capped like every label value */
    if (rec->pod)
        lab_add(ls, "pod", sc_text(sc, rec->pod, strlen(rec->pod)));
    if (rec->pod_namespace)
        lab_add(ls, "namespace", sc_text(sc, rec->pod_namespace, strlen(rec->pod_namespace)));
    if (rec->container)
        lab_add(ls, "container", sc_text(sc, rec->container, strlen(rec->container)));
}

static int emit(promfam_emit_fn fn, void *arg, const char *family, const struct labels *ls, double v)
{
    struct promfam_sample s = { family, ls->l, ls->n, v };
    fn(arg, &s);
    return 1;
}

/* The entity label of "<metric>.<entity>" keys (docs/design/daemon.md#prometheus-endpoint): net for rx_/tx_, disk for disk_,
 * cpu for per-core CPU keys, else entity. */
static const char *entity_label(const char *metric)
{
    if (strncmp(metric, "rx_", 3) == 0 || strncmp(metric, "tx_", 3) == 0)
        return "net";
    if (strncmp(metric, "disk_", 5) == 0)
        return "disk";
    if (strncmp(metric, "cpu", 3) == 0 || strncmp(metric, "core", 4) == 0)
        return "cpu";
    return "entity";
}

/* Host metrics and any record without a kind: each numeric key is one family. */
static int map_flat(const struct sink_record *rec, const char *host, promfam_emit_fn fn, void *arg,
                    struct scratch *sc)
{
    int n = 0;
    for (size_t i = 0; i < rec->n; i++) {
        const struct sink_kv *kv = &rec->kv[i];
        double v;
        char fam[PROMFAM_NAME_MAX + 2];
        struct labels ls = { .n = 0 };
        size_t save = sc->used;
        if (!kv_num(kv, &v) || strcmp(kv->key, "timestamp") == 0)
            continue;
        const char *dot = strchr(kv->key, '.');
        size_t mlen = dot ? (size_t)(dot - kv->key) : strlen(kv->key);
        if (promfam_sanitize_name(kv->key, mlen, fam, sizeof(fam)) < 0)
            continue;
        lab_common(&ls, sc, rec, host);
        if (dot && dot[1])
            lab_add(&ls, entity_label(fam), sc_text(sc, dot + 1, strlen(dot + 1)));
        n += emit(fn, arg, fam, &ls, v);
        sc->used = save;
    }
    return n;
}

static int map_opstats(const struct sink_record *rec, const char *host, promfam_emit_fn fn, void *arg,
                       struct scratch *sc, struct map_info *mi)
{
    static const struct {
        const char *key, *family;
    } fams[] = { { "total", OP_CANON }, { "count", "npu_op_count" }, { "min", "npu_op_min_ns" },
                 { "max", "npu_op_max_ns" }, { "avg", "npu_op_avg_ns" }, { "bytes", "npu_op_bytes" } };
    const struct sink_kv *act = kv_get(rec, "activity"), *name = kv_get(rec, "name");
    const struct sink_kv *dom = kv_get(rec, "domain");
    struct labels ls = { .n = 0 };
    double v;
    int n = 0;
    if (!act || act->type != SINK_STR || !name || name->type != SINK_STR ||
        !kv_num(kv_get(rec, "total"), &v))
        return 0;
    lab_common(&ls, sc, rec, host);
    const char *kind = sc_text(sc, act->s, act->slen);
    lab_add(&ls, "kind", kind);
    lab_add(&ls, "name", sc_text(sc, name->s, name->slen));
    if (dom && dom->type == SINK_STR)
        lab_add(&ls, "domain", sc_text(sc, dom->s, dom->slen));
    if (mi) {
        mi->op = true;
        if (!kv_u64(kv_get(rec, "timestamp"), &mi->report_ts))
            mi->report_ts = rec->time_ns;
        snprintf(mi->group, sizeof(mi->group), "%" PRId32 "/%" PRId32 "/%" PRId64 "/%s/%s", rec->pid,
                 rec->rank, rec->job, rec->device ? rec->device : "", kind);
    }
    for (size_t i = 0; i < sizeof(fams) / sizeof(fams[0]); i++)
        if (kv_num(kv_get(rec, fams[i].key), &v))
            n += emit(fn, arg, fams[i].family, &ls, v);
    return n;
}

/* PluginStats (the plugin's per-session counters, pid and job known): one
 * msmonitor_plugin_<counter> family per counter key. */
static int map_pluginstats(const struct sink_record *rec, const char *host, promfam_emit_fn fn, void *arg,
                           struct scratch *sc)
{
    struct labels ls = { .n = 0 };
    int n = 0;
    lab_common(&ls, sc, rec, host);
    for (size_t i = 0; i < rec->n; i++) {
        const struct sink_kv *kv = &rec->kv[i];
        char fam[PROMFAM_NAME_MAX + 32];
        double v;
        if (!sink_is_stats_counter(kv->key) || !kv_num(kv, &v) || strlen(kv->key) > PROMFAM_NAME_MAX - 20)
            continue;
        snprintf(fam, sizeof(fam), "msmonitor_plugin_%s", kv->key);
        char clean[PROMFAM_NAME_MAX + 32];
        if (promfam_sanitize_name(fam, strlen(fam), clean, sizeof(clean)) < 0)
            continue;
        n += emit(fn, arg, clean, &ls, v);
    }
    return n;
}

static int map_record(const struct sink_record *rec, const char *host, promfam_emit_fn fn, void *arg,
                      struct map_info *mi)
{
    struct scratch *sc = malloc(sizeof(*sc));
    const struct sink_kv *kind = kv_get(rec, "kind");
    struct labels ls = { .n = 0 };
    double dur;
    int n = 0;
    if (!sc)
        return -ENOMEM;
    sc->used = 0;
    if (mi)
        mi->op = false;
    if (!kind) {
        n = map_flat(rec, host, fn, arg, sc);
    } else if (kv_is(kind, DATAMSG_OP_STATS)) {
        n = map_opstats(rec, host, fn, arg, sc, mi);
    } else if (kv_is(kind, DATAMSG_PLUGIN_STATS)) {
        n = map_pluginstats(rec, host, fn, arg, sc);
    } else if (kind->type == SINK_STR && kinds_from_name(kind->s, kind->slen) >= 0 &&
               kv_num(kv_get(rec, "duration"), &dur)) {
        lab_common(&ls, sc, rec, host);
        if (kv_is(kind, "Marker")) {
            const struct sink_kv *dom = kv_get(rec, "domain");
            lab_add(&ls, "domain", dom && dom->type == SINK_STR && dom->slen ? sc_text(sc, dom->s, dom->slen)
                                                                              : "default");
            n = emit(fn, arg, "npu_marker_duration_ns", &ls, dur);
        } else {
            lab_add(&ls, "kind", sc_text(sc, kind->s, kind->slen));
            n = emit(fn, arg, "npu_activity_duration_ns", &ls, dur);
        }
    }
    /* PluginInfo and kinds outside the 11 are not exported */
    free(sc);
    return n;
}

int promfam_map(const struct sink_record *rec, const char *host, promfam_emit_fn fn, void *arg)
{
    return map_record(rec, host, fn, arg, NULL);
}

/* ---------------------------------------------------------------- the store */
struct group {
    struct group *next;
    char *key;
    uint64_t latest;      /* report timestamp of the latest OpStats report seen */
};

struct series {
    struct series *next;
    uint64_t hash;
    char *key;            /* family \0 (name \0 value \0)* */
    size_t keylen;
    size_t famlen;
    double value;
    uint64_t updated_ms;
    struct group *group;  /* op series only */
    uint64_t report_ts;
};

struct promfam_store {
    pthread_mutex_t mu;
    char *host;
    uint64_t stale_ms;
    struct series **buckets;
    size_t nbuckets;
    size_t nseries;
    size_t nops;          /* live series of OP_CANON */
    size_t nother;
    struct group *groups;
    size_t ngroups;
    uint64_t dropped, removed;
    bool warned_ops, warned_other;
    uint64_t version;     /* bumped by every change; the render cache checks it */
    char *cache;
    size_t cache_len;
    uint64_t cache_version;
    struct sink_ops ops;  /* store_ops under the name main gave it */
};

static uint64_t fnv(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

int promfam_store_create(const char *host, uint64_t stale_ms, struct promfam_store **ret)
{
    struct promfam_store *st = calloc(1, sizeof(*st));
    *ret = NULL;
    if (!st)
        return -ENOMEM;
    st->nbuckets = 1024;
    st->buckets = calloc(st->nbuckets, sizeof(*st->buckets));
    st->host = strdup(host ? host : "");
    if (!st->buckets || !st->host) {
        free(st->buckets);
        free(st->host);
        free(st);
        return -ENOMEM;
    }
    st->stale_ms = stale_ms;
    pthread_mutex_init(&st->mu, NULL);
    *ret = st;
    return 0;
}

void promfam_store_destroy(struct promfam_store *st)
{
    if (!st)
        return;
    for (size_t b = 0; b < st->nbuckets; b++) {
        for (struct series *s = st->buckets[b], *nx; s; s = nx) {
            nx = s->next;
            free(s->key);
            free(s);
        }
    }
    for (struct group *g = st->groups, *nx; g; g = nx) {
        nx = g->next;
        free(g->key);
        free(g);
    }
    pthread_mutex_destroy(&st->mu);
    free(st->buckets);
    free(st->cache);
    free(st->host);
    free(st);
}

static void grow(struct promfam_store *st)
{
    size_t nb = st->nbuckets * 2;
    struct series **b = calloc(nb, sizeof(*b));
    if (!b)
        return; /* longer chains, still correct */
    for (size_t i = 0; i < st->nbuckets; i++) {
        for (struct series *s = st->buckets[i], *nx; s; s = nx) {
            nx = s->next;
            s->next = b[s->hash & (nb - 1)];
            b[s->hash & (nb - 1)] = s;
        }
    }
    free(st->buckets);
    st->buckets = b;
    st->nbuckets = nb;
}

static struct group *group_get(struct promfam_store *st, const char *key)
{
    for (struct group *g = st->groups; g; g = g->next)
        if (strcmp(g->key, key) == 0)
            return g;
    if (st->ngroups >= 4096)
        return NULL;
    struct group *g = calloc(1, sizeof(*g));
    if (!g || !(g->key = strdup(key))) {
        free(g);
        return NULL;
    }
    g->next = st->groups;
    st->groups = g;
    st->ngroups++;
    return g;
}

/* key = family \0 labels; returns its length or -ENOSPC */
static long build_key(const char *family, const struct promfam_label *l, size_t n, char *out, size_t cap)
{
    size_t o = 0, fl = strlen(family);
    if (fl + 1 > cap)
        return -ENOSPC;
    memcpy(out, family, fl + 1);
    o = fl + 1;
    for (size_t i = 0; i < n; i++) {
        size_t a = strlen(l[i].name) + 1, b = strlen(l[i].value) + 1;
        if (o + a + b > cap)
            return -ENOSPC;
        memcpy(out + o, l[i].name, a);
        o += a;
        memcpy(out + o, l[i].value, b);
        o += b;
    }
    return (long)o;
}

static struct series **find(struct promfam_store *st, const char *key, size_t len, uint64_t h)
{
    struct series **pp = &st->buckets[h & (st->nbuckets - 1)];
    for (; *pp; pp = &(*pp)->next)
        if ((*pp)->hash == h && (*pp)->keylen == len && memcmp((*pp)->key, key, len) == 0)
            return pp;
    return pp;
}

static void unlink_series(struct promfam_store *st, struct series **pp)
{
    struct series *s = *pp;
    *pp = s->next;
    if (s->group) {
        if (s->famlen == sizeof(OP_CANON) - 1 && memcmp(s->key, OP_CANON, s->famlen) == 0)
            st->nops--;
    } else {
        st->nother--;
    }
    st->nseries--;
    st->removed++;
    st->version++;
    free(s->key);
    free(s);
}

struct put_ctx {
    struct promfam_store *st;
    const struct map_info *mi;
    struct group *group;
    uint64_t now_ms;
    bool refused;          /* an op record whose op series the cap refused: skip all of it */
    int rc;
};

static void put(void *arg, const struct promfam_sample *smp)
{
    struct put_ctx *c = arg;
    struct promfam_store *st = c->st;
    char key[PROMFAM_MAX_LABELS * (PROMFAM_VALUE_MAX + 64) + PROMFAM_NAME_MAX + 16]; /* every label at its cap */
    long len;
    if (c->mi && c->mi->op && !c->group && !c->refused) {
        /* the first sample of an op record: resolve its report group; a report older than
         * the group's latest is late and ignored, a newer one retires the previous report */
        c->group = group_get(st, c->mi->group);
        if (!c->group) {
            c->refused = true;
            st->dropped++;
        } else if (c->mi->report_ts < c->group->latest) {
            c->refused = true;
        } else if (c->mi->report_ts > c->group->latest) {
            c->group->latest = c->mi->report_ts;
            st->version++;
        }
    }
    if (c->refused)
        return;
    len = build_key(smp->family, smp->labels, smp->nlabels, key, sizeof(key));
    if (len < 0)
        return;
    uint64_t h = fnv(key, (size_t)len);
    struct series **pp = find(st, key, (size_t)len, h);
    struct series *s = *pp;
    bool op = c->group != NULL, isnew = !s;
    if (!s) {
        bool canon = op && strcmp(smp->family, OP_CANON) == 0;
        if (canon && st->nops >= PROMFAM_MAX_OP_SERIES) {
            c->refused = true;
            st->dropped++;
            if (!st->warned_ops)
                LOG_WARN("prometheus: %d op series reached; new op series are dropped (counted in "
                         "msmonitor_prometheus_dropped_series)", PROMFAM_MAX_OP_SERIES);
            st->warned_ops = true;
            return;
        }
        if (!op && st->nother >= PROMFAM_MAX_SERIES) {
            st->dropped++;
            if (!st->warned_other)
                LOG_WARN("prometheus: %d series reached; new series are dropped (counted in "
                         "msmonitor_prometheus_dropped_series)", PROMFAM_MAX_SERIES);
            st->warned_other = true;
            return;
        }
        s = calloc(1, sizeof(*s));
        if (!s || !(s->key = malloc((size_t)len))) {
            free(s);
            c->rc = -ENOMEM;
            return;
        }
        memcpy(s->key, key, (size_t)len);
        s->keylen = (size_t)len;
        s->famlen = strlen(smp->family);
        s->hash = h;
        s->group = c->group;
        s->next = st->buckets[h & (st->nbuckets - 1)];
        st->buckets[h & (st->nbuckets - 1)] = s;
        st->nseries++;
        if (canon)
            st->nops++;
        if (!op)
            st->nother++;
        if (st->nseries > 2 * st->nbuckets)
            grow(st);
    }
    /* the render cache stays valid while values repeat (the daemon's own counters do) */
    if (isnew || memcmp(&s->value, &smp->value, sizeof(double)) != 0)
        st->version++;
    s->value = smp->value;
    s->updated_ms = c->now_ms;
    if (op)
        s->report_ts = c->mi->report_ts;
}

int promfam_store_write(struct promfam_store *st, const struct sink_record *rec, uint64_t now_ms)
{
    struct map_info mi;
    struct put_ctx c = { st, &mi, NULL, now_ms, false, 0 };
    int n;
    pthread_mutex_lock(&st->mu);
    /* map_record fills mi (op record? which group?) before it emits the first sample */
    n = map_record(rec, st->host, put, &c, &mi);
    pthread_mutex_unlock(&st->mu);
    return n < 0 ? n : c.rc;
}

int promfam_store_set(struct promfam_store *st, const char *family, const struct promfam_label *labels,
                      size_t nlabels, double value, uint64_t now_ms)
{
    struct labels ls = { .n = 0 };
    struct put_ctx c = { st, NULL, NULL, now_ms, false, 0 };
    char fam[PROMFAM_NAME_MAX + 2];
    if (promfam_sanitize_name(family, strlen(family), fam, sizeof(fam)) < 0)
        return -EINVAL;
    pthread_mutex_lock(&st->mu);
    lab_add(&ls, "host_name", st->host);
    for (size_t i = 0; i < nlabels; i++)
        lab_add(&ls, labels[i].name, labels[i].value);
    struct promfam_sample s = { fam, ls.l, ls.n, value };
    put(&c, &s);
    pthread_mutex_unlock(&st->mu);
    return c.rc;
}

static int st_write(void *self, const struct sink_record *rec)
{
    struct promfam_store *st = self;
    return promfam_store_write(st, rec, clock_real_ns() / 1000000u);
}

static void st_flush(void *self) { (void)self; }
static void st_destroy(void *self) { (void)self; }

static const struct sink_ops store_ops = { "prometheus", st_write, st_flush, st_destroy };

struct sink promfam_store_sink(struct promfam_store *st, const char *name)
{
    st->ops = store_ops;
    st->ops.name = name;
    return (struct sink){ &st->ops, st };
}

/* Remove op series absent from their group's latest report and stale plain series. */
static void sweep(struct promfam_store *st, uint64_t now_ms)
{
    for (size_t b = 0; b < st->nbuckets; b++) {
        struct series **pp = &st->buckets[b];
        while (*pp) {
            struct series *s = *pp;
            bool dead = s->group ? s->report_ts < s->group->latest
                                 : (st->stale_ms && now_ms > s->updated_ms + st->stale_ms);
            if (dead)
                unlink_series(st, pp);
            else
                pp = &s->next;
        }
    }
}

static int cmp_series(const void *a, const void *b)
{
    const struct series *x = *(const struct series *const *)a, *y = *(const struct series *const *)b;
    size_t n = x->keylen < y->keylen ? x->keylen : y->keylen;
    int c = memcmp(x->key, y->key, n);
    if (c)
        return c;
    return x->keylen < y->keylen ? -1 : x->keylen > y->keylen;
}

struct obuf {
    char *p;
    size_t len, cap;
    int err;
};

static void ob_need(struct obuf *o, size_t n)
{
    if (o->err || o->len + n <= o->cap)
        return;
    size_t nc = o->cap ? o->cap : 65536;
    while (nc < o->len + n)
        nc *= 2;
    char *np = realloc(o->p, nc);
    if (!np) {
        o->err = -ENOMEM;
        return;
    }
    o->p = np;
    o->cap = nc;
}

static void ob_put(struct obuf *o, const char *s, size_t n)
{
    if (n == 0)
        return;
    ob_need(o, n);
    if (o->err)
        return;
    memcpy(o->p + o->len, s, n);
    o->len += n;
}

/* escape: label values \\ \" \n; HELP text \\ \n */
static void ob_escaped(struct obuf *o, const char *s, bool quote)
{
    ob_need(o, 2 * strlen(s));
    for (; *s && !o->err; s++) {
        if (*s == '\\')
            ob_put(o, "\\\\", 2);
        else if (*s == '\n')
            ob_put(o, "\\n", 2);
        else if (quote && *s == '"')
            ob_put(o, "\\\"", 2);
        else
            o->p[o->len++] = *s;
    }
}

static struct series **collect(struct promfam_store *st, size_t *ret_n)
{
    struct series **v = malloc((st->nseries ? st->nseries : 1) * sizeof(*v));
    size_t n = 0;
    if (!v)
        return NULL;
    for (size_t b = 0; b < st->nbuckets; b++)
        for (struct series *s = st->buckets[b]; s; s = s->next)
            v[n++] = s;
    *ret_n = n;
    return v;
}

int promfam_store_render(struct promfam_store *st, uint64_t now_ms, char **ret_text, size_t *ret_len)
{
    struct obuf o = { 0 };
    size_t n = 0;
    int rc = 0;
    *ret_text = NULL;
    *ret_len = 0;
    pthread_mutex_lock(&st->mu);
    sweep(st, now_ms);
    if (st->cache && st->cache_version == st->version) {
        ob_put(&o, st->cache, st->cache_len);
        goto out;
    }
    struct series **v = collect(st, &n);
    if (!v) {
        rc = -ENOMEM;
        goto out;
    }
    qsort(v, n, sizeof(*v), cmp_series);
    const char *prev = NULL;
    size_t prevlen = 0;
    for (size_t i = 0; i < n && !o.err; i++) {
        struct series *s = v[i];
        char hb[256], num[40];
        if (!prev || prevlen != s->famlen || memcmp(prev, s->key, s->famlen) != 0) {
            ob_put(&o, "# HELP ", 7);
            ob_put(&o, s->key, s->famlen);
            ob_put(&o, " ", 1);
            ob_escaped(&o, promfam_help(s->key, hb, sizeof(hb)), false);
            ob_put(&o, "\n# TYPE ", 8);
            ob_put(&o, s->key, s->famlen);
            ob_put(&o, " gauge\n", 7);
            prev = s->key;
            prevlen = s->famlen;
        }
        ob_put(&o, s->key, s->famlen);
        const char *p = s->key + s->famlen + 1, *end = s->key + s->keylen;
        bool first = true;
        while (p < end) {
            const char *name = p, *val = p + strlen(p) + 1;
            ob_put(&o, first ? "{" : ",", 1);
            ob_put(&o, name, strlen(name));
            ob_put(&o, "=\"", 2);
            ob_escaped(&o, val, true);
            ob_put(&o, "\"", 1);
            first = false;
            p = val + strlen(val) + 1;
        }
        if (!first)
            ob_put(&o, "}", 1);
        int k = promfam_format_value(s->value, num + 1, sizeof(num) - 2);
        num[0] = ' ';
        num[k + 1] = '\n';
        ob_put(&o, num, (size_t)k + 2);
    }
    free(v);
    if (!o.err) {
        char *c = malloc(o.len ? o.len : 1);
        if (c) {
            if (o.len)
                memcpy(c, o.p, o.len);
            free(st->cache);
            st->cache = c;
            st->cache_len = o.len;
            st->cache_version = st->version;
        }
    }
out:
    pthread_mutex_unlock(&st->mu);
    if (o.err || rc) {
        free(o.p);
        return rc ? rc : o.err;
    }
    ob_put(&o, "", 1); /* NUL-terminated for callers that treat it as a string */
    if (o.err) {
        free(o.p);
        return o.err;
    }
    *ret_text = o.p;
    o.len--;
    *ret_len = o.len;
    return 0;
}

long promfam_store_each(struct promfam_store *st, uint64_t now_ms, promfam_emit_fn fn, void *arg)
{
    long n = 0;
    pthread_mutex_lock(&st->mu);
    sweep(st, now_ms);
    for (size_t b = 0; b < st->nbuckets; b++) {
        for (struct series *s = st->buckets[b]; s; s = s->next) {
            struct promfam_label l[PROMFAM_MAX_LABELS];
            size_t nl = 0;
            const char *p = s->key + s->famlen + 1, *end = s->key + s->keylen;
            while (p < end && nl < PROMFAM_MAX_LABELS) {
                l[nl].name = p;
                l[nl].value = p + strlen(p) + 1;
                p = l[nl].value + strlen(l[nl].value) + 1;
                nl++;
            }
            struct promfam_sample smp = { s->key, l, nl, s->value };
            fn(arg, &smp);
            n++;
        }
    }
    pthread_mutex_unlock(&st->mu);
    return n;
}

void promfam_store_stats(struct promfam_store *st, struct promfam_stats *ret)
{
    pthread_mutex_lock(&st->mu);
    ret->series = st->nseries;
    ret->op_series = st->nops;
    ret->dropped_series = st->dropped;
    ret->removed_series = st->removed;
    pthread_mutex_unlock(&st->mu);
}

void promfam_store_publish(struct promfam_store *st, uint64_t now_ms)
{
    struct promfam_stats s;
    promfam_store_stats(st, &s);
    promfam_store_set(st, "msmonitor_prometheus_series", NULL, 0, (double)s.series, now_ms);
    promfam_store_set(st, "msmonitor_prometheus_dropped_series", NULL, 0, (double)s.dropped_series, now_ms);
}
