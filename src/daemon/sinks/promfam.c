/* promfam: sink record -> Prometheus samples, and the store of the latest value per series
 * that /metrics renders and remote write snapshots. Series live in one chained hash keyed by
 * "family\0name\0value\0..." (labels sorted by name); op series carry their report group so a
 * series absent from the latest OpStats report of its (process, device, kind) is removed.
 * Names come from the monitored processes, so the series each process (and all of them) may
 * create are bounded; the rest is folded into <other> series and counted. */
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
    { "msmonitor_prometheus_folded_samples", "samples folded into <other> series since the daemon started, at the bound of series per process (cap=process) or of all processes (cap=daemon)" },
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
    uint64_t latest_ms;   /* wall ms when that report's first datagram came */
    uint64_t period_ms;   /* between the last two reports, 0 until known: op series expire
                             after max(stale_ms, 3 periods) without an update (an exited
                             process reports no newer report that would remove them) */
    size_t nlive;         /* its process series counted from the latest report */
};

/* The series one monitored process holds (docs/prometheus.md#bounds), by the pid the kernel
 * vouched for; pid 0 stands for every process it could not name (--noipc_peer_pid_check). */
struct proc_acct {
    struct proc_acct *next;
    int32_t pid;
    size_t n;             /* own series counted against max_proc */
    size_t refs;          /* series (own and <other>) pointing here, and a record in flight */
    uint64_t op_latest;   /* its newest OpStats report: older <other> op series are gone */
    bool warned;          /* its bound was reported (once per account) */
};

enum fold { FOLD_NONE, FOLD_PROCESS, FOLD_DAEMON };

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
    struct proc_acct *proc; /* a monitored process's series (its own or its <other>) */
    uint8_t fold;         /* enum fold: an <other> series of one process or of all of them */
    bool fold_op;         /* an <other> op series: it aggregates one report at a time */
    double agg_total, agg_count; /* <other> npu_op_avg_ns: sums of the report so far */
};

#define PROC_BUCKETS 1024

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
    uint64_t version;     /* bumped by every change: a page reader can tell whether to render */
    /* the bounds on what monitored processes may create (docs/prometheus.md#bounds) */
    size_t max_proc, max_total;
    size_t nproc;         /* counted against max_total: own process series and process <other>s */
    struct proc_acct *accts[PROC_BUCKETS];
    uint64_t folded[2];   /* samples folded at the process bound, at the daemon bound */
    uint64_t procs_folded; /* processes that reached their bound */
    bool daemon_full;     /* the daemon bound was reached and not left since (logged each way) */
    struct log_ratelimit rl_proc;
    /* a render formats outside the lock: series unlinked meanwhile wait in grave */
    unsigned pins;
    struct series *grave;
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
    st->max_proc = PROMFAM_DEF_MAX_SERIES_PER_PROCESS;
    st->max_total = PROMFAM_DEF_MAX_SERIES;
    pthread_mutex_init(&st->mu, NULL);
    *ret = st;
    return 0;
}

static void free_series(struct series *s)
{
    free(s->key);
    free(s);
}

void promfam_store_destroy(struct promfam_store *st)
{
    if (!st)
        return;
    if (st->folded[0] || st->folded[1])
        LOG_INFO("prometheus: folded %llu samples into <other> series at --prometheus_max_series_per_process "
                 "(processes at it: %llu) and %llu at --prometheus_max_series",
                 (unsigned long long)st->folded[0], (unsigned long long)st->procs_folded,
                 (unsigned long long)st->folded[1]);
    for (size_t b = 0; b < st->nbuckets; b++) {
        for (struct series *s = st->buckets[b], *nx; s; s = nx) {
            nx = s->next;
            free_series(s);
        }
    }
    for (struct series *s = st->grave, *nx; s; s = nx) {
        nx = s->next;
        free_series(s);
    }
    for (struct group *g = st->groups, *nx; g; g = nx) {
        nx = g->next;
        free(g->key);
        free(g);
    }
    for (size_t b = 0; b < PROC_BUCKETS; b++) {
        for (struct proc_acct *a = st->accts[b], *nx; a; a = nx) {
            nx = a->next;
            free(a);
        }
    }
    pthread_mutex_destroy(&st->mu);
    free(st->buckets);
    free(st->host);
    free(st);
}

