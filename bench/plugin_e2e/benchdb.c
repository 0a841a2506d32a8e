/* benchdb: proc_db.c's SQLite shape for the benchmarks' baselines (benchdb.h). Kept apart from
 * the plugin on purpose: the baselines must measure SQLite, not call into what they measure. */
#include "benchdb.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

const char *const benchdb_task_cols =
    "(startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER, globalTaskId INTEGER, "
    "globalPid INTEGER, taskType INTEGER, contextId INTEGER, streamId INTEGER, taskId INTEGER, modelId INTEGER)";
const char *const benchdb_cti_cols =
    "(name INTEGER, globalTaskId INTEGER, blockNum INTEGER, mixBlockNum INTEGER, taskType INTEGER, "
    "opType INTEGER, inputFormats INTEGER, inputDataTypes INTEGER, inputShapes INTEGER, outputFormats INTEGER, "
    "outputDataTypes INTEGER, outputShapes INTEGER, attrInfo INTEGER, opState INTEGER, hf32Eligible INTEGER)";

int benchdb_exec(sqlite3 *db, const char *sql)
{
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK)
        return 0;
    fprintf(stderr, "bench: %s: %s\n", sql, sqlite3_errmsg(db));
    return -1;
}

sqlite3 *benchdb_open(const char *path, int file)
{
    sqlite3 *db = NULL;
    if (file)
        benchdb_unlink(path);
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI,
                        NULL) != SQLITE_OK ||
        benchdb_exec(db, "PRAGMA page_size=65536") != 0 || benchdb_exec(db, "PRAGMA cache_size=-32768") != 0 ||
        benchdb_exec(db, file ? "PRAGMA journal_mode=WAL" : "PRAGMA journal_mode=OFF") != 0 ||
        benchdb_exec(db, "PRAGMA synchronous=OFF") != 0) {
        fprintf(stderr, "bench: cannot open %s: %s\n", path, db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return NULL;
    }
    return db;
}

static int prepare_rows(sqlite3 *db, const char *table, int ncols, int nrows, sqlite3_stmt **st)
{
    char sql[8192];
    int w = snprintf(sql, sizeof(sql), "INSERT INTO %s VALUES ", table);
    for (int r = 0; r < nrows && w < (int)sizeof(sql); r++) {
        w += snprintf(sql + w, sizeof(sql) - (size_t)w, "%s(", r ? "," : "");
        for (int c = 0; c < ncols && w < (int)sizeof(sql); c++)
            w += snprintf(sql + w, sizeof(sql) - (size_t)w, "%s?", c ? "," : "");
        if (w < (int)sizeof(sql))
            w += snprintf(sql + w, sizeof(sql) - (size_t)w, ")");
    }
    if (w < (int)sizeof(sql) && sqlite3_prepare_v3(db, sql, w, SQLITE_PREPARE_PERSISTENT, st, NULL) == SQLITE_OK)
        return 0;
    fprintf(stderr, "bench: INSERT INTO %s: %s\n", table, sqlite3_errmsg(db));
    return -1;
}

int benchdb_prepare(sqlite3 *db, struct benchdb_ins *s, const char *table, int ncols)
{
    memset(s, 0, sizeof(*s));
    s->ncols = ncols;
    return ncols > BENCHDB_MAX_COLS ? -1 : prepare_rows(db, table, ncols, BENCHDB_MULTI, &s->st);
}

int benchdb_insert(sqlite3 *db, struct benchdb_ins *s, const int64_t *v, size_t n)
{
    int nval = BENCHDB_MULTI * s->ncols;
    for (size_t i = 0; i + BENCHDB_MULTI <= n; i += BENCHDB_MULTI, v += nval) {
        for (int k = 0; k < nval; k++) {
            if (s->shadow_ok && s->shadow[k] == v[k])
                continue;
            sqlite3_bind_int64(s->st, k + 1, v[k]);
            s->shadow[k] = v[k];
        }
        s->shadow_ok = 1;
        int rc = sqlite3_step(s->st);
        sqlite3_reset(s->st);
        if (rc != SQLITE_DONE) {
            fprintf(stderr, "bench: insert: %s\n", sqlite3_errmsg(db));
            return -1;
        }
    }
    return 0;
}

int benchdb_insert_tail(sqlite3 *db, const char *table, int ncols, const int64_t *v, size_t n)
{
    sqlite3_stmt *st = NULL;
    int rc = prepare_rows(db, table, ncols, 1, &st);
    for (size_t i = 0; rc == 0 && i < n; i++, v += ncols) {
        for (int c = 0; c < ncols; c++)
            sqlite3_bind_int64(st, c + 1, v[c]);
        if (sqlite3_step(st) != SQLITE_DONE) {
            fprintf(stderr, "bench: insert: %s\n", sqlite3_errmsg(db));
            rc = -1;
        }
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    return rc;
}

void benchdb_unlink(const char *path)
{
    char side[4200];
    unlink(path);
    snprintf(side, sizeof(side), "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof(side), "%s-shm", path);
    unlink(side);
}
