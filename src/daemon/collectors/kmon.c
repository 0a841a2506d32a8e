/* kmon: previous-cycle state and the formulas of docs/design/daemon.md#host-metrics. Deltas saturate at 0 (a counter that
 * went backwards, i.e. wrapped or was reset, reports 0); an entity seen for the first time
 * reports 0; a vanished one is simply not in the current file, so it is not reported. */
#include "daemon/collectors/kmon.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/strutil.h"
#include "daemon/collectors/kmon_proc.h"

#define KV_CAP (64 + KMON_MAX_CORES + KN_COUNT * KMON_MAX_IFACES + 6 * KMON_MAX_DISKS)
#define KEY_ARENA (KV_CAP * 56)
#define WARN_MS 60000

enum { SRC_UPTIME, SRC_STAT, SRC_NET, SRC_MEM, SRC_LOAD, SRC_DISK, SRC_COUNT };
static const char *const src_file[SRC_COUNT] = { "proc/uptime", "proc/stat", "proc/net/dev",
                                                 "proc/meminfo", "proc/loadavg", "proc/diskstats" };

struct kmon {
    char root[1024];
    char prefixes[1024];
    bool extended, filter_nic;
    long clk_tck;
    char *buf;                  /* one file's text (KMON_FILE_MAX) */
    struct sink_kv *kv;         /* the record being built */
    size_t n;
    char *keys;                 /* arena for "<metric>.<entity>" keys */
    size_t keys_used;
    bool have_cpu, have_net, have_disk;
    struct kmon_cpu cpu;
    struct kmon_core *cores, *cores_cur;
    size_t ncores;
    bool have_cores;
    struct kmon_netif *net, *net_cur;
    size_t nnet;
    struct kmon_disk *disk, *disk_cur;
    size_t ndisk;
    uint64_t disk_mono_ns;
    struct log_ratelimit rl[SRC_COUNT];
    /* timer glue */
    struct loop_event *timer;
    struct sink out;            /* ops NULL until kmon_start */
    uint64_t cycles;
};

int kmon_create(const struct kmon_cfg *cfg, struct kmon **ret)
{
    struct kmon *k = calloc(1, sizeof(*k));
    if (!k)
        return -ENOMEM;
    if (str_copy(k->root, sizeof(k->root), cfg->procfs_root, strlen(cfg->procfs_root)) != 0 ||
        str_copy(k->prefixes, sizeof(k->prefixes), cfg->allow_prefixes ? cfg->allow_prefixes : "",
                 cfg->allow_prefixes ? strlen(cfg->allow_prefixes) : 0) != 0) {
        free(k);
        return -ENAMETOOLONG;
    }
    k->extended = cfg->extended;
    k->filter_nic = cfg->filter_nic;
    k->clk_tck = cfg->clk_tck > 0 ? cfg->clk_tck : sysconf(_SC_CLK_TCK);
    if (k->clk_tck <= 0)
        k->clk_tck = 100;
    k->buf = malloc(KMON_FILE_MAX);
    k->kv = calloc(KV_CAP, sizeof(*k->kv));
    k->keys = malloc(KEY_ARENA);
    k->net = calloc(KMON_MAX_IFACES, sizeof(*k->net));
    k->net_cur = calloc(KMON_MAX_IFACES, sizeof(*k->net_cur));
    k->disk = calloc(KMON_MAX_DISKS, sizeof(*k->disk));
    k->disk_cur = calloc(KMON_MAX_DISKS, sizeof(*k->disk_cur));
    k->cores = calloc(KMON_MAX_CORES, sizeof(*k->cores));
    k->cores_cur = calloc(KMON_MAX_CORES, sizeof(*k->cores_cur));
    if (!k->cores || !k->cores_cur || !k->buf || !k->kv || !k->keys || !k->net || !k->net_cur || !k->disk || !k->disk_cur) {
        kmon_destroy(k);
        return -ENOMEM;
    }
    *ret = k;
    return 0;
}

void kmon_destroy(struct kmon *k)
{
    if (!k)
        return;
    loop_event_free(k->timer);
    free(k->buf);
    free(k->kv);
    free(k->keys);
    free(k->net);
    free(k->net_cur);
    free(k->disk);
    free(k->disk_cur);
    free(k->cores);
    free(k->cores_cur);
    free(k);
}

uint64_t kmon_cycles(const struct kmon *k) { return k->cycles; }

static uint64_t delta(uint64_t cur, uint64_t prev) { return cur >= prev ? cur - prev : 0; }

