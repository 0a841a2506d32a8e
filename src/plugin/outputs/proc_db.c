/* proc_db: the SQLite exporter (--export-type DB, 05-outputs.md §3). consume() only appends
 * record copies under a short lock; tick()/stop() run on the monitor thread, turn the records
 * into rows in arrival order (so string ids are numbered like upstream, §3.5), and write each
 * table's batch in one transaction through a cached 64-row INSERT that rebinds only changed
 * parameters (SQLite's per-execution cost dominated one-row inserts). A failed batch is
 * rolled back, logged with the file and SQLite's message, and dropped; the session and the
 * training go on. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "plugin/pipeline/idmap.h"
#include "plugin/outputs/outfile.h"
#include "plugin/outputs/proc.h"

#define DB_MAX_PENDING (8u * 1024 * 1024) /* records buffered between two ticks */
#define DB_MARKER_PENDING 65536           /* open marker ranges per map (A2) */
#define DB_MAX_DEVICES 4096
#define DB_MAX_STRINGS (16u * 1024 * 1024)
#define DB_INVALID_U32 4294967295LL
#define DB_MARKER_CONN_OFFSET 4000000000ULL
#define DB_MULTI_ROWS 64                  /* rows per INSERT execution (<= 999 / 15 params) */

/* ---- table definitions ---- */
enum db_table_id {
    T_CANN_API = 0, T_TASK, T_COMPUTE_TASK_INFO, T_COMMUNICATION_OP, T_MSTX_EVENTS,
    T_MSMONITOR_HCCL, T_MSMONITOR_MEMORY, T_MSMONITOR_MEMSET, T_MSMONITOR_MEMCPY,
    T_INCR_COUNT
};
#define T_FIRST_EXTRA T_MSMONITOR_HCCL

struct db_table {
    const char *name;
    const char *cols;  /* column definitions for CREATE TABLE */
    int ncols;
    int real_col;      /* index of the one REAL column bound as double, or -1 */
};

static const struct db_table incr_tables[T_INCR_COUNT] = {
    [T_CANN_API] = {"CANN_API",
                    "startNs INTEGER, endNs INTEGER, type INTEGER, globalTid INTEGER, connectionId INTEGER, "
                    "name INTEGER", 6, -1},
    [T_TASK] = {"TASK",
                "startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER, globalTaskId INTEGER, "
                "globalPid INTEGER, taskType INTEGER, contextId INTEGER, streamId INTEGER, taskId INTEGER, "
                "modelId INTEGER", 11, -1},
    [T_COMPUTE_TASK_INFO] = {"COMPUTE_TASK_INFO",
                             "name INTEGER, globalTaskId INTEGER, blockNum INTEGER, mixBlockNum INTEGER, "
                             "taskType INTEGER, opType INTEGER, inputFormats INTEGER, inputDataTypes INTEGER, "
                             "inputShapes INTEGER, outputFormats INTEGER, outputDataTypes INTEGER, "
                             "outputShapes INTEGER, attrInfo INTEGER, opState INTEGER, hf32Eligible INTEGER",
                             15, -1},
    [T_COMMUNICATION_OP] = {"COMMUNICATION_OP",
                            "opName INTEGER, startNs INTEGER, endNs INTEGER, connectionId INTEGER, "
                            "groupName INTEGER, opId INTEGER, relay INTEGER, retry INTEGER, dataType INTEGER, "
                            "algType INTEGER, count NUMERIC, opType INTEGER, deviceId INTEGER", 13, -1},
    [T_MSTX_EVENTS] = {"MSTX_EVENTS",
                       "startNs INTEGER, endNs INTEGER, eventType INTEGER, rangeId INTEGER, category INTEGER, "
                       "message INTEGER, globalTid INTEGER, endGlobalTid INTEGER, domainId INTEGER, "
                       "connectionId INTEGER", 10, -1},
    [T_MSMONITOR_HCCL] = {"MSMONITOR_HCCL",
                          "startNs INTEGER, endNs INTEGER, deviceId INTEGER, streamId INTEGER, bandWidth REAL, "
                          "name INTEGER, commName INTEGER, globalPid INTEGER", 8, 4},
    [T_MSMONITOR_MEMORY] = {"MSMONITOR_MEMORY",
                            "startNs INTEGER, endNs INTEGER, deviceId INTEGER, streamId INTEGER, "
                            "connectionId INTEGER, operationType INTEGER, memoryKind INTEGER, address INTEGER, "
                            "bytes INTEGER, processId INTEGER", 10, -1},
    [T_MSMONITOR_MEMSET] = {"MSMONITOR_MEMSET",
                            "startNs INTEGER, endNs INTEGER, deviceId INTEGER, streamId INTEGER, "
                            "connectionId INTEGER, value INTEGER, bytes INTEGER, isAsync INTEGER", 8, -1},
    [T_MSMONITOR_MEMCPY] = {"MSMONITOR_MEMCPY",
                            "startNs INTEGER, endNs INTEGER, deviceId INTEGER, streamId INTEGER, "
                            "connectionId INTEGER, copyKind INTEGER, bytes INTEGER, isAsync INTEGER", 8, -1},
};

