/* rpc_methods: validation of one RPC request body and the three methods (docs/design/rpc.md#request-validation, #getversion):
 * getStatus, getVersion, setKinetOnDemandRequest, as a static {name, handler} table.
 * Transport-free: the server hands in the body and writes back whatever reply comes out. */
#ifndef MSMON_DAEMON_RPC_METHODS_H
#define MSMON_DAEMON_RPC_METHODS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/pathnorm.h"
#include "daemon/ipc/peer.h"
#include "daemon/ipc/registry.h"
#include "daemon/ipc/status.h"

struct steps_store;

#define RPC_MAX_DEPTH 10
/* "RPC message received = <body>": the first RPC_LOG_BODY_MAX bytes of the body (escaped),
 * at most RPC_LOG_BURST lines at once then RPC_LOG_PER_SEC a second; the rest are counted in
 * the next line's "(suppressed N similar messages)". */
#define RPC_LOG_BODY_MAX 256
#define RPC_LOG_PER_SEC 20
#define RPC_LOG_BURST 100

/* What the Prometheus store folded at its bounds (docs/prometheus.md#bounds), for getStatus. */
struct rpc_prom_stats {
    uint64_t series;           /* live series */
    uint64_t folded_process;   /* samples folded at --prometheus_max_series_per_process */
    uint64_t folded_daemon;    /* samples folded at --prometheus_max_series */
    uint64_t processes_folded; /* processes that reached their bound */
};

struct rpc_ctx {
    struct registry *reg;     /* borrowed */
    struct status_table *st;  /* borrowed */
    const char *version;      /* getVersion answer */
    struct steps_store *steps; /* borrowed, may be NULL: getSteps (rpc_steps.c) */
    struct peer_cache *peers;  /* borrowed, may be NULL: pods, namespaces (docs/deploy.md#attribution) */
    /* NULL without --use_prometheus/--remote_write_url; a callback because the store lives in
     * the sinks layer, which RPC does not include */
    void (*prom_stats)(void *arg, struct rpc_prom_stats *ret);
    void *prom_arg;
};

/* --allowed_log_dirs for every rpc_handle() of the process (a setter rather than an rpc_ctx
 * field: it holds for every rpc_handle() of the process). Borrowed until the next
 * call; NULL or empty: any --log-file is passed on as before. */
void rpc_set_allowed_log_dirs(const struct pathnorm_roots *roots);

/* getStatus marks a process "gone", and a trace reporter stops holding the nputrace gate,
 * when fn says its pid has exited (a setter like the one above). NULL (the default): no
 * process is judged, as in unit tests whose pids are made up. dynolog sets the one liveness
 * rule of the daemon, peer_gone (src/daemon/ipc/peer.h: a zombie is gone too). */
void rpc_set_pid_gone(bool (*fn)(int32_t pid));

/* Handle one request body (raw bytes as received). On 0, *ret_reply is the reply JSON the
 * caller owns (free()), or NULL when the request gets no reply (logged). -ENOMEM otherwise. */
int rpc_handle(const struct rpc_ctx *ctx, const char *body, size_t len, char **ret_reply,
               size_t *ret_len);

/* --allowed_log_dirs on a config text: every NPU_MONITOR_LOG_FILE / ACTIVITIES_LOG_FILE value
 * (parsed with the plugin's kvtext rules) must resolve below a root; a TRACE config must name
 * one. 0 = allowed (also when roots is NULL/empty); -EACCES with the one-line reason in why. */
int rpc_check_log_dirs(const struct pathnorm_roots *roots, const char *config, size_t len,
                       bool trace, char *why, size_t whycap);

/* The status gate of docs/design/rpc.md#status-gate: "effective", "ineffective" or "unknown". */
const char *rpc_gate(enum reg_kind kind, int32_t trace, int32_t monitor);

#endif
