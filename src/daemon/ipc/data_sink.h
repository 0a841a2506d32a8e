/* data_sink: the daemon side of `data` datagrams (docs/design/outputs.md#acceptance): validation, device
 * normalisation (D7), OpStats expansion, and fan-out to the configured sinks. */
#ifndef MSMON_DAEMON_DATA_SINK_H
#define MSMON_DAEMON_DATA_SINK_H

#include <stddef.h>
#include <stdint.h>

#include "common/log.h"
#include "daemon/ipc/registry.h"
#include "daemon/ipc/status.h"
#include "daemon/sinks/sink.h"

struct steps_store;
struct peer_cache;

#define DATA_MAX_SINKS 8

struct data_router {
    struct sink sinks[DATA_MAX_SINKS];
    size_t nsinks;
    struct status_table *st; /* borrowed, may be NULL: where PluginStats counters go */
    struct registry *reg;    /* borrowed, may be NULL: where PluginInfo (library) goes */
    struct steps_store *steps; /* borrowed, may be NULL: where StepSummary payloads go */
    struct peer_cache *peers;  /* borrowed, may be NULL: senders' pods (PluginHealth in, labels out) */
    uint64_t accepted;   /* messages that passed validation */
    uint64_t rejected;
    uint64_t spoofed;    /* PluginStats/PluginInfo naming a pid other than their sender's */
    uint64_t bad_acks;   /* ConfigAck malformed, spoofed or naming an unknown delivery */
    struct log_ratelimit rl_spoof;
    uint64_t health_rejected; /* PluginHealth reports that failed validation */
    struct log_ratelimit rl_health;
    uint64_t pod_refused;     /* pod fields of PluginHealth reports that were not valid names */
    struct log_ratelimit rl_pod;
};

/* Storage provided by the caller; no sinks. */
void data_router_init(struct data_router *dr);
/* Takes ownership of s (destroyed by data_router_fini). -ENOSPC beyond DATA_MAX_SINKS. */
int data_router_add(struct data_router *dr, struct sink s);
void data_router_fini(struct data_router *dr);
/* Hand one record (host metrics, daemon-made series) to every sink, as data_handle does for
 * `data` payloads. rec is borrowed for the call. Returns 1. */
int data_router_write(struct data_router *dr, const struct sink_record *rec);
/* The router seen through the sink interface (write = data_router_write; no flush, no
 * destroy: dr stays the owner), for the producers beside the `data` datagrams (the step
 * windows, the kernel monitor) so that they depend on sinks/sink.h, not on this room. */
struct sink data_router_sink(struct data_router *dr);

/* The enabled sinks' names joined with ',' ("json,tensorboard"; "" for none) into out. */
void data_router_names(const struct data_router *dr, char *out, size_t cap);

/* One `data` payload received at wall time now_ns. Returns the number of records written
 * (0 or more), or -EINVAL when the payload is refused (logged "Error parsing message"). */
int data_handle(struct data_router *dr, const char *payload, size_t len, uint64_t now_ns);
/* The same for a datagram whose sender the kernel vouched for (SCM_CREDENTIALS pid, 0 when
 * unknown, e.g. without the peer-pid check): PluginStats/PluginInfo that name another pid are
 * counted in `spoofed` and not shown, and every record is labelled with the sender's pid (and
 * its job, from its status reports). */
int data_handle_from(struct data_router *dr, const char *payload, size_t len, uint64_t now_ns,
                     int32_t sender_pid);
/* A sender the kernel named, across pid namespaces (docs/deploy.md#identity): pid is how the
 * node numbers it (the key of everything it reports), ns_pid how it numbers itself (what its
 * payloads say). */
struct data_sender {
    int32_t pid;
    int32_t ns_pid;
};
/* data_handle_from for such a sender (NULL: unknown, as sender_pid 0). */
int data_handle_sender(struct data_router *dr, const char *payload, size_t len, uint64_t now_ns,
                       const struct data_sender *sender);

/* Normalise a deviceId text: "-1", "4294967295", "18446744073709551615", "host" -> "host". */
const char *data_norm_device(const char *text);

#endif
