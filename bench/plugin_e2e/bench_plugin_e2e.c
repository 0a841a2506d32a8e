/* bench_plugin_e2e: the plugin end to end through its public C API (include/msmon/msmonitor.h)
 * with the msPTI simulator producing Kernel records as fast as the consumer takes them
 * (mssim_bench_fill; the plugin finds the simulator through MSMONITOR_MSPTI_LIB). Per mode —
 * trivial consumer (GetNextRecord walk, no plugin), metric, SQLite alone (the DB mode's floor:
 * the same rows through the same statements on the completion thread, no plugin), DB, JSONL,
 * standalone — one forked
 * child per run so peak RSS is the mode's own; prints records/s (wall, start of fill to stop
 * returned), consumer CPU ns/record (process CPU minus the producing thread), the producing
 * thread's CPU ns/record, peak RSS, rows on disk and drops; for standalone also the peak RSS per
 * stored record and the RSS once msmon_monitor_results has built the reader's array. Prints
 * figures, asserts nothing.
 *
 * usage: bench_plugin_e2e <path/to/simulator/libmspti.so> [million_records] [runs] [modes]
 * The runs write under $TMPDIR (default /tmp). */
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "msmon/msmonitor.h"
#include "msmon/mspti.h"
#include "msmon/mssim.h"

#include "benchdb.h"

#define CHUNK 1000000ull /* records per fill, then FlushAll: the buffer pool never runs dry */

struct sim {
    int64_t (*fill)(uint32_t, uint64_t);
    void (*stats)(struct mssim_stats *);
    msptiResult (*flush_all)(uint32_t);
    msptiResult (*subscribe)(msptiSubscriberHandle *, msptiCallbackFunc, void *);
    msptiResult (*unsubscribe)(msptiSubscriberHandle);
    msptiResult (*reg)(msptiBuffersCallbackRequestFunc, msptiBuffersCallbackCompleteFunc);
    msptiResult (*enable)(msptiActivityKind);
    msptiResult (*next)(uint8_t *, size_t, msptiActivity **);
};
static struct sim sim;

struct result {
    double secs, cpu_ns_per_rec, prod_ns_per_rec, rss_mb, rss_read_mb;
    uint64_t appended, rows, drops, bytes;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int load_sim(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        fprintf(stderr, "bench: %s\n", dlerror());
        return -1;
    }
    sim.fill = (int64_t (*)(uint32_t, uint64_t))dlsym(h, "mssim_bench_fill");
    sim.stats = (void (*)(struct mssim_stats *))dlsym(h, "mssim_get_stats");
    sim.flush_all = (msptiResult (*)(uint32_t))dlsym(h, "msptiActivityFlushAll");
    sim.subscribe = (msptiResult (*)(msptiSubscriberHandle *, msptiCallbackFunc, void *))dlsym(h, "msptiSubscribe");
    sim.unsubscribe = (msptiResult (*)(msptiSubscriberHandle))dlsym(h, "msptiUnsubscribe");
    sim.reg = (msptiResult (*)(msptiBuffersCallbackRequestFunc, msptiBuffersCallbackCompleteFunc))dlsym(
        h, "msptiActivityRegisterCallbacks");
    sim.enable = (msptiResult (*)(msptiActivityKind))dlsym(h, "msptiActivityEnable");
    sim.next = (msptiResult (*)(uint8_t *, size_t, msptiActivity **))dlsym(h, "msptiActivityGetNextRecord");
    return sim.fill && sim.stats && sim.flush_all && sim.subscribe && sim.reg && sim.next ? 0 : -1;
}

static uint64_t sim_dropped(void)
{
    struct mssim_stats st;
    sim.stats(&st);
    return st.records_dropped_nofit + st.records_dropped_declined + st.records_dropped_injected;
}

/* ---- trivial consumer: walk each buffer, nothing else ---- */
static volatile uint64_t walked;
static void walk_request(uint8_t **buf, size_t *size, size_t *max_records)
{
    *size = 8u << 20;
    *buf = aligned_alloc(8, *size);
    *max_records = 0;
}
static void walk_complete(uint8_t *buf, size_t size, size_t valid)
{
    msptiActivity *r = NULL;
    uint64_t n = 0;
    (void)size;
    if (!buf)
        return;
    while (sim.next(buf, valid, &r) == MSPTI_SUCCESS)
        n++;
    __atomic_fetch_add(&walked, n, __ATOMIC_RELAXED);
    free(buf);
}