struct enum_row {
    int64_t id;
    const char *name;
};
static const struct enum_row enum_hccl_dtype[] = {
    {0, "INT8"}, {1, "INT16"}, {2, "INT32"}, {3, "FP16"}, {4, "FP32"}, {5, "INT64"},
    {6, "UINT64"}, {7, "UINT8"}, {8, "UINT16"}, {9, "UINT32"}, {10, "FP64"}, {11, "BFP16"},
    {12, "INT128"}, {14, "HIF8"}, {15, "FP8E4M3"}, {16, "FP8E5M2"}, {17, "FP8E8M0"},
    {65535, "INVALID_TYPE"},
};
static const struct enum_row enum_mstx_type[] = {{0, "marker"}, {1, "push/pop"}, {2, "start/end"}, {3, "marker_ex"}};
static const struct enum_row enum_api_type[] = {
    {5000, "runtime"}, {5500, "communication"}, {10000, "node"}, {15000, "model"}, {20000, "acl"},
    {50001, "op"}, {50002, "queue"}, {50003, "trace"}, {50004, "mstx"},
};
static const struct enum_row enum_memcpy_kind[] = {{0, "UNKNOWN"}, {1, "HTOH"}, {2, "HTOD"},
                                                   {3, "DTOH"}, {4, "DTOD"}, {5, "DEFAULT"}};
static const struct enum_row enum_mem_op[] = {{0, "ALLOCATION"}, {1, "RELEASE"}};
static const struct enum_row enum_mem_kind[] = {{0, "UNKNOWN"}, {1, "DEVICE"}};
#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ---- string-id pool: text → 0, 1, 2 … in first-request order (§3.5) ---- */
struct pool_ent {
    char *s;
    size_t len;
    uint64_t hash;
    uint64_t comm_counter; /* per-commName opName counter <k> (§3.3) */
};
struct strpool {
    struct pool_ent *ents; /* by id */
    size_t n, cap;
    uint32_t *slots;       /* open addressing: id + 1, 0 = empty */
    size_t nslots;
};

/* ---- growable int64 row arrays, one per incremental table ---- */
struct rows {
    int64_t *v;
    size_t n, cap; /* rows */
};

/* A cached INSERT of an incremental table and the values its parameters hold. */
struct ins_stmt {
    sqlite3_stmt *st;
    int64_t *shadow; /* rows * ncols values last bound; valid when shadow_ok */
    bool shadow_ok;
};

struct dev_marker { uint64_t ts; int64_t task_id; };
struct host_marker { uint64_t ts; int64_t name_id, domain_id, gtid; };

struct proc {
    /* config */
    char *log_dir;
    int32_t rank;
    uint64_t session_start_ns;
    int64_t pid;
    /* consume side: protected by lock */
    pthread_mutex_t lock;
    struct mon_record *pend;
    size_t npend, cappend;
    uint64_t dropped;
    struct log_ratelimit drop_rl;
    /* monitor-thread side */
    struct mon_record *work;
    size_t capwork;
    struct strpool pool;
    struct rows rows[T_INCR_COUNT];
    struct idmap *host_open, *dev_open;
    int64_t next_task_id, next_op_id;
    uint32_t devices[DB_MAX_DEVICES];
    size_t ndevices;
    bool extra_rows;      /* any MSMONITOR_* table received rows this session */
    bool append_ok;       /* at least one append committed */
    /* SQLite */
    char path[OUTFILE_PATH_MAX + 128];
    sqlite3 *db;
    dev_t fdev;           /* identity of the file db writes, to notice its removal */
    ino_t fino;
    struct log_ratelimit open_rl;
    struct ins_stmt ins[T_INCR_COUNT][2]; /* [0] one row, [1] DB_MULTI_ROWS rows */
    bool created[T_INCR_COUNT];
    bool stopped;
    uint64_t fail_streak; /* consecutive failed batches */
};

/* FNV-1a: fast enough for names of a few dozen bytes and well spread for open addressing. */
static uint64_t str_hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return h;
}

static void pool_fini(struct strpool *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->ents[i].s);
    free(p->ents);
    free(p->slots);
    memset(p, 0, sizeof(*p));
}

static int pool_grow(struct strpool *p)
{
    size_t ns = p->nslots ? p->nslots * 2 : 1024;
    uint32_t *slots = calloc(ns, sizeof(*slots));
    if (!slots)
        return -ENOMEM;
    for (size_t i = 0; i < p->n; i++) {
        size_t j = p->ents[i].hash & (ns - 1);
        while (slots[j])
            j = (j + 1) & (ns - 1);
        slots[j] = (uint32_t)(i + 1);
    }
    free(p->slots);
    p->slots = slots;
    p->nslots = ns;
    return 0;
}

/* Id of text s (NULL = ""), allocated on first request; returns the entry (NULL on ENOMEM or
 * when the pool is full, in which case *ret_id is -1). */
static struct pool_ent *pool_id(struct strpool *p, const char *s, int64_t *ret_id)
{
    if (!s)
        s = "";
    size_t n = strlen(s);
    uint64_t h = str_hash(s, n);
    *ret_id = -1;
    if (p->nslots == 0 && pool_grow(p) < 0)
        return NULL;
    size_t j = h & (p->nslots - 1);
    for (; p->slots[j]; j = (j + 1) & (p->nslots - 1)) {
        struct pool_ent *e = &p->ents[p->slots[j] - 1];
        if (e->hash == h && e->len == n && memcmp(e->s, s, n) == 0) {
            *ret_id = (int64_t)(p->slots[j] - 1);
            return e;
        }
    }
    if (p->n >= DB_MAX_STRINGS)
        return NULL;
    if (p->n == p->cap) {
        size_t nc = p->cap ? p->cap * 2 : 256;
        struct pool_ent *ne = realloc(p->ents, nc * sizeof(*ne));
        if (!ne)
            return NULL;
        p->ents = ne;
        p->cap = nc;
    }
    char *copy = malloc(n + 1);
    if (!copy)
        return NULL;
    memcpy(copy, s, n + 1);
    p->ents[p->n] = (struct pool_ent){copy, n, h, 0};
    p->slots[j] = (uint32_t)(p->n + 1);
    *ret_id = (int64_t)p->n;
    p->n++;
    if (p->n * 2 > p->nslots && pool_grow(p) < 0) {
        /* The table is still consistent (load < 1); growth is retried on the next insert. */
    }
    return &p->ents[*ret_id];
}