static void put_u(struct kmon *k, const char *key, uint64_t v)
{
    if (k->n < KV_CAP)
        k->kv[k->n++] = (struct sink_kv){ .key = key, .type = SINK_UINT, .u = v };
}

static void put_d(struct kmon *k, const char *key, double v)
{
    if (k->n < KV_CAP)
        k->kv[k->n++] = (struct sink_kv){ .key = key, .type = SINK_DOUBLE, .d = v };
}

/* "<metric>.<entity>" in the arena (NULL when full: the metric is skipped). */
static const char *key2(struct kmon *k, const char *metric, const char *entity)
{
    size_t room = KEY_ARENA - k->keys_used;
    int n = snprintf(k->keys + k->keys_used, room, "%s.%s", metric, entity);
    if (n < 0 || (size_t)n >= room)
        return NULL;
    const char *s = k->keys + k->keys_used;
    k->keys_used += (size_t)n + 1;
    return s;
}

static void put_u2(struct kmon *k, const char *metric, const char *entity, uint64_t v)
{
    const char *key = key2(k, metric, entity);
    if (key)
        put_u(k, key, v);
}

/* Reads and parses nothing itself: returns the file's length or a negative errno, warning
 * (rate-limited) on failure. */
static long load(struct kmon *k, int src)
{
    long n = kmon_proc_read(k->root, src_file[src], k->buf, KMON_FILE_MAX);
    if (n < 0)
        LOG_RL(&k->rl[src], WARN_MS, LOG_LVL_WARNING, "kmon: cannot read %s/%s: %s; its metrics are skipped",
               k->root, src_file[src], strerror((int)-n));
    return n;
}

static void bad_parse(struct kmon *k, int src, int rc)
{
    LOG_RL(&k->rl[src], WARN_MS, LOG_LVL_WARNING, "kmon: cannot parse %s/%s: %s; its metrics are skipped",
           k->root, src_file[src], strerror(-rc));
}

static void do_uptime(struct kmon *k)
{
    uint64_t up;
    long n = load(k, SRC_UPTIME);
    int rc;
    if (n < 0)
        return;
    if ((rc = kmon_parse_uptime(k->buf, (size_t)n, &up)) != 0)
        bad_parse(k, SRC_UPTIME, rc);
    else
        put_u(k, "uptime", up);
}

/* 100 x (1 - Δidle/Δtotal) as cpu_util; -1 when Δtotal = 0. */
static double util_of(const struct kmon_cpu *cur, const struct kmon_cpu *prev)
{
    uint64_t total = 0;
    for (int i = KC_U; i <= KC_Z; i++)
        total += delta(cur->t[i], prev->t[i]);
    return total ? 100.0 * (1.0 - (double)delta(cur->t[KC_I], prev->t[KC_I]) / (double)total) : -1.0;
}

/* Per-core utilisation (ours, extended): cpu_core_util.cpu<N>, the cpu_util formula on each
 * "cpu<N>" line; a core seen for the first time (hotplug) waits for its second sample. Uses
 * the /proc/stat text do_cpu just read (k->buf). */
static void do_cores(struct kmon *k, size_t len)
{
    size_t ncur = 0;
    int rc = kmon_parse_stat_cores(k->buf, len, k->cores_cur, KMON_MAX_CORES, &ncur);
    if (rc) {
        bad_parse(k, SRC_STAT, rc);
        k->have_cores = false;
        return;
    }
    for (size_t i = 0; k->have_cores && i < ncur; i++) {
        const struct kmon_core *c = &k->cores_cur[i], *p = NULL;
        char ent[16];
        for (size_t j = 0; j < k->ncores && !p; j++)
            if (k->cores[j].id == c->id)
                p = &k->cores[j];
        double u = p ? util_of(&c->c, &p->c) : -1.0;
        snprintf(ent, sizeof(ent), "cpu%u", (unsigned)c->id);
        const char *key = u >= 0 ? key2(k, "cpu_core_util", ent) : NULL;
        if (key)
            put_d(k, key, u);
    }
    struct kmon_core *t = k->cores;
    k->cores = k->cores_cur;
    k->cores_cur = t;
    k->ncores = ncur;
    k->have_cores = true;
}

