/* trace_fmt: pure formatter of the nputrace trace file (Chrome trace-event JSON that Perfetto UI
 * and Holistic Trace Analysis load; docs/nputrace.md): the header object, one event per record
 * or completed marker part, ac2g flow halves and track metadata. No I/O: everything is written
 * into a caller's jw writer. Tested alone (test_trace_fmt). */
#ifndef MSMON_PLUGIN_TRACE_FMT_H
#define MSMON_PLUGIN_TRACE_FMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/jw.h"
#include "plugin/pipeline/pipeline.h"
#include "plugin/pipeline/record.h"

/* Device tracks use the device id as their pid (Kineto's convention, which HTA expects);
 * host tracks use the process id. */
struct trace_fmt_header {
    int32_t rank, world_size;       /* rank -1: unknown (written as 0 with "rankKnown": false) */
    const char *backend;            /* "mspti" | "cupti" (distributedInfo.backend: hccl | nccl) */
    uint32_t pid;
    uint64_t base_ns;               /* every ts is (t - base_ns) / 1000 µs */
    int32_t start_step, stop_step;  /* planned window [start, stop) */
    uint64_t window_end_ns;         /* when the window closed (0: at the session stop) */
    uint64_t after_window;          /* records left out as started after it */
    const uint32_t *devices;
    size_t ndevices;
};

/* Relative microseconds with exactly three decimals ("12.345"; "-0.500" before base), so a
 * double parsed from it keeps nanosecond order. Returns the length (always terminated). */
size_t trace_fmt_us(char *buf, size_t cap, uint64_t t_ns, uint64_t base_ns);

/* `{"schemaVersion":1,"distributedInfo":{…},"deviceProperties":[…],"baseTimeNanoseconds":…,
 * "msmonitor":{…},"traceEvents":[` — the caller then writes events separated by ',' and
 * closes with trace_fmt_footer. */
void trace_fmt_header(struct jw *w, const struct trace_fmt_header *h);
/* `],"displayTimeUnit":"ms"}`: closes what trace_fmt_header opened (the events in between
 * are written by separate jw runs, so this is plain text). */
const char *trace_fmt_footer(void);

/* One `X` event for a non-marker record (kernel, API, memcpy, memset, memory, Hccl,
 * Communication). host_pid: the pid of API records that carry none. Returns 0, or -ENOENT
 * for a record without an event (markers: see trace_fmt_range). */
int trace_fmt_record(struct jw *w, const struct mon_record *r, uint64_t base_ns);
/* The part a completed marker range (pipeline.h) adds: host part → `X` on the host thread,
 * device part → `X` on the device stream, instants → `i`. 0 or -ENOENT. */
int trace_fmt_range(struct jw *w, const struct pl_range *g, uint64_t base_ns);
/* ac2g flow half: start (`s`, at the API call) or finish (`f`, "bp":"e", at the kernel). */
void trace_fmt_flow(struct jw *w, bool start, uint64_t id, uint32_t pid, uint32_t tid, uint64_t ts_ns,
                    uint64_t base_ns);
/* `M` metadata: what is process_name | thread_name (text) or process_sort_index |
 * thread_sort_index (sort). */
void trace_fmt_meta(struct jw *w, const char *what, uint32_t pid, uint32_t tid, const char *text, int64_t sort);

/* Track of a record: *ret_pid, *ret_tid; true for device tracks. */
bool trace_fmt_track(const struct mon_record *r, uint32_t *ret_pid, uint32_t *ret_tid);
/* Correlation id of a record that can be an ac2g endpoint (API, kernel, memcpy, memset,
 * Communication); 0 otherwise. */
uint64_t trace_fmt_correlation(const struct mon_record *r);
/* Start time of a ranged record (0 for markers). */
uint64_t trace_fmt_start(const struct mon_record *r);

#endif
