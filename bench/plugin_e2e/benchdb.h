/* benchdb: the DB export's SQLite shape for the baselines of bench_plugin_e2e and
 * bench_sqlite_rows — proc_db.c's pragmas, its 64-row INSERT with parameters rebound only when
 * they change, its transaction size and the TASK / COMPUTE_TASK_INFO columns (docs/design/outputs.md#tables). */
#ifndef MSMON_BENCH_BENCHDB_H
#define MSMON_BENCH_BENCHDB_H

#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#define BENCHDB_MULTI 64          /* rows per INSERT execution */
#define BENCHDB_TX_RECS 32768     /* Kernels per transaction: 65536 rows */
#define BENCHDB_MAX_COLS 15

extern const char *const benchdb_task_cols;
extern const char *const benchdb_cti_cols;

struct benchdb_ins {
    sqlite3_stmt *st;
    int ncols;
    int64_t shadow[BENCHDB_MULTI * BENCHDB_MAX_COLS];
    int shadow_ok;
};

/* Open (a file: removed first, WAL; else journal off) with proc_db.c's pragmas. NULL on error
 * (printed). */
sqlite3 *benchdb_open(const char *path, int file);
/* sqlite3_exec; prints and returns -1 on error. */
int benchdb_exec(sqlite3 *db, const char *sql);
/* The 64-row INSERT into table of ncols columns. 0 or -1 (printed). */
int benchdb_prepare(sqlite3 *db, struct benchdb_ins *s, const char *table, int ncols);
/* n rows of v (n a multiple of BENCHDB_MULTI). 0 or -1 (printed). */
int benchdb_insert(sqlite3 *db, struct benchdb_ins *s, const int64_t *v, size_t n);
/* Fewer than BENCHDB_MULTI rows through a one-row statement (a session's tail). 0 or -1. */
int benchdb_insert_tail(sqlite3 *db, const char *table, int ncols, const int64_t *v, size_t n);
/* Remove path and its -wal and -shm files. */
void benchdb_unlink(const char *path);

#endif
