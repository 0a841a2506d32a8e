/* rpc_server: the RPC transport (01-rpc.md §1): TCP listener (dual-stack / IPv4 fallback /
 * --rpc_bind_address) and the local ~/dyno.sock stream socket, served concurrently by one
 * libevent loop thread with per-connection 3 s deadlines and a client cap. */
#ifndef MSMON_DAEMON_RPC_SERVER_H
#define MSMON_DAEMON_RPC_SERVER_H

#include <stddef.h>

#include "daemon/rpc_methods.h"

#define RPC_MAX_MSG 8192          /* valid request lengths are 1..8191 */
#define RPC_DEADLINE_MS 3000

struct rpc_server;

/* Bind and listen on TCP (port 1..65535; 0 is refused with the spec's text). On failure
 * returns a negative errno and the one-line reason in err. Caller owns *ret_fd. */
int rpc_listen_tcp(int port, const char *bind_address, int *ret_fd, char *err, size_t errcap);

/* Takes ownership of tcp_fd; local_fd (dyno.sock listener, or -1) stays owned by the caller.
 * ctx is borrowed until rpc_server_destroy(). Caller owns; free with rpc_server_destroy(). */
struct rpc_server *rpc_server_create(int tcp_fd, int local_fd, int max_clients,
                                     const struct rpc_ctx *ctx);
/* Start the loop thread ("rpcServer"). */
int rpc_server_start(struct rpc_server *s);
/* Stop accepting, let in-flight connections finish (each ends within its 3 s deadline),
 * join the thread. Safe to call from another thread; idempotent. */
void rpc_server_stop(struct rpc_server *s);
void rpc_server_destroy(struct rpc_server *s);

#endif