void promfam_store_set_limits(struct promfam_store *st, size_t per_process, size_t total)
{
    pthread_mutex_lock(&st->mu);
    st->max_proc = per_process ? per_process : 1;
    st->max_total = total ? total : 1;
    pthread_mutex_unlock(&st->mu);
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

/* ---------------------------------------------------------------- per-process accounts */
static struct proc_acct **acct_slot(struct promfam_store *st, int32_t pid)
{
    return &st->accts[(uint32_t)pid % PROC_BUCKETS];
}

/* The account of pid, created on first use; NULL when out of memory. */
static struct proc_acct *acct_get(struct promfam_store *st, int32_t pid)
{
    struct proc_acct **slot = acct_slot(st, pid);
    for (struct proc_acct *a = *slot; a; a = a->next)
        if (a->pid == pid)
            return a;
    struct proc_acct *a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    a->pid = pid;
    a->next = *slot;
    *slot = a;
    return a;
}

/* Drop one reference; the account goes with its last series. */
static void acct_unref(struct promfam_store *st, struct proc_acct *a)
{
    if (--a->refs > 0)
        return;
    for (struct proc_acct **pp = acct_slot(st, a->pid); *pp; pp = &(*pp)->next) {
        if (*pp == a) {
            *pp = a->next;
            free(a);
            return;
        }
    }
}

/* An own series of a process counts against both bounds while it is live: an op series only
 * while it belongs to its group's latest report (an older one is removed at the next sweep
 * and must not keep the process's newer names out meanwhile). */
static bool counted(const struct series *s)
{
    return s->proc && s->fold == FOLD_NONE && (!s->group || s->report_ts == s->group->latest);
}

static void uncount(struct promfam_store *st, struct series *s)
{
    if (counted(s)) {
        s->proc->n--;
        st->nproc--;
        if (s->group)
            s->group->nlive--;
    } else if (s->fold == FOLD_PROCESS) {
        st->nproc--;
    }
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
    if (s->proc) {
        uncount(st, s);
        acct_unref(st, s->proc);
        s->proc = NULL;
    }
    st->nseries--;
    st->removed++;
    st->version++;
    if (st->pins) {
        s->next = st->grave;  /* a render still reads its key */
        st->grave = s;
    } else {
        free_series(s);
    }
}

/* A new series with key[0..len) and hash h, linked in; NULL when out of memory. */
static struct series *series_new(struct promfam_store *st, const char *key, size_t len, uint64_t h,
                                 const char *family)
{
    struct series *s = calloc(1, sizeof(*s));
    if (!s || !(s->key = malloc(len))) {
        free(s);
        return NULL;
    }
    memcpy(s->key, key, len);
    s->keylen = len;
    s->famlen = strlen(family);
    s->hash = h;
    s->next = st->buckets[h & (st->nbuckets - 1)];
    st->buckets[h & (st->nbuckets - 1)] = s;
    st->nseries++;
    return s;
}

struct put_ctx {
    struct promfam_store *st;
    const struct map_info *mi;
    const struct sink_record *rec;  /* NULL for the daemon's own series */
    struct proc_acct *proc;  /* the sending process's account: a record with a device */
    struct group *group;
    uint64_t now_ms;
    bool refused;          /* an op record whose op series the cap refused: skip all of it */
    int level;             /* enum fold for the record's new series; -1 until one needs it */
    int rc;
};

/* ---------------------------------------------------------------- <other> series */
/* Labels an <other> series keeps: who the process is (one series per family and process),
 * or only the host at the daemon bound (one per family for all processes together). */
static bool fold_keeps(int level, const char *label)
{
    if (strcmp(label, "host_name") == 0)
        return true;
    /* the pod labels say who the process is too (docs/prometheus.md#labels) */
    return level == FOLD_PROCESS &&
           (strcmp(label, "job") == 0 || strcmp(label, "pid") == 0 || strcmp(label, "rank") == 0 ||
            strcmp(label, "pod") == 0 || strcmp(label, "namespace") == 0 || strcmp(label, "container") == 0);
}

enum combine { COMB_LAST, COMB_SUM, COMB_MIN, COMB_MAX, COMB_AVG };

/* How the samples folded into an <other> op series of one report add up; everything else
 * keeps the latest value, as its own series would. */
static enum combine combine_of(const char *family)
{
    static const struct {
        const char *family;
        enum combine how;
    } t[] = { { "npu_op_avg_ns", COMB_AVG },   { "npu_op_bytes", COMB_SUM },  { "npu_op_count", COMB_SUM },
              { "npu_op_max_ns", COMB_MAX },   { "npu_op_min_ns", COMB_MIN }, { OP_CANON, COMB_SUM } };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        if (strcmp(family, t[i].family) == 0)
            return t[i].how;
    return COMB_LAST;
}

static void fold_value(struct put_ctx *c, struct series *s, const struct promfam_sample *smp, bool isnew)
{
    double v = smp->value, old = s->value;
    if (s->fold_op && c->mi && c->mi->op) {
        uint64_t ts = c->mi->report_ts;
        if (!isnew && ts < s->report_ts)
            return;        /* a late datagram of an older report */
        bool fresh = isnew || ts > s->report_ts;
        if (fresh) {
            s->report_ts = ts;
            s->agg_total = s->agg_count = 0;
        }
        switch (combine_of(smp->family)) {
        case COMB_SUM: v = fresh ? v : old + v; break;
        case COMB_MIN: v = fresh || v < old ? v : old; break;
        case COMB_MAX: v = fresh || v > old ? v : old; break;
        case COMB_AVG: {
            /* the mean over every folded op: their totals over their counts */
            double tot, cnt;
            if (c->rec && kv_num(kv_get(c->rec, "total"), &tot) && kv_num(kv_get(c->rec, "count"), &cnt) &&
                cnt > 0) {
                s->agg_total += tot;
                s->agg_count += cnt;
                v = s->agg_total / s->agg_count;
            }
            break;
        }
        case COMB_LAST: break;
        }
    }
    if (isnew || memcmp(&old, &v, sizeof(double)) != 0)
        c->st->version++;
    s->value = v;
    s->updated_ms = c->now_ms;
}

static void note_folded(struct put_ctx *c, int level)
{
    struct promfam_store *st = c->st;
    st->folded[level - 1]++;
    if (level == FOLD_PROCESS && c->proc && !c->proc->warned) {
        c->proc->warned = true;
        st->procs_folded++;
        LOG_RL(&st->rl_proc, 10000, LOG_LVL_WARNING,
               "prometheus: process %d reached %zu series (--prometheus_max_series_per_process); its new "
               "series are folded into its <other> series (processes at the bound so far: %llu; counted "
               "in msmonitor_prometheus_folded_samples{cap=\"process\"})",
               (int)c->proc->pid, st->max_proc, (unsigned long long)st->procs_folded);
    } else if (level == FOLD_DAEMON && !st->daemon_full) {
        st->daemon_full = true;
        LOG_WARN("prometheus: the monitored processes hold %zu series (--prometheus_max_series); new "
                 "series of any process are folded into pid=\"<other>\" series (counted in "
                 "msmonitor_prometheus_folded_samples{cap=\"daemon\"})", st->nproc);
    }
}

/* A sample whose own series the bounds refuse goes to the <other> series of its family: of
 * its process (level FOLD_PROCESS) or, at the daemon bound, of every process. */
static void fold(struct put_ctx *c, const struct promfam_sample *smp, int level)
{
    struct promfam_store *st = c->st;
    struct promfam_label l[PROMFAM_MAX_LABELS];
    char key[PROMFAM_MAX_LABELS * 64 + 4 * (PROMFAM_VALUE_MAX + 64) + PROMFAM_NAME_MAX + 16];
    size_t n = smp->nlabels < PROMFAM_MAX_LABELS ? smp->nlabels : PROMFAM_MAX_LABELS;
    for (size_t i = 0; i < n; i++) {
        l[i].name = smp->labels[i].name;
        l[i].value = fold_keeps(level, l[i].name) ? smp->labels[i].value : PROMFAM_OTHER;
    }
    long len = build_key(smp->family, l, n, key, sizeof(key));
    if (len < 0)
        return;
    uint64_t h = fnv(key, (size_t)len);
    struct series *s = *find(st, key, (size_t)len, h);
    bool isnew = !s;
    if (!s) {
        if (level == FOLD_PROCESS && st->nproc >= st->max_total) {
            fold(c, smp, FOLD_DAEMON);
            return;
        }
        if (st->nother >= PROMFAM_MAX_SERIES) {
            st->dropped++;
            return;
        }
        if (!(s = series_new(st, key, (size_t)len, h, smp->family))) {
            c->rc = -ENOMEM;
            return;
        }
        st->nother++;
        s->fold = (uint8_t)level;
        s->fold_op = c->group != NULL;
        if (level == FOLD_PROCESS) {
            s->proc = c->proc;
            c->proc->refs++;
            st->nproc++;
        }
        if (st->nseries > 2 * st->nbuckets)
            grow(st);
    }
    note_folded(c, s->fold ? s->fold : level);
    fold_value(c, s, smp, isnew);
}

/* Where a new series of the record's process goes: its own, or an <other> series (once per
 * record, so the families of one op stay together). */
static int fold_level(const struct promfam_store *st, const struct proc_acct *a)
{
    if (a->n >= st->max_proc)
        return FOLD_PROCESS;
    if (st->nproc >= st->max_total)
        return FOLD_DAEMON;
    return FOLD_NONE;
}

/* ---------------------------------------------------------------- writing */
/* The first datagram of a newer report of g: the previous report's series stop counting
 * against the bounds (they are removed at the next sweep unless this report names them). */
static void group_advance(struct put_ctx *c, struct group *g, uint64_t report_ts)
{
    struct promfam_store *st = c->st;
    if (g->nlive && c->proc) {
        c->proc->n -= g->nlive;
        st->nproc -= g->nlive;
    }
    g->nlive = 0;
    if (g->latest_ms && c->now_ms > g->latest_ms)
        g->period_ms = c->now_ms - g->latest_ms;
    g->latest_ms = c->now_ms;
    g->latest = report_ts;
    st->version++;
}

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
            group_advance(c, c->group, c->mi->report_ts);
        }
        if (!c->refused && c->proc && c->mi->report_ts > c->proc->op_latest)
            c->proc->op_latest = c->mi->report_ts;
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
    if (s && s->fold) {
        /* a process naming its op "<other>" on device "<other>" adds to that series */
        if (c->proc)
            note_folded(c, s->fold);
        fold_value(c, s, smp, false);
        return;
    }
    /* an op series of an older report that this report names again counts anew */
    bool revived = s && op && s->report_ts < c->group->latest;
    if (c->proc && (isnew || revived)) {
        if (c->level < 0)
            c->level = fold_level(st, c->proc);
        if (c->level != FOLD_NONE) {
            fold(c, smp, c->level);
            return;
        }
    }
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
        if (!(s = series_new(st, key, (size_t)len, h, smp->family))) {
            c->rc = -ENOMEM;
            return;
        }
        s->group = c->group;
        if (canon)
            st->nops++;
        if (!op)
            st->nother++;
        if (c->proc) {
            s->proc = c->proc;
            c->proc->refs++;
        }
        if (st->nseries > 2 * st->nbuckets)
            grow(st);
    }
    /* a page is rendered again only when something changed (the daemon's own counters repeat) */
    if (isnew || memcmp(&s->value, &smp->value, sizeof(double)) != 0)
        st->version++;
    s->value = smp->value;
    s->updated_ms = c->now_ms;
    if (op)
        s->report_ts = c->mi->report_ts;
    if (s->proc && (isnew || revived)) {
        s->proc->n++;
        st->nproc++;
        if (op)
            c->group->nlive++;
    }
}

