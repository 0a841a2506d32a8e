/* ext_results: the last standalone session's results as the extension reads them — the lock
 * that keeps a start (which frees the borrowed result arrays) away from their readers (the
 * record getters of ext_monitor, Monitor.save of ext_xlsx), and which kinds they show. */
#ifndef MSMON_EXT_RESULTS_H
#define MSMON_EXT_RESULTS_H

#include <pthread.h>
#include <stdint.h>

/* Serialises start_monitor (which invalidates the borrowed result arrays) against readers
 * of those arrays (get_*_data, save_xlsx). Taken with the GIL released by writers. */
extern pthread_mutex_t ext_results_lock;

/* Name of an activity kind as ActivityKind.name ("Kernel"), or NULL for a kind the
 * standalone Monitor does not expose (the contract's standalone subset). Static storage. */
const char *ext_results_kind_name(int32_t kind);

#endif
