/* proc_db: the SQLite DB output (docs/design/outputs.md#tables), proc_db_ops of the output
 * table (pipeline/output.h). Only its test seam is public. */
#ifndef MSMON_PLUGIN_PROC_DB_H
#define MSMON_PLUGIN_PROC_DB_H

#include <stddef.h>
#include <stdint.h>

/* Test seam of the DB writer queue: at most max_chunks chunks of 4096 items (0 = default 32)
 * and the longest a completion thread waits for room before it drops (default 5000 ms). */
void proc_db_test_set_queue(size_t max_chunks, uint32_t backpressure_ms);

#endif