/* The baselines' completion callback: each Kernel of the buffer to each(), under one lock
 * (the simulator may complete buffers on several threads; one baseline runs per process). */
static pthread_mutex_t baseline_lock = PTHREAD_MUTEX_INITIALIZER;
static void baseline_walk(uint8_t *buf, size_t valid, void (*each)(const msptiActivityKernel *))
{
    msptiActivity *r = NULL;
    uint64_t n = 0;
    if (!buf)
        return;
    pthread_mutex_lock(&baseline_lock);
    while (sim.next(buf, valid, &r) == MSPTI_SUCCESS) {
        if (r->kind == MSPTI_ACTIVITY_KIND_KERNEL)
            each((const msptiActivityKernel *)r);
        n++;
    }
    pthread_mutex_unlock(&baseline_lock);
    __atomic_fetch_add(&walked, n, __ATOMIC_RELAXED);
    free(buf);
}

/* ---- SQLite alone: what the DB mode's rows cost SQLite itself, with nothing of the plugin
 * around it. The rows of db_rows.c's add_kernel (TASK + COMPUTE_TASK_INFO per Kernel), the
 * pragmas, statement shape (64-row INSERT, parameters rebound only when they change) and
 * transaction size (65536 rows) of proc_db.c, built and inserted right in the completion
 * callback: no queue, no pipeline, no second thread. ---- */
#define FLOOR_NA 2 /* string ids: name/type pointers get ids from 3 on */
#define FLOOR_SLOTS 1024
struct floor_tab {
    struct benchdb_ins ins;
    const char *table;
    int64_t rows[BENCHDB_MULTI * BENCHDB_MAX_COLS];
    size_t n;
};
static struct {
    sqlite3 *db;
    struct floor_tab task, cti;
    const char *ptr[FLOOR_SLOTS];
    int64_t ptr_id[FLOOR_SLOTS], next_id, next_task, pid;
    uint64_t recs;
    int failed;
} flr;

/* A stable id per name pointer, like the plugin's pool (the simulator's names live at fixed
 * addresses): open addressing, linear probing; ids of a full table keep growing instead. */
static int64_t floor_sid(const char *s)
{
    size_t slot = (size_t)(((uintptr_t)s >> 3) * 0x9E3779B97F4A7C15ull >> 54); /* 10 bits */
    for (size_t i = 0; i < FLOOR_SLOTS; i++, slot = (slot + 1) % FLOOR_SLOTS) {
        if (flr.ptr[slot] == s)
            return flr.ptr_id[slot];
        if (!flr.ptr[slot]) {
            flr.ptr[slot] = s;
            return flr.ptr_id[slot] = flr.next_id++;
        }
    }
    return flr.next_id++;
}

static int floor_open(const char *dir)
{
    char path[4400], sql[1024];
    snprintf(path, sizeof(path), "%s/floor.db", dir);
    if (!(flr.db = benchdb_open(path, 1)))
        return -1;
    flr.next_id = FLOOR_NA + 1;
    flr.pid = getpid();
    flr.task.table = "TASK";
    flr.cti.table = "COMPUTE_TASK_INFO";
    snprintf(sql, sizeof(sql), "CREATE TABLE TASK %s; CREATE TABLE COMPUTE_TASK_INFO %s", benchdb_task_cols,
             benchdb_cti_cols);
    if (benchdb_exec(flr.db, sql) != 0 || benchdb_prepare(flr.db, &flr.task.ins, "TASK", 11) != 0 ||
        benchdb_prepare(flr.db, &flr.cti.ins, "COMPUTE_TASK_INFO", 15) != 0)
        return -1;
    return benchdb_exec(flr.db, "BEGIN");
}

static void floor_close(void)
{
    struct floor_tab *tabs[2] = {&flr.task, &flr.cti};
    for (int i = 0; i < 2; i++)
        flr.failed |= benchdb_insert_tail(flr.db, tabs[i]->table, tabs[i]->ins.ncols, tabs[i]->rows, tabs[i]->n);
    flr.failed |= benchdb_exec(flr.db, "COMMIT");
    for (int i = 0; i < 2; i++)
        sqlite3_finalize(tabs[i]->ins.st);
    benchdb_exec(flr.db, "PRAGMA journal_mode=DELETE");
    sqlite3_close(flr.db);
}