static int64_t sid(struct proc *p, const char *s)
{
    int64_t id;
    pool_id(&p->pool, s, &id);
    return id;
}

static int64_t *row_add(struct rows *r, int ncols)
{
    if (r->n == r->cap) {
        size_t nc = r->cap ? r->cap * 2 : 1024;
        int64_t *nv = realloc(r->v, nc * (size_t)ncols * sizeof(*nv));
        if (!nv)
            return NULL;
        r->v = nv;
        r->cap = nc;
    }
    return &r->v[r->n++ * (size_t)ncols];
}

static void device_seen(struct proc *p, uint32_t dev)
{
    size_t lo = 0, hi = p->ndevices;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (p->devices[mid] == dev)
            return;
        if (p->devices[mid] < dev)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (p->ndevices >= DB_MAX_DEVICES)
        return;
    memmove(&p->devices[lo + 1], &p->devices[lo], (p->ndevices - lo) * sizeof(p->devices[0]));
    p->devices[lo] = dev;
    p->ndevices++;
}

static int64_t gtid(uint32_t pid, uint32_t tid)
{
    return (int64_t)(((uint64_t)pid << 32) | tid);
}

#define ADD_ROW(p, t, r)                                             \
    int64_t *r = row_add(&(p)->rows[t], incr_tables[t].ncols);      \
    if (!r)                                                          \
        return -ENOMEM

static int add_api(struct proc *p, const struct mon_record *rec)
{
    const struct mon_api *a = &rec->u.api;
    int64_t type = rec->kind == MON_KIND_ACL_API ? 20000 : rec->kind == MON_KIND_RUNTIME_API ? 5000 : 10000;
    int64_t name = sid(p, a->name);
    ADD_ROW(p, T_CANN_API, r);
    r[0] = (int64_t)a->start; r[1] = (int64_t)a->end; r[2] = type;
    r[3] = gtid(a->pid, a->tid); r[4] = (int64_t)a->correlation_id; r[5] = name;
    return 0;
}

static int add_kernel(struct proc *p, const struct mon_kernel *k)
{
    int64_t name = sid(p, k->name), type = sid(p, k->type), na = sid(p, "N/A");
    int64_t task = p->next_task_id++;
    ADD_ROW(p, T_TASK, t);
    t[0] = (int64_t)k->start; t[1] = (int64_t)k->end; t[2] = k->device_id; t[3] = (int64_t)k->correlation_id;
    t[4] = task; t[5] = p->pid; t[6] = type; t[7] = DB_INVALID_U32; t[8] = k->stream_id;
    t[9] = DB_INVALID_U32; t[10] = DB_INVALID_U32;
    ADD_ROW(p, T_COMPUTE_TASK_INFO, c);
    c[0] = name; c[1] = task; c[2] = DB_INVALID_U32; c[3] = DB_INVALID_U32; c[4] = type;
    for (int i = 5; i < 15; i++)
        c[i] = na;
    device_seen(p, k->device_id);
    return 0;
}

static int add_comm(struct proc *p, const struct mon_comm *c)
{
    int64_t group;
    struct pool_ent *ge = pool_id(&p->pool, c->comm_name, &group);
    uint64_t k = ge ? ge->comm_counter++ : 0;
    const char *cname = c->comm_name ? c->comm_name : "";
    char hash[24], opname[1024];
    int hl = snprintf(hash, sizeof(hash), "%llu",
                      (unsigned long long)outfile_hash_id(cname, strlen(cname)));
    const char *g = hl > 3 ? hash + hl - 3 : hash;
    char *op = opname;
    char *heap = NULL;
    int need = snprintf(opname, sizeof(opname), "%s_%s_%llu_1", c->name ? c->name : "", g, (unsigned long long)k);
    if (need >= (int)sizeof(opname)) {
        heap = malloc((size_t)need + 1);
        if (!heap)
            return -ENOMEM;
        snprintf(heap, (size_t)need + 1, "%s_%s_%llu_1", c->name ? c->name : "", g, (unsigned long long)k);
        op = heap;
    }
    int64_t opid = sid(p, op);
    free(heap);
    int64_t alg = sid(p, c->alg_type), optype = sid(p, c->name);
    ADD_ROW(p, T_COMMUNICATION_OP, r);
    r[0] = opid; r[1] = (int64_t)c->start; r[2] = (int64_t)c->end; r[3] = (int64_t)c->correlation_id;
    r[4] = group; r[5] = p->next_op_id++; r[6] = 0; r[7] = 0; r[8] = c->data_type; r[9] = alg;
    r[10] = (int64_t)c->count; r[11] = optype; r[12] = c->device_id;
    device_seen(p, c->device_id);
    return 0;
}

