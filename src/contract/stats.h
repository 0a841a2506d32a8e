/* stats: the session counters (docs/outputs.md#session-counters), written once for the plugin
 * that counts them, the daemon that keeps and shows them and Python (generated _contract.py).
 * STATS_COUNTERS(X) expands X(key, label, pos, what) per counter, in key order (the order of
 * every JSON object with them); key: C field and JSON key; label: its name in the stats line;
 * pos: its place in that line. */
#ifndef MSMON_CONTRACT_STATS_H
#define MSMON_CONTRACT_STATS_H

#define STATS_COUNTERS(X)                                                                                   \
    X(before_start, "before_start", 3, "ended before the session start")                                  \
    X(bytes_written, "bytes", 9, "bytes on disk")                                                         \
    X(consumed, "consumed", 0, "records delivered by the backend")                                        \
    X(cpu_ns, "cpu_ns", 10, "completion path + writer threads")                                           \
    X(dropped_declined, "dropped_declined", 5, "buffers the backend asked for and we declined")           \
    X(dropped_offline, "dropped_offline", 7, "metric datagrams dropped while the daemon was unreachable") \
    X(dropped_queue, "dropped_queue", 4, "output queue full after back-pressure")                         \
    X(dropped_write, "dropped_write", 6, "lines/rows lost to a write error")                               \
    X(filtered, "filtered", 2, "removed by the filter")                                                   \
    X(kept, "kept", 1, "passed filter and cutoff")                                                        \
    X(written, "written", 8, "lines/rows on disk")
#define STATS_COUNT 11

#endif