static void do_cpu(struct kmon *k)
{
    static const struct { const char *key; int f; } ms[] = {
        { "cpu_u_ms", KC_U }, { "cpu_s_ms", KC_S }, { "cpu_w_ms", KC_W }, { "cpu_n_ms", KC_N },
        { "cpu_x_ms", KC_X }, { "cpu_y_ms", KC_Y }, { "cpu_z_ms", KC_Z }, { "cpu_guest_ms", KC_G },
        { "cpu_guest_nice_ms", KC_GN },
    };
    struct kmon_cpu cur;
    uint64_t d[KC_COUNT], total = 0;
    long n = load(k, SRC_STAT);
    int rc;
    if (n < 0 || (rc = kmon_parse_stat(k->buf, (size_t)n, &cur)) != 0) {
        if (n >= 0)
            bad_parse(k, SRC_STAT, rc);
        k->have_cpu = false;
        k->have_cores = false;
        return;
    }
    bool had = k->have_cpu;
    struct kmon_cpu prev = k->cpu;
    k->cpu = cur;
    k->have_cpu = true;
    if (k->extended)
        do_cores(k, (size_t)n);
    if (!had)
        return;
    for (int i = 0; i < KC_COUNT; i++)
        d[i] = delta(cur.t[i], prev.t[i]);
    /* guest time is already inside user/nice, so it is not added again */
    for (int i = KC_U; i <= KC_Z; i++)
        total += d[i];
    if (total == 0)
        return;
    double t = (double)total;
    put_d(k, "cpu_util", 100.0 * (1.0 - (double)d[KC_I] / t));
    put_d(k, "cpu_u", 100.0 * (double)d[KC_U] / t);
    put_d(k, "cpu_s", 100.0 * (double)d[KC_S] / t);
    put_d(k, "cpu_i", 100.0 * (double)d[KC_I] / t);
    put_d(k, "cpu_guest", 100.0 * (double)d[KC_G] / t);
    put_d(k, "cpu_guest_nice", 100.0 * (double)d[KC_GN] / t);
    for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++)
        put_u(k, ms[i].key, d[ms[i].f] * 1000u / (uint64_t)k->clk_tck);
}

static void do_net(struct kmon *k)
{
    static const char *const names[KN_COUNT] = { "rx_bytes", "rx_packets", "rx_errors", "rx_drops",
                                                 "tx_bytes", "tx_packets", "tx_errors", "tx_drops" };
    size_t ncur = 0;
    long n = load(k, SRC_NET);
    int rc;
    if (n < 0 || (rc = kmon_parse_netdev(k->buf, (size_t)n, k->filter_nic ? k->prefixes : NULL,
                                         k->net_cur, KMON_MAX_IFACES, &ncur)) != 0) {
        if (n >= 0)
            bad_parse(k, SRC_NET, rc);
        k->have_net = false;
        return;
    }
    if (k->have_net) {
        for (size_t i = 0; i < ncur; i++) {
            const struct kmon_netif *c = &k->net_cur[i], *p = NULL;
            for (size_t j = 0; j < k->nnet && !p; j++)
                if (strcmp(k->net[j].name, c->name) == 0)
                    p = &k->net[j];
            for (int f = 0; f < KN_COUNT; f++)
                put_u2(k, names[f], c->name, p ? delta(c->c[f], p->c[f]) : 0);
        }
    }
    struct kmon_netif *t = k->net;
    k->net = k->net_cur;
    k->net_cur = t;
    k->nnet = ncur;
    k->have_net = true;
}

static void do_mem(struct kmon *k)
{
    static const char *const names[KM_COUNT] = { "mem_total_kb", "mem_free_kb", "mem_available_kb",
                                                 "mem_buffers_kb", "mem_cached_kb",
                                                 "mem_swap_total_kb", "mem_swap_free_kb" };
    struct kmon_mem m;
    long n = load(k, SRC_MEM);
    int rc;
    if (n < 0)
        return;
    if ((rc = kmon_parse_meminfo(k->buf, (size_t)n, &m)) != 0) {
        bad_parse(k, SRC_MEM, rc);
        return;
    }
    for (int i = 0; i < KM_COUNT; i++)
        if (m.has[i])
            put_u(k, names[i], m.kb[i]);
    if (m.has[KM_AVAILABLE] && m.kb[KM_TOTAL] > 0)
        put_d(k, "mem_used_pct", 100.0 * (double)delta(m.kb[KM_TOTAL], m.kb[KM_AVAILABLE]) /
                                     (double)m.kb[KM_TOTAL]);
}