int promfam_store_write(struct promfam_store *st, const struct sink_record *rec, uint64_t now_ms)
{
    struct map_info mi;
    struct put_ctx c = { .st = st, .mi = &mi, .rec = rec, .now_ms = now_ms, .level = -1 };
    int n;
    pthread_mutex_lock(&st->mu);
    /* a record with a device comes from a monitored process (host metrics have none): its
     * series count against that process's bound and the daemon's */
    if (rec->device) {
        c.proc = acct_get(st, rec->pid);
        if (!c.proc) {
            pthread_mutex_unlock(&st->mu);
            return -ENOMEM;
        }
        c.proc->refs++;   /* held while the record's samples go in */
    }
    /* map_record fills mi (op record? which group?) before it emits the first sample */
    n = map_record(rec, st->host, put, &c, &mi);
    if (c.proc)
        acct_unref(st, c.proc);
    pthread_mutex_unlock(&st->mu);
    return n < 0 ? n : c.rc;
}

int promfam_store_set(struct promfam_store *st, const char *family, const struct promfam_label *labels,
                      size_t nlabels, double value, uint64_t now_ms)
{
    struct labels ls = { .n = 0 };
    struct put_ctx c = { .st = st, .now_ms = now_ms, .level = -1 };
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

/* Remove op series absent from their group's latest report, <other> op series of an older
 * report of their process, and series not updated for stale_ms (op series: for three report
 * periods when that is longer, so a slow reporter keeps them). */
static void sweep(struct promfam_store *st, uint64_t now_ms)
{
    for (size_t b = 0; b < st->nbuckets; b++) {
        struct series **pp = &st->buckets[b];
        while (*pp) {
            struct series *s = *pp;
            uint64_t age = st->stale_ms;
            bool dead;
            if (s->group && 3 * s->group->period_ms > age)
                age = 3 * s->group->period_ms;
            dead = st->stale_ms && now_ms > s->updated_ms + age;
            if (s->group)
                dead = dead || s->report_ts < s->group->latest;
            else if (s->fold_op && s->fold == FOLD_PROCESS)
                dead = dead || s->report_ts < s->proc->op_latest;
            if (dead)
                unlink_series(st, pp);
            else
                pp = &s->next;
        }
    }
    if (st->daemon_full && st->nproc < st->max_total) {
        st->daemon_full = false;
        LOG_INFO("prometheus: the monitored processes hold %zu series, under --prometheus_max_series (%zu) "
                 "again (%llu samples were folded at it so far)", st->nproc, st->max_total,
                 (unsigned long long)st->folded[1]);
    }
}

/* A series and its value as a render saw it under the lock. */
struct snap {
    const struct series *s;
    double value;
};

static int cmp_snap(const void *a, const void *b)
{
    const struct series *x = ((const struct snap *)a)->s, *y = ((const struct snap *)b)->s;
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

/* Every live series and its value, with the store pinned: their keys stay readable after the
 * lock is released (unlink_series keeps them in the grave until promfam_unpin). Under the lock;
 * *ret_bytes estimates the text. */
static struct snap *snapshot(struct promfam_store *st, size_t *ret_n, size_t *ret_bytes)
{
    struct snap *v = malloc((st->nseries ? st->nseries : 1) * sizeof(*v));
    size_t n = 0, bytes = 0;
    if (!v)
        return NULL;
    for (size_t b = 0; b < st->nbuckets; b++)
        for (struct series *s = st->buckets[b]; s; s = s->next) {
            v[n++] = (struct snap){ s, s->value };
            bytes += s->keylen + 32;
        }
    st->pins++;
    *ret_n = n;
    *ret_bytes = bytes;
    return v;
}

static void unpin(struct promfam_store *st)
{
    pthread_mutex_lock(&st->mu);
    if (--st->pins == 0) {
        for (struct series *s = st->grave, *nx; s; s = nx) {
            nx = s->next;
            free_series(s);
        }
        st->grave = NULL;
    }
    pthread_mutex_unlock(&st->mu);
}

/* The lock is held only to sweep and to copy the series list and values: sorting and
 * formatting (most of a render's time) run unlocked, so records keep coming in meanwhile and
 * a render on another thread never stalls the loop that feeds the store. */
int promfam_store_render(struct promfam_store *st, uint64_t now_ms, char **ret_text, size_t *ret_len)
{
    struct obuf o = { 0 };
    size_t n = 0, bytes = 0;
    *ret_text = NULL;
    *ret_len = 0;
    pthread_mutex_lock(&st->mu);
    sweep(st, now_ms);
    struct snap *v = snapshot(st, &n, &bytes);
    pthread_mutex_unlock(&st->mu);
    if (!v)
        return -ENOMEM;
    qsort(v, n, sizeof(*v), cmp_snap);
    ob_need(&o, bytes + 1);
    const char *prev = NULL;
    size_t prevlen = 0;
    for (size_t i = 0; i < n && !o.err; i++) {
        const struct series *s = v[i].s;
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
        int k = promfam_format_value(v[i].value, num + 1, sizeof(num) - 2);
        num[0] = ' ';
        num[k + 1] = '\n';
        ob_put(&o, num, (size_t)k + 2);
    }
    free(v);
    unpin(st);
    ob_put(&o, "", 1); /* NUL-terminated for callers that treat it as a string */
    if (o.err) {
        free(o.p);
        return o.err;
    }
    *ret_text = o.p;
    *ret_len = o.len - 1;
    return 0;
}

uint64_t promfam_store_version(struct promfam_store *st)
{
    pthread_mutex_lock(&st->mu);
    uint64_t v = st->version;
    pthread_mutex_unlock(&st->mu);
    return v;
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
    ret->process_series = st->nproc;
    ret->folded_process = st->folded[0];
    ret->folded_daemon = st->folded[1];
    ret->processes_folded = st->procs_folded;
    pthread_mutex_unlock(&st->mu);
}

void promfam_store_publish(struct promfam_store *st, uint64_t now_ms)
{
    struct promfam_stats s;
    const struct promfam_label proc = { "cap", "process" }, dmn = { "cap", "daemon" };
    promfam_store_stats(st, &s);
    promfam_store_set(st, "msmonitor_prometheus_series", NULL, 0, (double)s.series, now_ms);
    promfam_store_set(st, "msmonitor_prometheus_dropped_series", NULL, 0, (double)s.dropped_series, now_ms);
    promfam_store_set(st, "msmonitor_prometheus_folded_samples", &proc, 1, (double)s.folded_process, now_ms);
    promfam_store_set(st, "msmonitor_prometheus_folded_samples", &dmn, 1, (double)s.folded_daemon, now_ms);
}