static int add_host_marker(struct proc *p, const struct mon_marker *m)
{
    int64_t name = sid(p, m->name), domain = sid(p, m->domain);
    int64_t tid = gtid(m->obj0, m->obj1);
    if (m->flag & MON_MARKER_INSTANT) {
        ADD_ROW(p, T_MSTX_EVENTS, r);
        r[0] = r[1] = (int64_t)m->timestamp; r[2] = 0; r[3] = r[4] = DB_INVALID_U32;
        r[5] = name; r[6] = r[7] = tid; r[8] = domain; r[9] = (int64_t)(m->id + DB_MARKER_CONN_OFFSET);
    } else if (m->flag & MON_MARKER_START) {
        struct host_marker *h = idmap_put(p->host_open, m->id, NULL);
        if (h)
            *h = (struct host_marker){m->timestamp, name, domain, tid};
    } else if (m->flag & MON_MARKER_END) {
        struct host_marker *h = idmap_get(p->host_open, m->id);
        if (!h)
            return 0;
        ADD_ROW(p, T_MSTX_EVENTS, r);
        r[0] = (int64_t)h->ts; r[1] = (int64_t)m->timestamp; r[2] = 2; r[3] = r[4] = DB_INVALID_U32;
        r[5] = h->name_id; r[6] = h->gtid; r[7] = tid; r[8] = h->domain_id;
        r[9] = (int64_t)(m->id + DB_MARKER_CONN_OFFSET);
        idmap_del(p->host_open, m->id);
    }
    return 0;
}

static int add_task_marker(struct proc *p, const struct mon_marker *m, uint64_t start, int64_t task, int64_t type)
{
    ADD_ROW(p, T_TASK, t);
    t[0] = (int64_t)start; t[1] = (int64_t)m->timestamp; t[2] = m->obj0;
    t[3] = (int64_t)(m->id + DB_MARKER_CONN_OFFSET); t[4] = task; t[5] = p->pid; t[6] = type;
    t[7] = DB_INVALID_U32; t[8] = m->obj1; t[9] = DB_INVALID_U32; t[10] = DB_INVALID_U32;
    return 0;
}

static int add_device_marker(struct proc *p, const struct mon_marker *m)
{
    int64_t type = sid(p, "MsTx");
    if (m->flag & MON_MARKER_INSTANT) {
        return add_task_marker(p, m, m->timestamp, p->next_task_id++, type);
    } else if (m->flag & MON_MARKER_START) {
        struct dev_marker *d = idmap_put(p->dev_open, m->id, NULL);
        if (d)
            *d = (struct dev_marker){m->timestamp, p->next_task_id++};
    } else if (m->flag & MON_MARKER_END) {
        struct dev_marker *d = idmap_get(p->dev_open, m->id);
        if (!d)
            return 0;
        int rc = add_task_marker(p, m, d->ts, d->task_id, type);
        idmap_del(p->dev_open, m->id);
        device_seen(p, m->obj0);
        return rc;
    }
    return 0;
}

static int add_extra(struct proc *p, const struct mon_record *rec)
{
    switch (rec->kind) {
    case MON_KIND_HCCL: {
        const struct mon_hccl *h = &rec->u.hccl;
        int64_t name = sid(p, h->name), comm = sid(p, h->comm_name);
        ADD_ROW(p, T_MSMONITOR_HCCL, r);
        r[0] = (int64_t)h->start; r[1] = (int64_t)h->end; r[2] = h->device_id; r[3] = h->stream_id;
        memcpy(&r[4], &h->bandwidth, sizeof(double));
        r[5] = name; r[6] = comm; r[7] = p->pid;
        break;
    }
    case MON_KIND_MEMORY: {
        const struct mon_memory *m = &rec->u.memory;
        ADD_ROW(p, T_MSMONITOR_MEMORY, r);
        r[0] = (int64_t)m->start; r[1] = (int64_t)m->end; r[2] = m->device_id; r[3] = m->stream_id;
        r[4] = (int64_t)m->correlation_id; r[5] = m->op_type; r[6] = m->memory_kind;
        r[7] = (int64_t)m->address; r[8] = (int64_t)m->bytes; r[9] = m->pid;
        break;
    }
    case MON_KIND_MEMSET: {
        const struct mon_memset *m = &rec->u.memset;
        ADD_ROW(p, T_MSMONITOR_MEMSET, r);
        r[0] = (int64_t)m->start; r[1] = (int64_t)m->end; r[2] = m->device_id; r[3] = m->stream_id;
        r[4] = (int64_t)m->correlation_id; r[5] = m->value; r[6] = (int64_t)m->bytes; r[7] = m->is_async;
        break;
    }
    case MON_KIND_MEMCPY: {
        const struct mon_memcpy *m = &rec->u.memcpy;
        ADD_ROW(p, T_MSMONITOR_MEMCPY, r);
        r[0] = (int64_t)m->start; r[1] = (int64_t)m->end; r[2] = m->device_id; r[3] = m->stream_id;
        r[4] = (int64_t)m->correlation_id; r[5] = m->copy_kind; r[6] = (int64_t)m->bytes; r[7] = m->is_async;
        break;
    }
    default:
        return 0;
    }
    p->extra_rows = true;
    return 0;
}