/* One Kernel's rows, inserted 64 at a time, committed every BENCHDB_TX_RECS. */
static void floor_kernel(const msptiActivityKernel *k)
{
    int64_t name = floor_sid(k->name), type = floor_sid(k->type), task = flr.next_task++;
    int64_t *t = &flr.task.rows[flr.task.n++ * 11], *c = &flr.cti.rows[flr.cti.n++ * 15];
    t[0] = (int64_t)k->start; t[1] = (int64_t)k->end; t[2] = k->ds.deviceId;
    t[3] = (int64_t)k->correlationId; t[4] = task; t[5] = flr.pid; t[6] = type;
    t[7] = 4294967295LL; t[8] = k->ds.streamId; t[9] = 4294967295LL; t[10] = 4294967295LL;
    c[0] = name; c[1] = task; c[2] = 4294967295LL; c[3] = 4294967295LL; c[4] = type;
    for (int i = 5; i < 15; i++)
        c[i] = FLOOR_NA;
    if (flr.task.n == BENCHDB_MULTI) {
        flr.failed |= benchdb_insert(flr.db, &flr.task.ins, flr.task.rows, BENCHDB_MULTI);
        flr.failed |= benchdb_insert(flr.db, &flr.cti.ins, flr.cti.rows, BENCHDB_MULTI);
        flr.task.n = flr.cti.n = 0;
    }
    if (++flr.recs % BENCHDB_TX_RECS == 0) /* a multiple of 64: no rows pending */
        flr.failed |= benchdb_exec(flr.db, "COMMIT") | benchdb_exec(flr.db, "BEGIN");
}

static void floor_complete(uint8_t *buf, size_t size, size_t valid)
{
    (void)size;
    baseline_walk(buf, valid, floor_kernel);
}

/* ---- files alone: the JSONL mode's bytes without the plugin. One fixed Kernel line per record
 * (the size of the plugin's lines for the simulator's records, within a few bytes) into 1 MiB
 * write() calls and a new file every 10000 lines (the default rotation), on the completion
 * thread: what the file system charges for the JSONL mode's output at that moment. ---- */
#define FILES_LINES 10000
#define FILES_BUF (1u << 20)
static const char files_line[] =
    "{\"correlationId\":1234567,\"deviceId\":0,\"endNs\":1749889801120081234,\"kind\":\"Kernel\","
    "\"name\":\"MatMul2\",\"startNs\":1749889801120000000,\"streamId\":2,"
    "\"type\":\"KERNEL_AICORE\"}\n";
static struct {
    char dir[4096], *buf;
    size_t used;
    uint64_t lines, files, bytes;
    int fd, failed;
} fls = {.fd = -1};

static void files_write(void)
{
    for (size_t off = 0; off < fls.used;) {
        ssize_t w = fls.fd >= 0 ? write(fls.fd, fls.buf + off, fls.used - off) : -1;
        if (w <= 0) {
            fls.failed = 1;
            break;
        }
        off += (size_t)w;
    }
    fls.bytes += fls.used;
    fls.used = 0;
}

static void files_rotate(void)
{
    char path[4200];
    files_write();
    if (fls.fd >= 0)
        close(fls.fd);
    snprintf(path, sizeof(path), "%s/files_%06llu.jsonl", fls.dir, (unsigned long long)fls.files++);
    fls.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
    fls.failed |= fls.fd < 0;
}

static int files_open(const char *dir)
{
    snprintf(fls.dir, sizeof(fls.dir), "%s", dir);
    if (!(fls.buf = malloc(FILES_BUF)))
        return -1;
    files_rotate();
    return fls.failed ? -1 : 0;
}

static void files_close(void)
{
    files_write();
    if (fls.fd >= 0)
        close(fls.fd);
    fls.fd = -1;
    free(fls.buf);
}

static void files_kernel(const msptiActivityKernel *k)
{
    (void)k;
    if (fls.used + sizeof(files_line) > FILES_BUF)
        files_write();
    memcpy(fls.buf + fls.used, files_line, sizeof(files_line) - 1);
    fls.used += sizeof(files_line) - 1;
    if (++fls.lines % FILES_LINES == 0)
        files_rotate();
}

