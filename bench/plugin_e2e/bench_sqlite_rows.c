/* bench_sqlite_rows: what SQLite itself charges for the DB export's rows on this machine, with
 * no plugin around it — the floor under bench_plugin_e2e's db mode. Part 1: CPU per row of an
 * integer table by column count (11 = TASK, 15 = COMPUTE_TASK_INFO) through the 64-row INSERT
 * proc_db.c uses. Part 2: a Kernel's two rows per record, in one thread ("serial", proc_db.c's
 * shape) and split over two threads ("split": COMPUTE_TASK_INFO built in an in-memory database
 * by a second thread, copied into the file by SQLite's INSERT … SELECT transfer optimization),
 * the one way found to use a second core. Prints figures, asserts nothing.
 *
 * usage: bench_sqlite_rows [dir] [million_records] */
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "benchdb.h"


static double now_s(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The baselines abort on any SQLite error: a figure from a failed run would mislead. */
static void check(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "bench_sqlite_rows: %s failed\n", what);
        exit(1);
    }
}

static sqlite3 *open_db(const char *path, int file)
{
    sqlite3 *db = benchdb_open(path, file);
    check(db ? 0 : -1, "open");
    return db;
}

static void exec(sqlite3 *db, const char *sql)
{
    check(benchdb_exec(db, sql), sql);
}

static void ins_prepare(sqlite3 *db, struct benchdb_ins *s, const char *table, int ncols)
{
    check(benchdb_prepare(db, s, table, ncols), table);
}

static void ins_rows(sqlite3 *db, struct benchdb_ins *s, const int64_t *v, size_t n)
{
    check(benchdb_insert(db, s, v, n), "insert");
}

/* The values db_rows.c builds for Kernel record i (100 names, 3 types, 2 streams). */
static void kernel_rows(int64_t i, int64_t *t, int64_t *c)
{
    const int64_t inv = 4294967295LL, start = 1700000000000000000LL + i * 1000;
    int64_t tv[11] = {start, start + 800, 0, i + 1, i, 4242, 3 + i % 3, inv, i % 2, inv, inv};
    memcpy(t, tv, sizeof(tv));
    c[0] = 6 + i % 100;
    c[1] = i;
    c[2] = c[3] = inv;
    c[4] = 3 + i % 3;
    for (int k = 5; k < 15; k++)
        c[k] = 2;
}

/* ---- part 1: CPU per row by column count ---- */
static void per_column(const char *dir, size_t nrows)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/cols.db", dir);
    printf("part 1: CPU per row of an INTEGER table, %d-row INSERT, %d-row transactions, %zu rows\n", BENCHDB_MULTI,
           2 * BENCHDB_TX_RECS, nrows);
    static const int cols[] = {1, 5, 11, 15};
    int64_t *v = malloc(sizeof(int64_t) * BENCHDB_MULTI * BENCHDB_MAX_COLS);
    if (!v)
        check(-1, "allocation");
    for (size_t k = 0; k < sizeof(cols) / sizeof(cols[0]); k++) {
        int nc = cols[k];
        char sql[1024];
        int w = snprintf(sql, sizeof(sql), "CREATE TABLE t (");
        for (int c = 0; c < nc; c++)
            w += snprintf(sql + w, sizeof(sql) - (size_t)w, "%sc%d INTEGER", c ? ", " : "", c);
        snprintf(sql + w, sizeof(sql) - (size_t)w, ")");
        sqlite3 *db = open_db(path, 1);
        exec(db, sql);
        struct benchdb_ins s;
        ins_prepare(db, &s, "t", nc);
        for (int i = 0; i < BENCHDB_MULTI * nc; i++)
            v[i] = i % 7 == 0 ? 4294967295LL : i % 3;
        double c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
        for (size_t i = 0; i < nrows; i += BENCHDB_MULTI) {
            if (i % (2 * BENCHDB_TX_RECS) == 0)
                exec(db, i ? "COMMIT; BEGIN" : "BEGIN");
            v[0] = (int64_t)i; /* one changing value per statement */
            ins_rows(db, &s, v, BENCHDB_MULTI);
        }
        exec(db, "COMMIT");
        double ns = (now_s(CLOCK_PROCESS_CPUTIME_ID) - c0) / (double)nrows * 1e9;
        printf("  %2d columns: %6.0f ns/row\n", nc, ns);
        sqlite3_finalize(s.st);
        sqlite3_close(db);
    }
    free(v);
    benchdb_unlink(path);
}