static void do_load(struct kmon *k)
{
    struct kmon_load l;
    long n = load(k, SRC_LOAD);
    int rc;
    if (n < 0)
        return;
    if ((rc = kmon_parse_loadavg(k->buf, (size_t)n, &l)) != 0) {
        bad_parse(k, SRC_LOAD, rc);
        return;
    }
    put_d(k, "load_1m", l.l1);
    put_d(k, "load_5m", l.l5);
    put_d(k, "load_15m", l.l15);
    put_u(k, "procs_running", l.running);
    put_u(k, "procs_total", l.total);
}

/* Whole disks only: /sys/block/<dev> exists, and not a loop or ram device. */
static bool whole_disk(struct kmon *k, const char *name)
{
    char rel[64];
    if (str_starts_with(name, "loop") || str_starts_with(name, "ram"))
        return false;
    snprintf(rel, sizeof(rel), "sys/block/%s", name);
    return kmon_proc_exists(k->root, rel);
}

static void do_disk(struct kmon *k, uint64_t mono_ns)
{
    size_t nall = 0, ncur = 0;
    long n = load(k, SRC_DISK);
    int rc;
    if (n < 0 || (rc = kmon_parse_diskstats(k->buf, (size_t)n, k->disk_cur, KMON_MAX_DISKS, &nall)) != 0) {
        if (n >= 0)
            bad_parse(k, SRC_DISK, rc);
        k->have_disk = false;
        return;
    }
    for (size_t i = 0; i < nall; i++)
        if (whole_disk(k, k->disk_cur[i].name))
            k->disk_cur[ncur++] = k->disk_cur[i];
    if (k->have_disk) {
        uint64_t interval_ms = (mono_ns - k->disk_mono_ns) / 1000000u;
        for (size_t i = 0; i < ncur; i++) {
            const struct kmon_disk *c = &k->disk_cur[i], *p = NULL;
            uint64_t d[KD_COUNT] = { 0 };
            for (size_t j = 0; j < k->ndisk && !p; j++)
                if (strcmp(k->disk[j].name, c->name) == 0)
                    p = &k->disk[j];
            for (int f = 0; p && f < KD_COUNT; f++)
                d[f] = delta(c->c[f], p->c[f]);
            put_u2(k, "disk_reads", c->name, d[KD_READS]);
            put_u2(k, "disk_writes", c->name, d[KD_WRITES]);
            put_u2(k, "disk_read_bytes", c->name, d[KD_SECT_READ] * 512u);
            put_u2(k, "disk_write_bytes", c->name, d[KD_SECT_WRITTEN] * 512u);
            put_u2(k, "disk_io_ms", c->name, d[KD_IO_MS]);
            double util = interval_ms ? 100.0 * (double)d[KD_IO_MS] / (double)interval_ms : 0.0;
            const char *key = key2(k, "disk_util", c->name);
            if (key)
                put_d(k, key, util > 100.0 ? 100.0 : util);
        }
    }
    struct kmon_disk *t = k->disk;
    k->disk = k->disk_cur;
    k->disk_cur = t;
    k->ndisk = ncur;
    k->disk_mono_ns = mono_ns;
    k->have_disk = true;
}

int kmon_sample(struct kmon *k, uint64_t wall_ns, uint64_t mono_ns, struct sink_record *ret)
{
    k->n = 0;
    k->keys_used = 0;
    do_uptime(k);
    do_cpu(k);
    do_net(k);
    if (k->extended) {
        do_mem(k);
        do_load(k);
        do_disk(k, mono_ns);
    }
    k->cycles++;
    *ret = (struct sink_record){ .time_ns = wall_ns, .device = NULL, .kv = k->kv, .n = k->n,
                                 .pid = SINK_NO_PID, .rank = SINK_NO_RANK, .job = SINK_NO_JOB };
    return 0;
}

static void on_timer(struct loop_event *ev, void *arg)
{
    struct kmon *k = arg;
    struct sink_record rec;
    (void)ev;
    kmon_sample(k, clock_real_ns(), clock_mono_ns(), &rec);
    if (k->out.ops && rec.n > 0)
        (void)k->out.ops->write(k->out.self, &rec);
}

int kmon_start(struct kmon *k, struct loop *l, uint64_t interval_ms, struct sink out)
{
    int rc = loop_timer_add(l, interval_ms, true, on_timer, k, &k->timer);
    if (rc)
        return rc;
    k->out = out;
    on_timer(k->timer, k); /* the first cycle (uptime, memory, load) at start-up */
    return 0;
}