static void files_complete(uint8_t *buf, size_t size, size_t valid)
{
    (void)size;
    baseline_walk(buf, valid, files_kernel);
}

/* ---- plugin config through msmon_enable_npu_monitor ---- */
static int npu_monitor(const char *start, const char *stop, const char *log_file, const char *type)
{
    const char *keys[] = {"MSPTI_ACTIVITY_KIND", "REPORT_INTERVAL_S", "DURATION", "NPU_MONITOR_START",
                          "NPU_MONITOR_STOP", "NPU_MONITOR_LOG_FILE", "NPU_MONITOR_EXPORT_TYPE"};
    const char *vals[] = {"Kernel", "3600", "0", start, stop, log_file, type};
    return msmon_enable_npu_monitor(keys, vals, 7);
}

static uint64_t count_jsonl_kernels(const char *dir, uint64_t *bytes)
{
    uint64_t n = 0;
    char path[4400], line[4096];
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strstr(e->d_name, ".jsonl"))
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r");
        while (f && fgets(line, sizeof(line), f)) {
            n += strstr(line, "\"kind\":\"Kernel\"") != NULL;
            *bytes += strlen(line);
        }
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    return n;
}

static uint64_t count_db_rows(const char *dir)
{
    uint64_t n = 0;
    char path[4400];
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        sqlite3 *db;
        sqlite3_stmt *st;
        size_t l = strlen(e->d_name);
        if (l < 3 || strcmp(e->d_name + l - 3, ".db") != 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
            sqlite3_prepare_v2(db, "SELECT count(*) FROM TASK", -1, &st, NULL) == SQLITE_OK) {
            if (sqlite3_step(st) == SQLITE_ROW)
                n += (uint64_t)sqlite3_column_int64(st, 0);
            sqlite3_finalize(st);
        }
        sqlite3_close(db);
    }
    if (d)
        closedir(d);
    return n;
}