/* ---- part 2: two rows per record, one thread or two ---- */
struct split {
    sem_t full[2], empty[2], ready;
    int64_t *cti[2];
    size_t nrec;
    double cpu;
};

/* Second thread: COMPUTE_TASK_INFO batches into in-memory databases /cti0 and /cti1 (memdb
 * VFS, shared by name with the writer's connection), alternately. */
static void *split_builder(void *arg)
{
    struct split *sp = arg;
    sqlite3 *db = open_db(":memory:", 0);
    struct benchdb_ins s[2];
    char sql[1024];
    for (int k = 0; k < 2; k++) {
        snprintf(sql, sizeof(sql), "ATTACH 'file:/bench_cti%d?vfs=memdb' AS m%d", k, k);
        exec(db, sql);
        snprintf(sql, sizeof(sql), "PRAGMA m%d.page_size=65536; PRAGMA m%d.journal_mode=OFF; CREATE TABLE m%d.c %s",
                 k, k, k, benchdb_cti_cols);
        exec(db, sql);
        snprintf(sql, sizeof(sql), "m%d.c", k);
        ins_prepare(db, &s[k], sql, 15);
    }
    sem_post(&sp->ready); /* both exist: the writer may attach them before the first batch */
    double c0 = now_s(CLOCK_THREAD_CPUTIME_ID);
    int b = 0;
    for (size_t i = 0; i < sp->nrec; i += BENCHDB_TX_RECS, b ^= 1) {
        int64_t t[11];
        sem_wait(&sp->empty[b]);
        snprintf(sql, sizeof(sql), "DELETE FROM m%d.c", b);
        exec(db, sql);
        for (size_t j = 0; j < BENCHDB_TX_RECS; j++)
            kernel_rows((int64_t)(i + j), t, &sp->cti[b][j * 15]);
        exec(db, "BEGIN");
        ins_rows(db, &s[b], sp->cti[b], BENCHDB_TX_RECS);
        exec(db, "COMMIT");
        sem_post(&sp->full[b]);
    }
    sp->cpu = now_s(CLOCK_THREAD_CPUTIME_ID) - c0;
    for (int k = 0; k < 2; k++) {
        sem_wait(&sp->empty[k]); /* the writer is done with both */
        sqlite3_finalize(s[k].st);
    }
    sqlite3_close(db);
    return NULL;
}

