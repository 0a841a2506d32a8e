/* proc_db: the SQLite writer of the DB export (--export-type DB, docs/design/outputs.md#db-schema), streaming.
 * consume() copies the batch (records + paired marker parts) into chunks pushed to the bounded
 * async writer (asyncw.h), which waits for room (back-pressure on the completion thread)
 * before it drops and counts. The writer thread turns items into rows in arrival order with the pure formatter db_rows.c
 * (string ids numbered like upstream, docs/design/outputs.md#string-ids) and commits them in bounded transactions that also
 * carry the new STRING_IDS and, once per file, the constant tables, so a killed process leaves
 * a DB whose every committed row resolves. A failed transaction is rolled back, logged and
 * counted; the session and the training go on. tick() waits until the queue is written. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "common/jw.h"
#include "common/log.h"
#include "contract/dbschema.h"
#include "contract/names.h"
#include "contract/podid.h"
#include "plugin/outputs/asyncw.h"
#include "plugin/outputs/db_rows.h"
#include "plugin/outputs/outfile.h"
#include "plugin/outputs/proc_db.h"
#include "plugin/pipeline/filter.h"
#include "plugin/pipeline/output.h"
#include "plugin/pipeline/pipeline.h"

#define DB_CHUNK_ITEMS 256                /* most items per queue chunk (a backend batch); full ones are reused */
#define DB_BATCH_ITEMS 4096               /* queued items that wake the writer; the unit of the queue bound */
#define DB_MAX_BATCHES 32                 /* queue bound: 32 x 4096 items, ~15 MB */
#define DB_SPARE_CHUNKS (DB_MAX_BATCHES * DB_BATCH_ITEMS / DB_CHUNK_ITEMS)
#define DB_TX_ROWS 65536                  /* rows per transaction (bounds the row arrays) */
#define DB_IDLE_NS 100000000ull           /* the writer commits what came at least this often */
#define DB_MAX_DEVICES 4096
/* SQLite page size of a new file (set before its first table, and before WAL). 64 KiB pages:
 * a sixteenth of the b-tree page splits, WAL frame headers and pager calls of the 4 KiB
 * default per row appended (bench_plugin_e2e db: 1500 -> 1200 ns CPU per Kernel). But every
 * table takes at least one page and the first commit ~16 of them (1 MiB, plus as much WAL),
 * so only where there is room: DB_BIG_PAGE_ROOM free on the file system and allowed by
 * RLIMIT_FSIZE; elsewhere SQLite's default, which fits a first commit in ~100 KiB. */
#define DB_BIG_PAGE "65536"
#define DB_BIG_PAGE_ROOM (256ull << 20)
#define DB_MULTI_ROWS 64                  /* rows per INSERT execution (<= 999 / 15 params) */

/* ---- table definitions ---- */
struct enum_row {
    int64_t id;
    const char *name;
};
static const struct enum_row enum_hccl_dtype[] = {
#define DTYPE(value, name, bytes) {value, #name},
#include "contract/recnames.def"
#undef DTYPE
    {65535, "INVALID_TYPE"},
};
static const struct enum_row enum_mstx_type[] = {{0, "marker"}, {1, "push/pop"}, {2, "start/end"}, {3, "marker_ex"}};
static const struct enum_row enum_api_type[] = {
    {DBSCHEMA_API_TYPE_RUNTIME, "runtime"}, {5500, "communication"}, {DBSCHEMA_API_TYPE_NODE, "node"},
    {15000, "model"}, {DBSCHEMA_API_TYPE_ACL, "acl"},
    {50001, "op"}, {50002, "queue"}, {50003, "trace"}, {50004, "mstx"},
};
static const struct enum_row enum_memcpy_kind[] = {
#define MEMCPY_KIND(value, name) {value, #name},
#include "contract/recnames.def"
#undef MEMCPY_KIND
};
static const struct enum_row enum_mem_op[] = {{0, "ALLOCATION"}, {1, "RELEASE"}};
static const struct enum_row enum_mem_kind[] = {{0, "UNKNOWN"}, {1, "DEVICE"}};
#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* One queued item: a record, or a marker part the pipeline completed. */
struct db_item {
    bool is_range;
    union {
        struct mon_record rec;
        struct pl_range rng;
    } u;
};

