/* ipc_server: the daemon's datagram endpoints (docs/design/ipc.md#endpoints, #daemon-receive-and-reply): msMonitor control
 * (dynolog.sock), data (dynolog_data.sock) and the Kineto control endpoint (abstract
 * "dynolog" or $KINETO_IPC_SOCKET_DIR/dynolog), served as read events on the daemon loop;
 * replies leave through the receiving socket without ever blocking. */
#ifndef MSMON_DAEMON_IPC_SERVER_H
#define MSMON_DAEMON_IPC_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include "daemon/ipc/data_sink.h"
#include "daemon/ipc/peer.h"
#include "daemon/ipc/registry.h"
#include "daemon/ipc/status.h"
#include "daemon/loop.h"

struct ipc_server_cfg {
    const char *sock_dir;        /* directory of dynolog.sock / dynolog_data.sock */
    mode_t mode;                 /* file mode of the socket files */
    const char *kineto_dir;      /* NULL/empty = abstract "dynolog" */
    struct registry *reg;        /* borrowed */
    struct status_table *st;     /* borrowed */
    struct data_router *data;    /* borrowed; fed by the data socket's events */
    struct peer_cache *peers;    /* borrowed, may be NULL (then the server keeps its own): who senders are */
};

struct ipc_server;

/* Create the endpoints (failures logged, endpoint skipped). 0 and *ret (caller owns; free
 * with ipc_server_destroy(), which unlinks the files it created), or -ENOMEM;
 * *ret_live_conflict is set when dynolog.sock is served by another live daemon. */
int ipc_server_create(const struct ipc_server_cfg *cfg, bool *ret_live_conflict, struct ipc_server **ret);
#define IPC_MAX_ALLOWED_UIDS 32

/* Local-peer policy, applied to every datagram that arrives through the sockets:
 * its SCM_CREDENTIALS uid must be ours, root or one of uids[]; with pid_check a message speaks
 * only for its sender (ctxt's pid, req's leaf, a status's pid must be the sender itself or a
 * descendant of it, compared in the sender's own pid namespace: peer.h), and what it reports is
 * kept under the node's pid of the process. Default before this call: our uid and root,
 * pid_check on. -E2BIG over IPC_MAX_ALLOWED_UIDS. */
int ipc_server_set_peers(struct ipc_server *s, const uid_t *uids, size_t n, bool pid_check);
/* Parse "UID[,UID...]" (decimal) for ipc_server_set_peers; one-line reason in err. */
int ipc_parse_uids(const char *list, uid_t *ret, size_t cap, size_t *ret_n, char *err, size_t errcap);

/* Serve the endpoints that exist as read events on l (borrowed until ipc_server_stop). */
int ipc_server_start(struct ipc_server *s, struct loop *l);
/* Unregister from the loop (the sockets stay open until destroy). Idempotent. */
void ipc_server_stop(struct ipc_server *s);
/* Unlink the sockets that plugins in other network namespaces bound in the socket directory
 * and nobody serves any more (killed processes); the GC timer's. Returns how many. */
int ipc_server_sweep(struct ipc_server *s);
void ipc_server_destroy(struct ipc_server *s);

/* Handle one received datagram as the control or data socket's event would (exposed for tests and
 * the fuzzer). `kineto` selects the Kineto endpoint's peer rules and origin. Any reply is
 * sent through fd to peer. */
void ipc_server_dispatch(struct ipc_server *s, int fd, bool kineto, bool data,
                         const uint8_t *buf, size_t got, size_t real_len,
                         const struct sockaddr_un *peer, socklen_t peer_len);
/* The same with the sender's credentials, as the sockets' events call it: datagrams from a
 * uid or on behalf of a pid the policy does not allow are logged (rate-limited) and dropped. */
void ipc_server_dispatch_cred(struct ipc_server *s, int fd, bool kineto, bool data,
                              const uint8_t *buf, size_t got, size_t real_len,
                              const struct sockaddr_un *peer, socklen_t peer_len,
                              const struct ucred *cred);

#endif