static void two_rows(const char *dir, size_t nrec, int split)
{
    char path[4200], sql[1024];
    struct split sp = {.nrec = nrec};
    pthread_t th;
    sqlite3_stmt *xfer[2] = {NULL, NULL};
    int64_t *task = malloc(sizeof(int64_t) * 11 * BENCHDB_TX_RECS), *cti = malloc(sizeof(int64_t) * 15 * BENCHDB_TX_RECS);
    sp.cti[0] = malloc(sizeof(int64_t) * 15 * BENCHDB_TX_RECS);
    sp.cti[1] = malloc(sizeof(int64_t) * 15 * BENCHDB_TX_RECS);
    if (!task || !cti || !sp.cti[0] || !sp.cti[1])
        check(-1, "allocation");
    snprintf(path, sizeof(path), "%s/two.db", dir);
    sqlite3 *db = open_db(path, 1);
    snprintf(sql, sizeof(sql), "CREATE TABLE TASK %s; CREATE TABLE COMPUTE_TASK_INFO %s", benchdb_task_cols,
             benchdb_cti_cols);
    exec(db, sql);
    struct benchdb_ins st, sc;
    ins_prepare(db, &st, "TASK", 11);
    ins_prepare(db, &sc, "COMPUTE_TASK_INFO", 15);
    if (split) {
        for (int k = 0; k < 2; k++) {
            sem_init(&sp.full[k], 0, 0);
            sem_init(&sp.empty[k], 0, 1);
        }
        sem_init(&sp.ready, 0, 0);
        for (int k = 0; k < 2; k++) /* no batch is built until both are attached */
            sem_wait(&sp.empty[k]);
        pthread_create(&th, NULL, split_builder, &sp);
        sem_wait(&sp.ready);
        for (int k = 0; k < 2; k++) {
            snprintf(sql, sizeof(sql), "ATTACH 'file:/bench_cti%d?vfs=memdb' AS m%d", k, k);
            exec(db, sql);
            snprintf(sql, sizeof(sql), "INSERT INTO main.COMPUTE_TASK_INFO SELECT * FROM m%d.c", k);
            if (sqlite3_prepare_v2(db, sql, -1, &xfer[k], NULL) != SQLITE_OK)
                check(-1, sql);
        }
        for (int k = 0; k < 2; k++)
            sem_post(&sp.empty[k]);
    }
    double t0 = now_s(CLOCK_MONOTONIC), c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
    int b = 0;
    for (size_t i = 0; i < nrec; i += BENCHDB_TX_RECS, b ^= 1) {
        for (size_t j = 0; j < BENCHDB_TX_RECS; j++)
            kernel_rows((int64_t)(i + j), &task[j * 11], &cti[j * 15]);
        exec(db, "BEGIN");
        ins_rows(db, &st, task, BENCHDB_TX_RECS);
        if (split) {
            sem_wait(&sp.full[b]);
            if (sqlite3_step(xfer[b]) != SQLITE_DONE)
                check(-1, sqlite3_errmsg(db));
            sqlite3_reset(xfer[b]);
        } else {
            ins_rows(db, &sc, cti, BENCHDB_TX_RECS);
        }
        exec(db, "COMMIT");
        if (split)
            sem_post(&sp.empty[b]);
    }
    double wall = now_s(CLOCK_MONOTONIC) - t0, cpu = now_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    sqlite3_stmt *q;
    long long rows = -1;
    if (sqlite3_prepare_v2(db, "SELECT (SELECT count(*) FROM TASK) + (SELECT count(*) FROM COMPUTE_TASK_INFO)",
                           -1, &q, NULL) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
        rows = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    for (int k = 0; k < 2; k++)
        sqlite3_finalize(xfer[k]);
    if (split) {
        for (int k = 0; k < 2; k++)
            sem_post(&sp.empty[k]);
        pthread_join(th, NULL);
    }
    printf("  %-6s %5.2f M records/s (%5.2f M rows/s), %5.0f ns CPU/record", split ? "split" : "serial",
           (double)nrec / wall / 1e6, 2.0 * (double)nrec / wall / 1e6, cpu / (double)nrec * 1e9);
    if (split)
        printf(" (%.0f of them on the builder thread)", sp.cpu / (double)nrec * 1e9);
    printf(", %lld rows\n", rows);
    sqlite3_finalize(st.st);
    sqlite3_finalize(sc.st);
    sqlite3_close(db);
    benchdb_unlink(path);
    free(task);
    free(cti);
    free(sp.cti[0]);
    free(sp.cti[1]);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    double m = argc > 2 ? atof(argv[2]) : 4.0;
    if (m <= 0 || m > 1000) {
        fprintf(stderr, "usage: %s [dir] [million_records (0-1000]]\n", argv[0]);
        return 2;
    }
    size_t nrec = ((size_t)(m * 1e6) + BENCHDB_TX_RECS - 1) / BENCHDB_TX_RECS * BENCHDB_TX_RECS;
    printf("SQLite %s\n", sqlite3_libversion());
    per_column(dir, nrec);
    printf("part 2: a TASK and a COMPUTE_TASK_INFO row per record, %zu records\n", nrec);
    for (int r = 0; r < 2; r++) {
        two_rows(dir, nrec, 0);
        two_rows(dir, nrec, 1);
    }
    return 0;
}