static int add_record(struct proc *p, const struct mon_record *rec)
{
    if (mon_record_end(rec) < p->session_start_ns)
        return 0;
    if (mon_kind_is_api(rec->kind))
        return add_api(p, rec);
    switch (rec->kind) {
    case MON_KIND_KERNEL: return add_kernel(p, &rec->u.kernel);
    case MON_KIND_COMMUNICATION: return add_comm(p, &rec->u.comm);
    case MON_KIND_MARKER:
        return rec->u.marker.source_kind == 0 ? add_host_marker(p, &rec->u.marker)
                                              : add_device_marker(p, &rec->u.marker);
    default: return add_extra(p, rec);
    }
}

/* ---- SQLite ---- */

typedef int (*bind_fn)(sqlite3_stmt *st, const void *ctx, size_t i);

/* The first failure of a streak is logged at ERROR, repeats every 100 batches, and the
 * recovery once (a full disk would otherwise log every table every interval). */
static void db_log_error(struct proc *p, const char *what, const char *table, int rc)
{
    if (p->fail_streak++ % 100 != 0)
        return;
    LOG_ERROR("db: %s %s in %s failed: %s (%s); batch discarded, monitoring continues", what, table, p->path,
              p->db ? sqlite3_errmsg(p->db) : "no database", sqlite3_errstr(rc));
}

static int db_exec(struct proc *p, const char *sql)
{
    return sqlite3_exec(p->db, sql, NULL, NULL, NULL);
}

static void db_close(struct proc *p)
{
    for (int t = 0; t < T_INCR_COUNT; t++) {
        for (int k = 0; k < 2; k++) {
            sqlite3_finalize(p->ins[t][k].st);
            free(p->ins[t][k].shadow);
            p->ins[t][k] = (struct ins_stmt){NULL, NULL, false};
        }
        p->created[t] = false;
    }
    if (p->db) {
        int rc = sqlite3_close(p->db);
        if (rc != SQLITE_OK)
            LOG_WARN("db: closing %s: %s", p->path, sqlite3_errstr(rc));
        p->db = NULL;
    }
}

/* Create the file ourselves (0640, O_NOFOLLOW) and open it with SQLite. WAL journaling keeps
 * every committed batch intact if the process is killed; synchronous=OFF (spec) only risks
 * the newest batches on a power loss, not on a process crash. */
static int db_open(struct proc *p)
{
    int rc = outfile_make_name(p->path, sizeof(p->path), p->log_dir, p->rank, "db");
    if (rc < 0) {
        LOG_ERROR("db: output path in '%s' is too long", p->log_dir);
        return rc;
    }
    int fd = outfile_create(p->path, 0);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) != 0) {
        close(fd);
        fd = -errno;
    }
    if (fd < 0) {
        LOG_RL(&p->open_rl, 10000, LOG_LVL_ERROR, "db: cannot create %s: %s; rows are dropped until it can be",
               p->path, strerror(-fd));
        return fd;
    }
    p->fdev = st.st_dev;
    p->fino = st.st_ino;
    close(fd);
    rc = sqlite3_open_v2(p->path, &p->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK)
        goto fail;
    sqlite3_busy_timeout(p->db, INT_MAX);
    rc = db_exec(p, "PRAGMA journal_mode=WAL");
    if (rc == SQLITE_OK)
        rc = db_exec(p, "PRAGMA synchronous=OFF");
    if (rc != SQLITE_OK)
        goto fail;
    LOG_INFO("db: writing %s", p->path);
    return 0;
fail:
    LOG_ERROR("db: cannot open %s: %s", p->path, p->db ? sqlite3_errmsg(p->db) : sqlite3_errstr(rc));
    db_close(p);
    return -EIO;
}

static int table_exists(struct proc *p, const char *name, bool *ret)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(p->db, "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        *ret = rc == SQLITE_ROW;
        rc = (rc == SQLITE_ROW || rc == SQLITE_DONE) ? SQLITE_OK : rc;
    }
    sqlite3_finalize(st);
    return rc;
}

/* Statement "INSERT INTO table VALUES (?,...),(?,...)..." of nrows rows. */
static int prepare_insert(struct proc *p, const char *table, int ncols, int nrows, sqlite3_stmt **ret)
{
    size_t cap = 64 + strlen(table) + (size_t)nrows * ((size_t)ncols * 2 + 3);
    char *sql = malloc(cap);
    if (!sql)
        return SQLITE_NOMEM;
    size_t w = (size_t)snprintf(sql, cap, "INSERT INTO %s VALUES ", table);
    for (int r = 0; r < nrows; r++) {
        sql[w++] = r ? ',' : '(';
        if (r)
            sql[w++] = '(';
        for (int i = 0; i < ncols; i++) {
            if (i)
                sql[w++] = ',';
            sql[w++] = '?';
        }
        sql[w++] = ')';
    }
    sql[w] = '\0';
    int rc = sqlite3_prepare_v3(p->db, sql, (int)w, SQLITE_PREPARE_PERSISTENT, ret, NULL);
    free(sql);
    return rc;
}

/* BEGIN and CREATE TABLE IF NOT EXISTS of one table batch; *ret_what names a failing step. */
static int batch_begin(struct proc *p, const char *table, const char *cols, const char **ret_what)
{
    char sql[1024];
    int rc = db_exec(p, "BEGIN");
    if (rc != SQLITE_OK) {
        *ret_what = "begin transaction for";
        return rc;
    }
    *ret_what = "create table";
    snprintf(sql, sizeof(sql), "CREATE TABLE IF NOT EXISTS %s (%s)", table, cols);
    return db_exec(p, sql);
}

