/* db_rows: pure row formatter of the DB export (docs/design/outputs.md#tables, #string-ids): records and marker
 * parts (pipeline.h) → rows of the incremental tables, text → string ids in first-request
 * order (upstream numbering). No SQLite and no I/O; single-threaded (the DB writer thread). */
#ifndef MSMON_PLUGIN_DB_ROWS_H
#define MSMON_PLUGIN_DB_ROWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "contract/dbschema.h"
#include "plugin/pipeline/pipeline.h"
#include "plugin/pipeline/record.h"

/* The incremental tables of contract/dbschema.def, in its order: T_CANN_API, T_TASK, ... */
enum db_table_id {
#define DB_TABLE(id, ncols, real_col, cols) T_##id,
#include "contract/dbschema.def"
#undef DB_TABLE
    T_INCR_COUNT
};
#define DB_TABLE_ENUM(id) T_##id
#define DB_TABLE_ENUM_OF(id) DB_TABLE_ENUM(id)
#define T_FIRST_EXTRA DB_TABLE_ENUM_OF(DBSCHEMA_FIRST_EXTRA)

struct db_table {
    const char *name;
    const char *cols;  /* column definitions for CREATE TABLE */
    int ncols;
    int real_col;      /* index of the one REAL column bound as double, or -1 */
};

extern const struct db_table db_rows_tables[T_INCR_COUNT];

/* ---- growable int64 row arrays, one per incremental table ---- */
struct rows {
    int64_t *v;
    size_t n, cap; /* rows */
};

struct idmap;
#define DB_TASK_IDS_CAP 65536     /* device STARTs waiting for their part (oldest evicted) */

struct db_rows {
    struct pl_strpool *pool;      /* the session's string ids (STRING_IDS) */
    struct idmap *task_ids;       /* device marker id -> globalTaskId allocated at its START */
    struct sid_slot { const char *ptr; int64_t id; } sid_cache[256];
    struct rows rows[T_INCR_COUNT];
    size_t tx_rows;               /* rows built since db_rows_clear */
    int64_t next_task_id, next_op_id, pid;
    bool extra_rows;              /* any MSMONITOR_* table received rows this session */
};

/* Storage the caller provides; free with db_rows_fini(). 0 or -ENOMEM. */
int db_rows_init(struct db_rows *r, int64_t pid);
void db_rows_fini(struct db_rows *r);
/* Rows of one record (markers only request their string ids) / one completed marker part.
 * 0 or -ENOMEM. */
int db_rows_add_record(struct db_rows *r, const struct mon_record *rec);
int db_rows_add_range(struct db_rows *r, const struct pl_range *m);
/* Forget the built rows (after a commit or a rollback); ids and counters stay. */
void db_rows_clear(struct db_rows *r);

#endif
