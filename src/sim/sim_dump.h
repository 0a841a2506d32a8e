/* sim_dump: the MSSIM_DUMP ground-truth file — one sorted-key JSON line per record appended
 * to a consumer buffer (see mssim.h). Buffered; thread-safe. */
#ifndef MSMON_SIM_DUMP_H
#define MSMON_SIM_DUMP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

extern _Atomic bool sim_dump_on;
static inline bool sim_dump_enabled(void) { return atomic_load_explicit(&sim_dump_on, memory_order_relaxed); }

/* (Re)open: closes a previous file after flushing it; "" turns dumping off. */
void sim_dump_open(const char *path);
void sim_dump_record(const void *rec, size_t size);
void sim_dump_flush(void);
/* Format one record as a JSON line (no newline) into buf; returns length or -ENOSPC. */
long sim_dump_format(const void *rec, size_t size, char *buf, size_t cap);

#endif
