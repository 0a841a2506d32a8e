/* sink: where the daemon's metric records go (JSON logger now; TensorBoard and Prometheus
 * later). A record is a flat key -> value set; sinks are {write, flush, destroy} vtables. */
#ifndef MSMON_DAEMON_SINK_H
#define MSMON_DAEMON_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum sink_vtype { SINK_INT, SINK_UINT, SINK_DOUBLE, SINK_STR };

struct sink_kv {
    const char *key;
    enum sink_vtype type;
    int64_t i;
    uint64_t u;
    double d;          /* written as a "%.3f" string by the JSON logger (upstream quirk) */
    const char *s;     /* borrowed */
    size_t slen;
};

struct sink_record {
    uint64_t time_ns;          /* wall clock of receipt / sample */
    const char *device;        /* normalised device ("0", "host"), NULL for host metrics */
    const struct sink_kv *kv;  /* borrowed for the duration of write() */
    size_t n;
    /* Who sent it, where known (labels job/rank/pid of the Prometheus-style loggers):
     * SINK_NO_PID, SINK_NO_RANK and SINK_NO_JOB when unknown (host metrics, older plugins). */
    int32_t pid;
    int32_t rank;
    int64_t job;
    /* The sender's pod, namespace and container as it reported them (validated names, at most
     * 253 bytes; docs/deploy.md#attribution), NULL when unknown: labels of the same loggers. */
    const char *pod;
    const char *pod_namespace;
    const char *container;
};
#define SINK_NO_PID 0
#define SINK_NO_RANK (-1)
#define SINK_NO_JOB (-1)

/* A PluginStats record (ipc/data_sink.c) carries the message's upstream keys and one value
 * per session counter; a sink names the counters this way rather than by the IPC room's
 * table, so that sinks depend on nothing above this header. */
static inline bool sink_is_stats_counter(const char *key)
{
    static const char *const envelope[] = { "deviceId", "duration", "kind", "timestamp" };
    for (size_t i = 0; i < sizeof(envelope) / sizeof(envelope[0]); i++)
        if (strcmp(key, envelope[i]) == 0)
            return false;
    return true;
}

struct sink_ops {
    const char *name;
    int (*write)(void *self, const struct sink_record *rec);
    void (*flush)(void *self);
    void (*destroy)(void *self);
};

struct sink {
    const struct sink_ops *ops;
    void *self;
};

#endif