/* The items of (part of) one consume() call; one asyncw item weighing n. */
struct db_chunk {
    struct asyncw_item q;
    size_t n;
    size_t cap;
    struct db_item items[];
};

/* A cached INSERT of an incremental table and the values its parameters hold. */
struct ins_stmt {
    sqlite3_stmt *st;
    int64_t *shadow; /* rows * ncols values last bound; valid when shadow_ok */
    bool shadow_ok;
};

struct output {
    struct outfile_sess s; /* config */
    struct asyncw *aw;
    pthread_mutex_t drop_mu; /* the drop total and its rate-limited line (completion threads) */
    uint64_t dropped;
    struct log_ratelimit drop_rl;
    /* written full-size chunks, for the producers (without: +25-30 % CPU per record in
     * bench_plugin_e2e db) */
    struct asyncw_spare *spare;
    /* writer side (the asyncw writer thread; the stopping thread once it ended) */
    struct db_rows fmt;   /* the row formatter: string pool, rows of this transaction */
    size_t str_written;   /* STRING_IDS rows committed to the current file */
    bool consts_written;  /* constant tables in the current file */
    bool extra_enums_written;
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

/* ---- SQLite ---- */

typedef int (*bind_fn)(sqlite3_stmt *st, const void *ctx, size_t i);

/* The first failure of a streak is logged at ERROR, repeats every 100 batches, and the
 * recovery once (a full disk would otherwise log every table every interval). */
static void db_log_error(struct output *p, const char *what, const char *table, int rc)
{
    if (p->fail_streak++ % 100 != 0)
        return;
    LOG_ERROR("db: %s %s in %s failed: %s (%s); batch discarded, monitoring continues", what, table, p->path,
              p->db ? sqlite3_errmsg(p->db) : "no database", sqlite3_errstr(rc));
}

static int db_exec(struct output *p, const char *sql)
{
    return sqlite3_exec(p->db, sql, NULL, NULL, NULL);
}

static void db_close(struct output *p)
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
        /* Back to a rollback journal: checkpoints the WAL and removes the -wal/-shm files, so
         * a finished DB is one file that read-only readers can open without side files (a
         * killed rank keeps its WAL, which the next opener recovers). */
        if (sqlite3_exec(p->db, "PRAGMA journal_mode=DELETE", NULL, NULL, NULL) != SQLITE_OK)
            LOG_WARN("db: %s: could not leave WAL mode at close: %s", p->path, sqlite3_errmsg(p->db));
        int rc = sqlite3_close(p->db);
        if (rc != SQLITE_OK)
            LOG_WARN("db: closing %s: %s", p->path, sqlite3_errstr(rc));
        p->db = NULL;
    }
}

/* Whether a new DB in dir gets DB_BIG_PAGE pages: DB_BIG_PAGE_ROOM free for us there and
 * within the file-size limit. */
static bool db_room_for_big_pages(const char *dir)
{
    struct statvfs fs;
    struct rlimit rl;

    if (statvfs(dir, &fs) != 0 || (uint64_t)fs.f_bavail * fs.f_frsize < DB_BIG_PAGE_ROOM)
        return false;
    return getrlimit(RLIMIT_FSIZE, &rl) == 0 && (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= DB_BIG_PAGE_ROOM);
}

/* Create the file ourselves (0640, O_NOFOLLOW) and open it with SQLite. WAL journaling keeps
 * every committed batch intact if the process is killed; synchronous=OFF (spec) only risks
 * the newest batches on a power loss, not on a process crash. */