/* COMMIT when every step succeeded (rc == SQLITE_OK), else log and ROLLBACK. 0 or -EIO. */
static int batch_end(struct proc *p, const char *table, int rc, const char *what)
{
    if (rc == SQLITE_OK) {
        what = "commit of";
        rc = db_exec(p, "COMMIT");
    }
    if (rc != SQLITE_OK) {
        db_log_error(p, what, table, rc);
        if (!sqlite3_get_autocommit(p->db))
            db_exec(p, "ROLLBACK");
        return -EIO;
    }
    if (p->fail_streak) {
        LOG_INFO("db: writes to %s succeed again after %llu failed batches", p->path,
                 (unsigned long long)p->fail_streak);
        p->fail_streak = 0;
    }
    return 0;
}

/* One table batch: BEGIN, CREATE TABLE IF NOT EXISTS, prepared INSERT per row, COMMIT.
 * Used for the small end-of-session tables. Any failure → ROLLBACK. */
static int write_batch(struct proc *p, const char *table, const char *cols, int ncols, bind_fn bind,
                       const void *ctx, size_t n)
{
    sqlite3_stmt *st = NULL;
    const char *what;
    int rc = batch_begin(p, table, cols, &what);
    if (rc == SQLITE_OK) {
        what = "prepare insert into";
        rc = prepare_insert(p, table, ncols, 1, &st);
    }
    if (rc == SQLITE_OK)
        what = "insert into";
    for (size_t i = 0; i < n && rc == SQLITE_OK; i++) {
        rc = bind(st, ctx, i);
        if (rc == SQLITE_OK)
            rc = sqlite3_step(st);
        sqlite3_reset(st);
        if (rc == SQLITE_DONE)
            rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return batch_end(p, table, rc, what);
}

/* Bind rows [first, first + nrows) of an incremental table to statement s, skipping
 * parameters that already hold the value (bindings survive sqlite3_reset): constant columns
 * (N/A ids, invalid markers, the pid) are bound once per statement, not once per row. */
static int bind_rows(struct ins_stmt *s, const struct db_table *d, const int64_t *v, size_t nrows)
{
    size_t nval = nrows * (size_t)d->ncols;
    for (size_t k = 0; k < nval; k++) {
        if (s->shadow_ok && s->shadow[k] == v[k])
            continue;
        int rc;
        int col = (int)(k % (size_t)d->ncols);
        if (col == d->real_col) {
            double x;
            memcpy(&x, &v[k], sizeof(x));
            rc = sqlite3_bind_double(s->st, (int)k + 1, x);
        } else {
            rc = sqlite3_bind_int64(s->st, (int)k + 1, v[k]);
        }
        if (rc != SQLITE_OK) {
            s->shadow_ok = false;
            return rc;
        }
        s->shadow[k] = v[k];
    }
    s->shadow_ok = true;
    return SQLITE_OK;
}

static int step_rows(struct proc *p, struct ins_stmt *s, const struct db_table *d, int nrows, const int64_t *v)
{
    int rc = SQLITE_OK;
    if (!s->st) {
        if (!s->shadow && !(s->shadow = malloc(sizeof(int64_t) * (size_t)nrows * (size_t)d->ncols)))
            return SQLITE_NOMEM;
        rc = prepare_insert(p, d->name, d->ncols, nrows, &s->st);
        s->shadow_ok = false;
    }
    if (rc == SQLITE_OK)
        rc = bind_rows(s, d, v, (size_t)nrows);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(s->st);
    sqlite3_reset(s->st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* One incremental table batch: rows go DB_MULTI_ROWS at a time through a cached multi-row
 * INSERT (one statement execution per DB_MULTI_ROWS rows), the tail one row at a time. */
static int write_rows(struct proc *p, int t)
{
    const struct db_table *d = &incr_tables[t];
    const struct rows *r = &p->rows[t];
    struct ins_stmt *multi = &p->ins[t][1], *one = &p->ins[t][0];
    const char *what;
    size_t i = 0;
    int rc = batch_begin(p, d->name, d->cols, &what);
    if (rc == SQLITE_OK)
        what = "insert into";
    for (; rc == SQLITE_OK && i + DB_MULTI_ROWS <= r->n; i += DB_MULTI_ROWS)
        rc = step_rows(p, multi, d, DB_MULTI_ROWS, &r->v[i * (size_t)d->ncols]);
    for (; rc == SQLITE_OK && i < r->n; i++)
        rc = step_rows(p, one, d, 1, &r->v[i * (size_t)d->ncols]);
    return batch_end(p, d->name, rc, what);
}

struct int_rows_ctx {
    const int64_t *v;
    int ncols;
};

static int bind_int_row(sqlite3_stmt *st, const void *ctx, size_t i)
{
    const struct int_rows_ctx *c = ctx;
    const int64_t *r = &c->v[i * (size_t)c->ncols];
    int rc = SQLITE_OK;
    for (int col = 0; col < c->ncols && rc == SQLITE_OK; col++)
        rc = sqlite3_bind_int64(st, col + 1, r[col]);
    return rc;
}

static int bind_enum_row(sqlite3_stmt *st, const void *ctx, size_t i)
{
    const struct enum_row *e = &((const struct enum_row *)ctx)[i];
    int rc = sqlite3_bind_int64(st, 1, e->id);
    return rc == SQLITE_OK ? sqlite3_bind_text(st, 2, e->name, -1, SQLITE_STATIC) : rc;
}

static int bind_string_id(sqlite3_stmt *st, const void *ctx, size_t i)
{
    const struct strpool *pool = ctx;
    int rc = sqlite3_bind_int64(st, 1, (int64_t)i);
    return rc == SQLITE_OK ? sqlite3_bind_text(st, 2, pool->ents[i].s, (int)pool->ents[i].len, SQLITE_STATIC) : rc;
}

struct text_pair { const char *a, *b; };
static int bind_text_pair(sqlite3_stmt *st, const void *ctx, size_t i)
{
    const struct text_pair *t = &((const struct text_pair *)ctx)[i];
    int rc = sqlite3_bind_text(st, 1, t->a, -1, SQLITE_STATIC);
    return rc == SQLITE_OK ? sqlite3_bind_text(st, 2, t->b, -1, SQLITE_STATIC) : rc;
}

static int write_enum(struct proc *p, const char *table, const struct enum_row *rows, size_t n)
{
    return write_batch(p, table, "id INTEGER PRIMARY KEY, name TEXT", 2, bind_enum_row, rows, n);
}

/* The open file was removed (its directory deleted, or the file itself) or replaced: SQLite
 * would go on writing into the unlinked inode without an error, losing everything silently.
 * Log it and close; the next batch creates a new file, which gets the session tables. */
static void db_check_file(struct proc *p)
{
    struct stat st;
    if (!p->db || (stat(p->path, &st) == 0 && st.st_dev == p->fdev && st.st_ino == p->fino))
        return;
    LOG_ERROR("db: %s was removed or replaced; rows written to it are lost, continuing in a new file", p->path);
    db_close(p);
    p->append_ok = false;
}

/* Turn the pending records into rows and append every non-empty table. */
static int db_append(struct proc *p)
{
    db_check_file(p);
    pthread_mutex_lock(&p->lock);
    struct mon_record *recs = p->pend;
    size_t n = p->npend;
    size_t cap = p->cappend;
    p->pend = p->work;
    p->cappend = p->capwork;
    p->npend = 0;
    pthread_mutex_unlock(&p->lock);
    p->work = recs;
    p->capwork = cap;

    for (size_t i = 0; i < n; i++) {
        if (add_record(p, &recs[i]) < 0) {
            LOG_ERROR("db: out of memory while building rows; %zu records dropped", n - i);
            break;
        }
    }
    bool extra = false;
    size_t total = 0;
    for (int t = 0; t < T_INCR_COUNT; t++) {
        total += p->rows[t].n;
        if (t >= T_FIRST_EXTRA && p->rows[t].n)
            extra = true;
    }
    int rc = 0;
    if (total == 0)
        return 0;
    if (!p->db && (p->pool.n > 0 || extra) && db_open(p) < 0)
        rc = -EIO;
    for (int t = 0; t < T_INCR_COUNT && p->db; t++) {
        if (p->rows[t].n == 0)
            continue;
        if (write_rows(p, t) == 0)
            p->append_ok = true;
        else
            rc = -EIO;
    }
    for (int t = 0; t < T_INCR_COUNT; t++)
        p->rows[t].n = 0;
    return rc;
}

static int write_session_tables(struct proc *p, const char *parallel_group_info)
{
    int rc = 0;
    char host_uid[32] = "", host_name[256] = "";

    if (write_batch(p, "STRING_IDS", "id INTEGER, value TEXT", 2, bind_string_id, &p->pool, p->pool.n) < 0)
        rc = -EIO;
    if (write_enum(p, "ENUM_HCCL_DATA_TYPE", enum_hccl_dtype, NELEM(enum_hccl_dtype)) < 0 ||
        write_enum(p, "ENUM_MSTX_EVENT_TYPE", enum_mstx_type, NELEM(enum_mstx_type)) < 0 ||
        write_enum(p, "ENUM_API_TYPE", enum_api_type, NELEM(enum_api_type)) < 0)
        rc = -EIO;
    if (p->extra_rows &&
        (write_enum(p, "ENUM_MSMONITOR_MEMCPY_KIND", enum_memcpy_kind, NELEM(enum_memcpy_kind)) < 0 ||
         write_enum(p, "ENUM_MSMONITOR_MEMORY_OPERATION", enum_mem_op, NELEM(enum_mem_op)) < 0 ||
         write_enum(p, "ENUM_MSMONITOR_MEMORY_KIND", enum_mem_kind, NELEM(enum_mem_kind)) < 0))
        rc = -EIO;

    struct text_pair meta[5] = {{"SCHEMA_VERSION_MICRO", "1"}, {"SCHEMA_VERSION_MINOR", "2"},
                                {"SCHEMA_VERSION_MAJOR", "0"}, {"SCHEMA_VERSION", "1.2.0"},
                                {"parallel_group_info", parallel_group_info}};
    size_t nmeta = parallel_group_info && *parallel_group_info ? 5 : 4;
    if (write_batch(p, "META_DATA", "name TEXT, value TEXT", 2, bind_text_pair, meta, nmeta) < 0)
        rc = -EIO;

    outfile_host_uid(host_uid, sizeof(host_uid));
    if (gethostname(host_name, sizeof(host_name) - 1) != 0)
        host_name[0] = '\0';
    struct text_pair host = {host_uid, host_name};
    if (write_batch(p, "HOST_INFO", "hostUid TEXT, hostName TEXT", 2, bind_text_pair, &host, 1) < 0)
        rc = -EIO;

    int64_t times[2] = {(int64_t)p->session_start_ns, (int64_t)clock_real_ns()};
    struct int_rows_ctx tctx = {times, 2};
    if (write_batch(p, "SESSION_TIME_INFO", "startTimeNs INTEGER, endTimeNs INTEGER", 2, bind_int_row, &tctx,
                    1) < 0)
        rc = -EIO;

    /* RANK_DEVICE_MAP and NPU_INFO: one row per device seen, or a single -1 row. */
    size_t ndev = p->ndevices ? p->ndevices : 1;
    int64_t *map = calloc(ndev * 2, sizeof(*map));
    struct enum_row *npu = calloc(ndev, sizeof(*npu));
    if (!map || !npu) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < ndev; i++) {
        int64_t dev = p->ndevices ? (int64_t)p->devices[i] : -1;
        map[2 * i] = p->rank;
        map[2 * i + 1] = dev;
        npu[i] = (struct enum_row){dev, "UNKNOWN"};
    }
    bool exists = false;
    if (table_exists(p, "RANK_DEVICE_MAP", &exists) == SQLITE_OK && !exists) {
        struct int_rows_ctx mctx = {map, 2};
        if (write_batch(p, "RANK_DEVICE_MAP", "rankId INTEGER, deviceId INTEGER", 2, bind_int_row, &mctx,
                        ndev) < 0)
            rc = -EIO;
    }
    exists = false;
    if (table_exists(p, "NPU_INFO", &exists) == SQLITE_OK && !exists &&
        write_batch(p, "NPU_INFO", "id INTEGER, name TEXT", 2, bind_enum_row, npu, ndev) < 0)
        rc = -EIO;
out:
    free(map);
    free(npu);
    return rc;
}

/* ---- vtable ---- */

static void db_destroy(struct proc *p)
{
    if (!p)
        return;
    db_close(p);
    pool_fini(&p->pool);
    for (int t = 0; t < T_INCR_COUNT; t++)
        free(p->rows[t].v);
    idmap_destroy(p->host_open);
    idmap_destroy(p->dev_open);
    free(p->pend);
    free(p->work);
    free(p->log_dir);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

static int db_create(const struct proc_config *cfg, struct proc **ret)
{
    int rc = -ENOMEM;
    if (!cfg || !cfg->log_dir || !*cfg->log_dir)
        return -EINVAL;
    struct proc *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    pthread_mutex_init(&p->lock, NULL);
    p->log_dir = strdup(cfg->log_dir);
    if (!p->log_dir)
        goto fail;
    p->rank = cfg->rank;
    p->session_start_ns = cfg->session_start_ns;
    p->pid = getpid();
    if ((rc = idmap_create(DB_MARKER_PENDING, sizeof(struct host_marker), &p->host_open)) < 0 ||
        (rc = idmap_create(DB_MARKER_PENDING, sizeof(struct dev_marker), &p->dev_open)) < 0)
        goto fail;
    *ret = p;
    return 0;
fail:
    db_destroy(p);
    return rc;
}

static int db_start(struct proc *p)
{
    (void)p;
    return 0; /* the file is created lazily at the first save with something to write */
}

static void db_consume(struct proc *p, const struct mon_record *recs, size_t n)
{
    pthread_mutex_lock(&p->lock);
    if (p->npend + n > p->cappend) {
        size_t nc = p->cappend ? p->cappend : 4096;
        while (nc < p->npend + n && nc < DB_MAX_PENDING)
            nc *= 2;
        if (nc > DB_MAX_PENDING)
            nc = DB_MAX_PENDING;
        if (nc > p->cappend) {
            struct mon_record *nr = realloc(p->pend, nc * sizeof(*nr));
            if (nr) {
                p->pend = nr;
                p->cappend = nc;
            }
        }
    }
    size_t room = p->cappend - p->npend;
    size_t take = n < room ? n : room;
    if (take)
        memcpy(&p->pend[p->npend], recs, take * sizeof(*recs));
    p->npend += take;
    if (take < n) {
        p->dropped += n - take;
        LOG_RL(&p->drop_rl, 10000, LOG_LVL_WARNING,
               "db: %u records pending before the next report; %llu dropped so far (shorten --report-interval-s)",
               DB_MAX_PENDING, (unsigned long long)p->dropped);
    }
    pthread_mutex_unlock(&p->lock);
}

static int db_tick(struct proc *p)
{
    if (p->stopped)
        return 0;
    db_append(p);
    return 0; /* failures are logged per batch; monitoring continues */
}

static void db_set_kinds(struct proc *p, uint32_t mask)
{
    (void)p;
    (void)mask;
}

static int db_stop(struct proc *p, const char *parallel_group_info)
{
    int rc = 0;
    if (p->stopped)
        return 0;
    db_append(p);
    if (p->db && p->append_ok)
        rc = write_session_tables(p, parallel_group_info);
    if (p->dropped)
        LOG_WARN("db: %llu records dropped because too many were pending between reports",
                 (unsigned long long)p->dropped);
    pool_fini(&p->pool);
    db_close(p);
    p->stopped = true;
    return rc;
}

const struct proc_ops proc_db_ops = {
    .name = "DB",
    .create = db_create,
    .start = db_start,
    .consume = db_consume,
    .tick = db_tick,
    .set_kinds = db_set_kinds,
    .stop = db_stop,
    .destroy = db_destroy,
};
