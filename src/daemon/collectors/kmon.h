/* kmon: the kernel monitor (docs/design/daemon.md#host-metrics). Each cycle reads the /proc files under
 * --procfs_root, turns counters into per-interval deltas against the previous cycle and builds
 * one sink record (host metrics: device NULL, no pid/rank/job) for every logger. */
#ifndef MSMON_DAEMON_KMON_H
#define MSMON_DAEMON_KMON_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/loop.h"
#include "daemon/sinks/sink.h"

struct kmon_cfg {
    const char *procfs_root;     /* "/" in production; a fixture tree in tests (copied) */
    bool extended;               /* --extended_host_metrics: memory, load, disk */
    bool filter_nic;             /* --filter_nic_interfaces */
    const char *allow_prefixes;  /* --allow_interface_prefixes (copied) */
    long clk_tck;                /* ticks per second; 0 = sysconf(_SC_CLK_TCK) */
};

struct kmon;

/* Caller owns; free with kmon_destroy(). */
int kmon_create(const struct kmon_cfg *cfg, struct kmon **ret);
void kmon_destroy(struct kmon *k);

/* One cycle sampled at wall time wall_ns (the record's time) and monotonic mono_ns (the
 * interval for disk_util). Fills *ret; its keys and values are borrowed until the next call
 * or kmon_destroy. A file that cannot be read or parsed skips its metrics (rate-limited
 * WARNING) and restarts its deltas. Returns 0. */
int kmon_sample(struct kmon *k, uint64_t wall_ns, uint64_t mono_ns, struct sink_record *ret);

/* Run kmon_sample every interval_ms on the loop (fixed cadence) and write each record to out
 * (its self borrowed until kmon_destroy). The first cycle runs at once. */
int kmon_start(struct kmon *k, struct loop *l, uint64_t interval_ms, struct sink out);

/* Cycles run and the CPU time they took (bench, status). */
uint64_t kmon_cycles(const struct kmon *k);

#endif