static int db_open(struct output *p)
{
    int rc = outfile_make_name(p->path, sizeof(p->path), p->s.log_dir, p->s.rank, NAMES_EXT_DB);
    if (rc < 0) {
        LOG_ERROR("db: output path in '%s' is too long", p->s.log_dir);
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
    /* A 32 MiB page cache holds a whole transaction's pages (DB_TX_ROWS rows of the widest
     * tables), so nothing spills to the WAL mid-transaction (the default 2 MiB did). */
    rc = db_room_for_big_pages(p->s.log_dir) ? db_exec(p, "PRAGMA page_size=" DB_BIG_PAGE) : SQLITE_OK;
    if (rc == SQLITE_OK)
        rc = db_exec(p, "PRAGMA cache_size=-32768");
    if (rc == SQLITE_OK)
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

static int table_exists(struct output *p, const char *name, bool *ret)
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
static int prepare_insert(struct output *p, const char *table, int ncols, int nrows, sqlite3_stmt **ret)
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

/* CREATE TABLE IF NOT EXISTS, inside the caller's transaction. */
static int create_table(struct output *p, const char *table, const char *cols)
{
    char sql[1024];
    snprintf(sql, sizeof(sql), "CREATE TABLE IF NOT EXISTS %s (%s)", table, cols);
    return db_exec(p, sql);
}

/* COMMIT when every step succeeded (rc == SQLITE_OK), else log and ROLLBACK. 0 or -EIO. */
static int batch_end(struct output *p, const char *table, int rc, const char *what)
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

/* CREATE TABLE IF NOT EXISTS and one prepared INSERT per row, inside the caller's
 * transaction: the small tables. SQLite rc. */
static int insert_small(struct output *p, const char *table, const char *cols, int ncols, bind_fn bind,
                        const void *ctx, size_t n)
{
    sqlite3_stmt *st = NULL;
    int rc = create_table(p, table, cols);
    if (rc == SQLITE_OK)
        rc = prepare_insert(p, table, ncols, 1, &st);
    for (size_t i = 0; i < n && rc == SQLITE_OK; i++) {
        rc = bind(st, ctx, i);
        if (rc == SQLITE_OK)
            rc = sqlite3_step(st);
        sqlite3_reset(st);
        if (rc == SQLITE_DONE)
            rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return rc;
}

/* One small table in its own transaction (the end-of-session tables). 0 or -EIO. */
static int write_batch(struct output *p, const char *table, const char *cols, int ncols, bind_fn bind,
                       const void *ctx, size_t n)
{
    const char *what = "begin transaction for";
    int rc = db_exec(p, "BEGIN");
    if (rc == SQLITE_OK) {
        what = "insert into";
        rc = insert_small(p, table, cols, ncols, bind, ctx, n);
    }
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

static int step_rows(struct output *p, struct ins_stmt *s, const struct db_table *d, int nrows, const int64_t *v)
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
/* An incremental table's rows inside the caller's transaction: DB_MULTI_ROWS at a time
 * through a cached multi-row INSERT (one statement execution per DB_MULTI_ROWS rows), the
 * tail one row at a time. SQLite rc. */
static int insert_rows(struct output *p, int t)
{
    const struct db_table *d = &db_rows_tables[t];
    const struct rows *r = &p->fmt.rows[t];
    struct ins_stmt *multi = &p->ins[t][1], *one = &p->ins[t][0];
    size_t i = 0;
    int rc = SQLITE_OK;
    if (!p->created[t]) {
        rc = create_table(p, d->name, d->cols);
        p->created[t] = rc == SQLITE_OK;
    }
    for (; rc == SQLITE_OK && i + DB_MULTI_ROWS <= r->n; i += DB_MULTI_ROWS)
        rc = step_rows(p, multi, d, DB_MULTI_ROWS, &r->v[i * (size_t)d->ncols]);
    for (; rc == SQLITE_OK && i < r->n; i++)
        rc = step_rows(p, one, d, 1, &r->v[i * (size_t)d->ncols]);
    return rc;
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

/* STRING_IDS rows base, base + 1, … of the pool. */
struct str_ctx {
    const struct pl_strpool *pool;
    size_t base;
};

static int bind_string_id(sqlite3_stmt *st, const void *ctx, size_t i)
{
    const struct str_ctx *c = ctx;
    size_t len;
    const char *text = pl_strpool_text(c->pool, c->base + i, &len);
    int rc = sqlite3_bind_int64(st, 1, (int64_t)(c->base + i));
    return rc == SQLITE_OK ? sqlite3_bind_text(st, 2, text, (int)len, SQLITE_STATIC) : rc;
}

struct text_pair { const char *a, *b; };
static int bind_text_pair(sqlite3_stmt *st, const void *ctx, size_t i)
{
    const struct text_pair *t = &((const struct text_pair *)ctx)[i];
    int rc = sqlite3_bind_text(st, 1, t->a, -1, SQLITE_STATIC);
    return rc == SQLITE_OK ? sqlite3_bind_text(st, 2, t->b, -1, SQLITE_STATIC) : rc;
}
static int insert_enum(struct output *p, const char *table, const struct enum_row *rows, size_t n)
{
    return insert_small(p, table, "id INTEGER PRIMARY KEY, name TEXT", 2, bind_enum_row, rows, n);
}

/* The constant tables, once per file with its first transaction: a killed process leaves
 * them next to its rows. */
static int insert_consts(struct output *p)
{
    static const struct text_pair meta[4] = {
        {DBSCHEMA_META_SCHEMA_PREFIX "_MICRO", "1"}, {DBSCHEMA_META_SCHEMA_PREFIX "_MINOR", "2"},
        {DBSCHEMA_META_SCHEMA_PREFIX "_MAJOR", "0"}, {DBSCHEMA_META_SCHEMA_PREFIX, "1.2.0"}};
    char host_uid[32] = "", host_name[256] = "";
    int rc = create_table(p, DBSCHEMA_STRING_IDS, DBSCHEMA_STRING_IDS_COLS);
    if (rc == SQLITE_OK)
        rc = insert_enum(p, "ENUM_HCCL_DATA_TYPE", enum_hccl_dtype, NELEM(enum_hccl_dtype));
    if (rc == SQLITE_OK)
        rc = insert_enum(p, "ENUM_MSTX_EVENT_TYPE", enum_mstx_type, NELEM(enum_mstx_type));
    if (rc == SQLITE_OK)
        rc = insert_enum(p, "ENUM_API_TYPE", enum_api_type, NELEM(enum_api_type));
    if (rc == SQLITE_OK)
        rc = insert_small(p, DBSCHEMA_META_DATA, DBSCHEMA_META_DATA_COLS, 2, bind_text_pair, meta, 4);
    if (rc == SQLITE_OK) {
        /* where the rank ran: its pod, namespace, node and container (docs/outputs.md#session-end) */
        char pod[PODID_JSON_CAP];
        if (outfile_pod_json(pod, sizeof(pod)) > 0) {
            struct text_pair row = {NAMES_META_POD, pod};
            rc = insert_small(p, DBSCHEMA_META_DATA, DBSCHEMA_META_DATA_COLS, 2, bind_text_pair, &row, 1);
        }
    }
    if (rc == SQLITE_OK) {
        outfile_host_uid(host_uid, sizeof(host_uid));
        if (gethostname(host_name, sizeof(host_name) - 1) != 0)
            host_name[0] = '\0';
        struct text_pair host = {host_uid, host_name};
        rc = insert_small(p, DBSCHEMA_HOST_INFO, DBSCHEMA_HOST_INFO_COLS, 2, bind_text_pair, &host, 1);
    }
    return rc;
}

static int insert_extra_enums(struct output *p)
{
    int rc = insert_enum(p, "ENUM_MSMONITOR_MEMCPY_KIND", enum_memcpy_kind, NELEM(enum_memcpy_kind));
    if (rc == SQLITE_OK)
        rc = insert_enum(p, "ENUM_MSMONITOR_MEMORY_OPERATION", enum_mem_op, NELEM(enum_mem_op));
    if (rc == SQLITE_OK)
        rc = insert_enum(p, "ENUM_MSMONITOR_MEMORY_KIND", enum_mem_kind, NELEM(enum_mem_kind));
    return rc;
}

/* What the current file holds: everything, after db_open of a new file. */
static void file_reset(struct output *p)
{
    p->str_written = 0;
    p->consts_written = false;
    p->extra_enums_written = false;
}

/* The open file was removed (its directory deleted, or the file itself) or replaced: SQLite
 * would go on writing into the unlinked inode without an error, losing everything silently.
 * Log it and close; the next batch creates a new file, which gets the session tables. */
static void db_check_file(struct output *p)
{
    struct stat st;
    if (!p->db || (stat(p->path, &st) == 0 && st.st_dev == p->fdev && st.st_ino == p->fino))
        return;
    LOG_ERROR("db: %s was removed or replaced; rows written to it are lost, continuing in a new file", p->path);
    db_close(p);
    file_reset(p);
    p->append_ok = false;
}

static void clear_rows(struct output *p)
{
    db_rows_clear(&p->fmt);
}

/* Commit the rows built so far in one transaction with the strings they introduced (and the
 * constant tables, first time in this file). A failure rolls back everything of it and the
 * rows are counted as dropped_write. */
static int commit_tx(struct output *p)
{
    size_t nstr = pl_strpool_count(p->fmt.pool);
    size_t rows = p->fmt.tx_rows;
    const char *what = "begin transaction for", *table = "batch";
    char names[512] = ""; /* the tables of this transaction, for a failing COMMIT */
    size_t nl = 0;
    int rc;
    if (rows == 0 && (!p->db || nstr == p->str_written))
        return 0;
    db_check_file(p);
    if (!p->db && (nstr > 0 || p->fmt.extra_rows) && db_open(p) == 0)
        file_reset(p);
    if (!p->db) {
        atomic_fetch_add_explicit(&p->s.ctr->dropped_write, rows, memory_order_relaxed);
        clear_rows(p);
        return rows ? -EIO : 0;
    }
    rc = db_exec(p, "BEGIN");
    if (rc == SQLITE_OK && !p->consts_written) {
        what = "insert into";
        table = "constant tables";
        rc = insert_consts(p);
    }
    if (rc == SQLITE_OK && p->fmt.extra_rows && !p->extra_enums_written) {
        what = "insert into";
        table = "ENUM_MSMONITOR_*";
        rc = insert_extra_enums(p);
    }
    for (int t = 0; t < T_INCR_COUNT && rc == SQLITE_OK; t++) {
        if (p->fmt.rows[t].n == 0)
            continue;
        what = "insert into";
        table = db_rows_tables[t].name;
        if (nl < sizeof(names))
            nl += (size_t)snprintf(names + nl, sizeof(names) - nl, "%s%s", nl ? "+" : "", table);
        rc = insert_rows(p, t);
    }
    if (rc == SQLITE_OK && nstr > p->str_written) {
        struct str_ctx sc = {p->fmt.pool, p->str_written};
        what = "insert into";
        table = DBSCHEMA_STRING_IDS;
        rc = insert_small(p, DBSCHEMA_STRING_IDS, DBSCHEMA_STRING_IDS_COLS, 2, bind_string_id, &sc,
                          nstr - p->str_written);
    }
    if (rc == SQLITE_OK && nl)
        table = names; /* a COMMIT failure concerns them all */
    rc = batch_end(p, table, rc, what);
    if (rc == 0) {
        p->consts_written = true;
        p->extra_enums_written = p->extra_enums_written || p->fmt.extra_rows;
        p->str_written = nstr;
        p->append_ok = true;
        atomic_fetch_add_explicit(&p->s.ctr->written, rows, memory_order_relaxed);
    } else {
        atomic_fetch_add_explicit(&p->s.ctr->dropped_write, rows, memory_order_relaxed);
        /* a rolled-back CREATE TABLE is gone again */
        for (int t = 0; t < T_INCR_COUNT; t++)
            p->created[t] = false;
    }
    clear_rows(p);
    return rc;
}

/* Rows of one chunk, committed every DB_TX_ROWS rows. */
static void build_chunk(struct output *p, const struct db_chunk *c)
{
    for (size_t i = 0; i < c->n; i++) {
        const struct db_item *it = &c->items[i];
        int rc = it->is_range ? db_rows_add_range(&p->fmt, &it->u.rng) : db_rows_add_record(&p->fmt, &it->u.rec);
        if (rc < 0) {
            LOG_ERROR("db: out of memory while building rows; %zu records dropped", c->n - i);
            atomic_fetch_add_explicit(&p->s.ctr->dropped_write, c->n - i, memory_order_relaxed);
            break;
        }
        if (p->fmt.tx_rows >= DB_TX_ROWS)
            (void)commit_tx(p);
    }
}

static int write_session_tables(struct output *p, const char *parallel_group_info)
{
    int rc = 0;

    if (parallel_group_info && *parallel_group_info) {
        struct text_pair pgi = {NAMES_META_PARALLEL, parallel_group_info};
        if (write_batch(p, DBSCHEMA_META_DATA, DBSCHEMA_META_DATA_COLS, 2, bind_text_pair, &pgi, 1) < 0)
            rc = -EIO;
    }
    /* The filter and the counters at stop, so a reader of the file needs no log
     * (docs/outputs.md#session-end). */
    if (p->s.pl) {
        char filt[FILTER_MAX_TEXT + 1], stats[1024];
        struct pipeline_stats ps;
        struct jw w;
        pipeline_filter_text(p->s.pl, filt, sizeof(filt));
        pipeline_stats(p->s.pl, &ps);
        jw_init(&w, stats, sizeof(stats));
        pipeline_stats_obj(&w, &ps);
        struct text_pair end[2] = {{NAMES_META_FILTER, filt}, {NAMES_META_STATS, w.err ? "{}" : stats}};
        if (write_batch(p, DBSCHEMA_META_DATA, DBSCHEMA_META_DATA_COLS, 2, bind_text_pair, end, 2) < 0)
            rc = -EIO;
    }
    int64_t times[2] = {(int64_t)p->s.session_start_ns, (int64_t)clock_real_ns()};
    struct int_rows_ctx tctx = {times, 2};
    if (write_batch(p, DBSCHEMA_SESSION_TIME_INFO, DBSCHEMA_SESSION_TIME_INFO_COLS, 2, bind_int_row, &tctx,
                    1) < 0)
        rc = -EIO;

    /* RANK_DEVICE_MAP and NPU_INFO: one row per device seen, or a single -1 row. */
    uint32_t devs[DB_MAX_DEVICES];
    size_t nseen = 0;
    if (p->s.pl)
        pipeline_devices(p->s.pl, devs, DB_MAX_DEVICES, &nseen);
    if (nseen > DB_MAX_DEVICES)
        nseen = DB_MAX_DEVICES;
    size_t ndev = nseen ? nseen : 1;
    int64_t *map = calloc(ndev * 2, sizeof(*map));
    struct enum_row *npu = calloc(ndev, sizeof(*npu));
    if (!map || !npu) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < ndev; i++) {
        int64_t dev = nseen ? (int64_t)devs[i] : -1;
        map[2 * i] = p->s.rank;
        map[2 * i + 1] = dev;
        npu[i] = (struct enum_row){dev, "UNKNOWN"};
    }
    bool exists = false;
    if (table_exists(p, DBSCHEMA_RANK_DEVICE_MAP, &exists) == SQLITE_OK && !exists) {
        struct int_rows_ctx mctx = {map, 2};
        if (write_batch(p, DBSCHEMA_RANK_DEVICE_MAP, DBSCHEMA_RANK_DEVICE_MAP_COLS, 2, bind_int_row, &mctx,
                        ndev) < 0)
            rc = -EIO;
    }
    exists = false;
    if (table_exists(p, DBSCHEMA_NPU_INFO, &exists) == SQLITE_OK && !exists &&
        write_batch(p, DBSCHEMA_NPU_INFO, DBSCHEMA_NPU_INFO_COLS, 2, bind_enum_row, npu, ndev) < 0)
        rc = -EIO;
out:
    free(map);
    free(npu);
    return rc;
}

/* ---- queue ---- */

/* Longest a completion thread waits for a free chunk before it drops (test seams). */
static _Atomic uint64_t g_backpressure_ns = 5000000000ull;
static _Atomic size_t g_max_chunks = DB_MAX_BATCHES;

void proc_db_test_set_queue(size_t max_chunks, uint32_t backpressure_ms)
{
    atomic_store(&g_max_chunks, max_chunks ? max_chunks : DB_MAX_BATCHES);
    atomic_store(&g_backpressure_ns, (uint64_t)backpressure_ms * 1000000ull);
}

static struct db_chunk *chunk_get(struct output *p, size_t cap)
{
    struct db_chunk *c = cap == DB_CHUNK_ITEMS ? asyncw_spare_get(p->spare) : NULL;
    if (!c && (c = malloc(sizeof(*c) + cap * sizeof(c->items[0]))))
        c->cap = cap;
    if (c)
        c->n = 0;
    return c;
}

static void chunk_put(struct output *p, struct db_chunk *c)
{
    if (c && c->cap == DB_CHUNK_ITEMS)
        asyncw_spare_put(p->spare, c);
    else
        free(c);
}

/* Push the chunk being filled; once one push dropped, the rest of the call is dropped too
 * (no second back-pressure wait for the same batch). Returns the items dropped. */
static size_t push_chunk(struct output *p, struct db_chunk **cur, bool *gave_up)
{
    struct db_chunk *c = *cur;
    size_t dropped = 0;
    *cur = NULL;
    if (!c || c->n == 0) {
        chunk_put(p, c);
        return 0;
    }
    c->q.weight = c->n;
    if (*gave_up) {
        dropped = c->n;
        chunk_put(p, c);
        return dropped;
    }
    if (asyncw_push(p->aw, &c->q, &dropped) != 0)
        chunk_put(p, c);
    *gave_up = dropped > 0;
    return dropped;
}

static void chunk_add(struct db_chunk *c, bool is_range, const void *v)
{
    struct db_item *it = &c->items[c->n++];
    it->is_range = is_range;
    if (is_range)
        it->u.rng = *(const struct pl_range *)v;
    else
        it->u.rec = *(const struct mon_record *)v;
}

/* Records interleaved with the parts they completed, so rows keep arrival order. */
static void db_consume(struct output *p, const struct pl_batch *b)
{
    size_t total = b->nrecs + b->nranges, left = total, cap = 0, j = 0;
    uint64_t dropped = 0;
    struct db_chunk *cur = NULL;
    bool gave_up = false;

    for (size_t i = 0; i < b->nrecs; i++) {
        for (bool rec = true; rec || (j < b->nranges && b->ranges[j].at == i); rec = false) {
            if (cur && cur->n == cap) {
                dropped += push_chunk(p, &cur, &gave_up);
                if (gave_up) {
                    dropped += left;
                    goto out;
                }
            }
            if (!cur) {
                cap = left < DB_CHUNK_ITEMS ? left : DB_CHUNK_ITEMS;
                if (!(cur = chunk_get(p, cap))) {
                    dropped += left; /* counted like a full queue: nothing of it reaches the file */
                    goto out;
                }
            }
            if (rec)
                chunk_add(cur, false, &b->recs[i]);
            else
                chunk_add(cur, true, &b->ranges[j++]);
            left--;
        }
    }
out:
    dropped += push_chunk(p, &cur, &gave_up);
    if (dropped) {
        atomic_fetch_add_explicit(&p->s.ctr->dropped_queue, dropped, memory_order_relaxed);
        pthread_mutex_lock(&p->drop_mu);
        p->dropped += dropped;
        LOG_RL(&p->drop_rl, 10000, LOG_LVL_WARNING, "db: writer queue full; %llu records dropped so far",
               (unsigned long long)p->dropped);
        pthread_mutex_unlock(&p->drop_mu);
    }
}

/* ---- asyncw callbacks (the writer thread; the stopping thread once it ended) ---- */

static void aw_write(void *ctx, struct asyncw_item *it)
{
    struct db_chunk *c = (struct db_chunk *)it;
    build_chunk(ctx, c);
    chunk_put(ctx, c);
}

static void aw_sync(void *ctx)
{
    (void)commit_tx(ctx);
}

/* Keep the first k items: the part of a chunk that fits a full queue. */
static void aw_cut(void *ctx, struct asyncw_item *it, size_t k)
{
    (void)ctx;
    ((struct db_chunk *)it)->n = k;
}

static const struct asyncw_ops db_aw_ops = {.write = aw_write, .sync = aw_sync, .cut = aw_cut};

/* ---- vtable ---- */

static void db_destroy(struct output *p)
{
    if (!p)
        return;
    if (p->aw && !p->stopped) { /* without a stop, what was queued is still committed */
        asyncw_stop(p->aw);
        asyncw_drain(p->aw);
    }
    asyncw_destroy(p->aw);
    db_close(p);
    db_rows_fini(&p->fmt);
    outfile_sess_fini(&p->s);
    asyncw_spare_destroy(p->spare);
    pthread_mutex_destroy(&p->drop_mu);
    free(p);
}

static int db_create(const struct output_config *cfg, struct output **ret)
{
    int rc;
    if (!cfg || !cfg->pl)
        return -EINVAL;
    struct output *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    pthread_mutex_init(&p->drop_mu, NULL);
    if ((rc = outfile_sess_init(&p->s, cfg)) < 0 || (rc = db_rows_init(&p->fmt, getpid())) < 0 ||
        (rc = asyncw_spare_create(DB_SPARE_CHUNKS, &p->spare)) < 0)
        goto fail;
    struct asyncw_cfg ac = {
        .name = "MsMonitorDb",
        .what = "db",
        .capacity = atomic_load(&g_max_chunks) * DB_BATCH_ITEMS,
        .batch = DB_BATCH_ITEMS,
        .interval_ns = DB_IDLE_NS,
        .backpressure_ns = atomic_load(&g_backpressure_ns),
        /* a commit per batch keeps the transaction's row arrays small and in cache: one per
         * 100 ms grows them to DB_TX_ROWS and costs ~25 % more CPU per record (bench_plugin_e2e db) */
        .sync_each_batch = true,
        .cpu_ns = &p->s.ctr->cpu_ns,
        .ops = &db_aw_ops,
        .ctx = p,
    };
    if ((rc = asyncw_create(&ac, &p->aw)) < 0)
        goto fail;
    *ret = p;
    return 0;
fail:
    db_destroy(p);
    return rc;
}

/* The file is created lazily at the first commit with something to write. */
static int db_start(struct output *p)
{
    return p->stopped ? 0 : asyncw_start(p->aw);
}

static int db_tick(struct output *p)
{
    if (p->stopped)
        return 0;
    asyncw_flush(p->aw);
    return 0; /* failures are logged per batch; monitoring continues */
}

static void db_set_kinds(struct output *p, uint32_t mask)
{
    (void)p;
    (void)mask;
}

static int db_stop(struct output *p, const char *parallel_group_info)
{
    int rc = 0;
    if (p->stopped)
        return 0;
    asyncw_flush(p->aw);
    asyncw_stop(p->aw);
    asyncw_drain(p->aw); /* late arrivals, if any */
    if (p->db && p->append_ok)
        rc = write_session_tables(p, parallel_group_info);
    if (p->dropped)
        LOG_WARN("db: %llu records dropped because the writer queue was full",
                 (unsigned long long)p->dropped);
    db_close(p);
    p->stopped = true;
    return rc;
}

const struct output_ops proc_db_ops = {
    .name = "DB",
    .create = db_create,
    .start = db_start,
    .consume = db_consume,
    .tick = db_tick,
    .set_kinds = db_set_kinds,
    .stop = db_stop,
    .destroy = db_destroy,
    .prepare_dir = outfile_prepare_dir,
};