/* One run of mode in this (child) process. */
static int run_mode(const char *mode, uint64_t total, const char *dir, struct result *r)
{
    msptiSubscriberHandle sub = NULL;
    int32_t kernel = MSPTI_ACTIVITY_KIND_KERNEL;
    struct mssim_stats st0, st1;
    uint64_t d0;
    double t0, p0, c0, prod = 0;
    int rc = 0;

    if (strcmp(mode, "trivial") == 0 || strcmp(mode, "sqlite") == 0 || strcmp(mode, "files") == 0) {
        if ((mode[0] == 's' && floor_open(dir) != 0) || (mode[0] == 'f' && files_open(dir) != 0))
            return -1;
        sim.subscribe(&sub, NULL, NULL);
        sim.reg(walk_request, mode[0] == 's' ? floor_complete : mode[0] == 'f' ? files_complete : walk_complete);
        sim.enable(MSPTI_ACTIVITY_KIND_KERNEL);
    } else if (strcmp(mode, "standalone") == 0) {
        rc = msmon_monitor_start(&kernel, 1);
    } else {
        rc = npu_monitor("true", "false", strcmp(mode, "metric") == 0 ? "" : dir,
                         strcmp(mode, "db") == 0 ? "db" : "jsonl");
    }
    if (rc != 0)
        return -1;
    sim.stats(&st0);
    d0 = sim_dropped();
    t0 = now_s();
    c0 = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
    for (uint64_t done = 0; done < total; done += CHUNK) {
        p0 = cpu_ns(CLOCK_THREAD_CPUTIME_ID);
        int64_t n = sim.fill(1u << MSPTI_ACTIVITY_KIND_KERNEL, total - done < CHUNK ? total - done : CHUNK);
        prod += cpu_ns(CLOCK_THREAD_CPUTIME_ID) - p0;
        sim.flush_all(1);
        if (n < 0)
            return -1;
    }
    p0 = cpu_ns(CLOCK_THREAD_CPUTIME_ID);
    if (strcmp(mode, "trivial") == 0 || strcmp(mode, "sqlite") == 0 || strcmp(mode, "files") == 0) {
        sim.flush_all(1);
        sim.unsubscribe(sub);
        if (mode[0] == 's')
            floor_close();
        if (mode[0] == 'f')
            files_close();
        if ((mode[0] == 's' && flr.failed) || (mode[0] == 'f' && fls.failed))
            return -1;
    } else if (strcmp(mode, "standalone") == 0) {
        msmon_monitor_stop();
    } else {
        npu_monitor("false", "true", "", "jsonl");
    }
    prod += 0; /* the stop call's own CPU is the consumer's (drain, final writes) */
    r->secs = now_s() - t0;
    sim.stats(&st1);
    r->appended = st1.records_appended - st0.records_appended;
    r->cpu_ns_per_rec = (cpu_ns(CLOCK_PROCESS_CPUTIME_ID) - c0 - prod) / (double)r->appended;
    r->prod_ns_per_rec = prod / (double)r->appended;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    r->rss_mb = (double)ru.ru_maxrss / 1024.0;
    if (strcmp(mode, "db") == 0 || strcmp(mode, "sqlite") == 0) {
        r->rows = count_db_rows(dir);
    } else if (strcmp(mode, "jsonl") == 0) {
        r->rows = count_jsonl_kernels(dir, &r->bytes);
    } else if (strcmp(mode, "standalone") == 0) {
        const struct msmon_result *res;
        size_t n = 0;
        msmon_monitor_results(kernel, &res, &n);
        r->rows = n;
        getrusage(RUSAGE_SELF, &ru); /* after the reader's msmon_result array was built */
        r->rss_read_mb = (double)ru.ru_maxrss / 1024.0;
    } else if (strcmp(mode, "trivial") == 0 || strcmp(mode, "files") == 0) {
        r->rows = walked;
    } else {
        r->rows = r->appended; /* metric: aggregated, nothing stored per record */
    }
    r->drops = (sim_dropped() - d0) + (r->appended > r->rows ? r->appended - r->rows : 0);
    return 0;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    const char *modes_default[] = {"trivial", "metric", "sqlite", "db", "files", "jsonl", "standalone"};
    uint64_t total;
    int runs;
    const char *tmp = getenv("TMPDIR"); /* where the runs write: the file system is part of the figure */
    char base[1024];

    if (argc < 2) {
        fprintf(stderr, "usage: %s <simulator libmspti.so> [million_records] [runs] [mode,...]\n"
                "  modes: trivial, metric, sqlite, db, files, jsonl, standalone (default: all)\n", argv[0]);
        return 2;
    }
    total = (uint64_t)((argc > 2 ? atof(argv[2]) : 5.0) * 1e6);
    runs = argc > 3 ? atoi(argv[3]) : 3;
    if ((size_t)snprintf(base, sizeof(base), "%s/bench_plugin_e2e.XXXXXX", tmp && *tmp ? tmp : "/tmp") >= sizeof(base) - 64) {
        fprintf(stderr, "bench: TMPDIR too long\n");
        return 2;
    }
    if (runs < 1 || runs > 15 || total == 0 || !mkdtemp(base)) {
        fprintf(stderr, "bench: bad arguments, or cannot create %s\n", base);
        return 2;
    }
    setenv("MSMONITOR_MSPTI_LIB", argv[1], 1);
    setenv("MSMONITOR_LOG_PATH", base, 1);
    setenv("MSMONITOR_SOCKET_DIR", base, 1);
    printf("plugin end to end (public C API, simulator producer), Kernel records, %llu per run, median of %d, "
           "files in %s\n", (unsigned long long)total, runs, base);
    printf("  %-10s %12s %10s %14s %9s %10s %12s %10s\n", "mode", "records/s", "x trivial", "CPU ns/record",
           "prod ns", "peak RSS", "rows", "drops");
    double trivial_rate = 0;
    double sqlite_rate = 0, files_rate = 0;
    for (size_t m = 0; m < sizeof(modes_default) / sizeof(modes_default[0]); m++) {
        const char *mode = modes_default[m];
        if (argc > 4 && !strstr(argv[4], mode))
            continue;
        double rate[15], cpu[15], rss[15], prod[15], rss_read[15];
        uint64_t rows = 0, drops = 0, jsonl_bytes = 0;
        int ok = 0;
        for (int i = 0; i < runs; i++) {
            int pfd[2];
            char dir[1200];
            snprintf(dir, sizeof(dir), "%s/%s%d", base, mode, i);
            if (pipe(pfd) != 0)
                return 1;
            pid_t pid = fork();
            if (pid == 0) {
                struct result r = {0};
                close(pfd[0]);
                if (mkdir(dir, 0750) != 0 || load_sim(argv[1]) != 0 || run_mode(mode, total, dir, &r) != 0)
                    _exit(1);
                if (write(pfd[1], &r, sizeof(r)) != (ssize_t)sizeof(r))
                    _exit(1);
                _exit(0);
            }
            close(pfd[1]);
            struct result r;
            ssize_t got = read(pfd[0], &r, sizeof(r));
            close(pfd[0]);
            waitpid(pid, NULL, 0);
            /* A run's files go right after it. Kept, the later runs' writes are throttled
             * by their writeback (~7 GB at 5 M records: /proc/pressure/io went to 50 %); gone,
             * the next run's file creations pass over their inodes (ext4's recently_deleted),
             * the same for every run of every mode. */
            char cmd[1300];
            snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
            if (system(cmd) != 0)
                fprintf(stderr, "bench: cleanup of %s failed\n", dir);
            if (got != (ssize_t)sizeof(r)) {
                fprintf(stderr, "bench: %s run %d failed\n", mode, i);
                continue;
            }
            rate[ok] = (double)r.appended / r.secs;
            cpu[ok] = r.cpu_ns_per_rec;
            rss[ok] = r.rss_mb;
            prod[ok] = r.prod_ns_per_rec;
            rss_read[ok] = r.rss_read_mb;
            rows = r.rows;
            jsonl_bytes = r.bytes;
            drops += r.drops;
            ok++;
        }
        if (!ok)
            continue;
        qsort(rate, (size_t)ok, sizeof(double), cmp_dbl);
        qsort(cpu, (size_t)ok, sizeof(double), cmp_dbl);
        qsort(rss, (size_t)ok, sizeof(double), cmp_dbl);
        qsort(prod, (size_t)ok, sizeof(double), cmp_dbl);
        qsort(rss_read, (size_t)ok, sizeof(double), cmp_dbl);
        double med = rate[ok / 2];
        if (m == 0)
            trivial_rate = med;
        if (strcmp(mode, "sqlite") == 0)
            sqlite_rate = med;
        if (strcmp(mode, "files") == 0)
            files_rate = med;
        printf("  %-10s %10.2f M %9.0f%% %14.1f %9.1f %7.0f MB %12llu %10llu\n", mode, med / 1e6,
               trivial_rate > 0 ? 100.0 * med / trivial_rate : 0.0, cpu[ok / 2], prod[ok / 2], rss[ok / 2],
               (unsigned long long)rows, (unsigned long long)drops);
        if (strcmp(mode, "db") == 0)
            printf("  %-10s %.2f M table rows/s (a TASK and a COMPUTE_TASK_INFO row per Kernel)%s", "", 2 * med / 1e6,
                   sqlite_rate > 0 ? "" : "\n");
        if (strcmp(mode, "db") == 0 && sqlite_rate > 0)
            printf("; %.0f%% of SQLite alone (%.2f M records/s)\n", 100.0 * med / sqlite_rate, sqlite_rate / 1e6);
        if (strcmp(mode, "files") == 0)
            printf("  %-10s %zu-byte lines, %u per file\n", "", sizeof(files_line) - 1, FILES_LINES);
        if (strcmp(mode, "jsonl") == 0 && rows)
            printf("  %-10s %.1f bytes/line%s", "", (double)jsonl_bytes / (double)rows, files_rate > 0 ? "" : "\n");
        if (strcmp(mode, "jsonl") == 0 && rows && files_rate > 0)
            printf("; %.0f%% of files alone (%.2f M lines/s)\n", 100.0 * med / files_rate, files_rate / 1e6);
        if (strcmp(mode, "standalone") == 0 && rows)
            printf("  %-10s peak RSS per stored record %.1f B; after msmon_monitor_results built the "
                   "msmon_result array: %.0f MB\n", "", rss[ok / 2] * 1048576.0 / (double)rows, rss_read[ok / 2]);
        fflush(stdout);
    }
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
    return system(cmd) == 0 ? 0 : 1;
}
