/* rpc_server: the RPC transport (docs/design/rpc.md#transport): TCP listener (dual-stack / IPv4 fallback /
 * --rpc_bind_address) and the local ~/dyno.sock stream socket, served concurrently on the
 * daemon loop (loop.h) with per-connection 3 s deadlines and a client cap; connection I/O goes
 * through struct conn (conn.h). */
#ifndef MSMON_DAEMON_RPC_SERVER_H
#define MSMON_DAEMON_RPC_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/loop.h"
#include "daemon/rpc/conn.h"
#include "daemon/rpc/rpc_methods.h"

#define RPC_MAX_MSG 8192          /* valid request lengths are 1..8191 */
#define RPC_DEADLINE_MS 3000      /* accept to whole request, and the reply's send */
#define RPC_FIRST_BYTE_MS 1000    /* set-up done to the first request byte */
/* TLS handshakes one source address may start per second (burst), counted when a whole
 * ClientHello arrives; beyond, that connection is closed before any crypto (docs/security.md).
 * The total is paced in conn_tls.c. */
#define RPC_HS_PER_SRC_PER_SEC 10
#define RPC_HS_PER_SRC_BURST 20

/* Counters since start; the dropped connections are visible here and in the WARNING lines. */
struct rpc_server_stats {
    uint64_t accepted;            /* connections served (after the caps) */
    uint64_t evicted;             /* oldest incomplete connections closed to make room */
    uint64_t refused;             /* newcomers closed at a cap with nothing to evict */
    uint64_t hs_refused;          /* TLS ClientHellos over their source's handshake budget */
};

struct rpc_server;

/* Bind and listen on TCP (port 1..65535; 0 is refused with the spec's text). On failure
 * returns a negative errno and the one-line reason in err. Caller owns *ret_fd. */
int rpc_listen_tcp(int port, const char *bind_address, int *ret_fd, char *err, size_t errcap);

/* The bound address of a listener is loopback only (127/8, ::1); true for fd < 0. */
bool rpc_listen_is_loopback(int fd);

/* Registers the listeners on l (served once loop_run runs). Takes ownership of tcp_fd (even
 * on failure; -1 = none); its connections are built by tcp_conn (NULL = plain sockets; TLS
 * passes its factory here). local_fd (dyno.sock listener, or -1) stays owned by the caller and
 * is always plain. l, tcp_conn and ctx are borrowed until rpc_server_destroy(). 0 and *ret
 * (caller owns; free with rpc_server_destroy()), or -errno. */
int rpc_server_create(struct loop *l, int tcp_fd, const struct conn_factory *tcp_conn, int local_fd,
                      int max_clients, const struct rpc_ctx *ctx, struct rpc_server **ret);
/* At most max_per_peer TCP connections from one address in flight: beyond, the oldest
 * incomplete connection from that address is closed to serve the newcomer (the newcomer is
 * closed only when all of them are already being answered); rate-limited WARNING either way.
 * <= 0 = no per-peer cap (the default: max_clients). */
void rpc_server_set_peer_limit(struct rpc_server *s, int max_per_peer);
void rpc_server_stats(const struct rpc_server *s, struct rpc_server_stats *ret);
/* Stop accepting; done(arg) runs on the loop once the in-flight connections have finished
 * (each within its 3 s deadline), at once when there are none. Later calls do nothing. */
void rpc_server_shutdown(struct rpc_server *s, void (*done)(void *arg), void *arg);
/* Closes what is still in flight and the TCP listener; frees s. NULL is a no-op. */
void rpc_server_destroy(struct rpc_server *s);

#endif
