/* proc_trace: the nputrace trace writer (docs/nputrace.md), one more output of the pipeline.
 * The session's window stage hands it the window's kept records and completed marker parts,
 * appended to chunked in-memory storage (capped; overflow counted as dropped_queue); stop()
 * writes the rank's Chrome trace-event file once, to a temporary name renamed into place, so
 * a reader never sees a truncated trace, and names the file to the session (output_config's
 * artifact callback). With --export-type Db the DB output is a second
 * output of the same session (docs/design/session.md#outputs), not part of this one. */
#ifndef MSMON_PLUGIN_PROC_TRACE_H
#define MSMON_PLUGIN_PROC_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plugin/pipeline/output.h"

#define PROC_TRACE_MAX_EVENTS (4u << 20)     /* records + marker parts kept per window */
#define PROC_TRACE_GZ_BYTES (64ull << 20)    /* estimated size above which the file is .json.gz */
#define PROC_TRACE_NAME_MAX 4096

/* "<dir>/msmonitor_trace_<pid>_rank<r>_step<s>-<e>.json" (+ ".gz" when gz). The Python side
 * builds the torch.profiler and analysis names from the same stem. 0 or -ENAMETOOLONG. */
int proc_trace_name(char *buf, size_t cap, const char *dir, int pid, int32_t rank, int32_t start, int32_t stop,
                    bool gz);
/* Test seams: event cap (0 = default) and size threshold for gzip (0 = default). */
void proc_trace_test_set_limits(size_t max_events, uint64_t gz_bytes);

#endif
