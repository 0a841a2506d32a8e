/* ipc_msg: encode and validate the datagrams of docs/design/ipc.md#datagrams, plus the socket addresses
 * both sides compute (abstract names with their exact lengths, <home>/<name>.sock paths).
 * Pure functions over {ptr, len} views: the daemon, the plugin and the fuzzer share them. */
#ifndef MSMON_IPC_MSG_H
#define MSMON_IPC_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "msmon/ipc_wire.h"

enum ipc_type {
    IPC_T_UNKNOWN = 0,
    IPC_T_CTXT,
    IPC_T_REQ,
    IPC_T_TRACE_STATUS,
    IPC_T_MONITOR_STATUS,
    IPC_T_DATA,
};

/* Why a datagram was refused by ipc_msg_parse (index into ipc_drop_reason_str). */
enum ipc_drop {
    IPC_OK = 0,
    IPC_DROP_TOO_BIG,      /* real length > cap ("exceeds max size") */
    IPC_DROP_TOO_SMALL,    /* < 40 bytes */
    IPC_DROP_NO_NUL,       /* type tag not NUL-terminated within 32 bytes */
    IPC_DROP_TRUNCATED,    /* header.size > bytes received */
};
const char *ipc_drop_reason_str(enum ipc_drop d);

struct ipc_view {
    enum ipc_type type;
    char type_str[IPC_TYPE_LEN]; /* NUL-terminated copy of the tag (for logs) */
    const uint8_t *payload;      /* borrowed from the receive buffer */
    size_t len;                  /* = header.size */
};

/* Validate a received datagram: `real_len` is recvmsg's MSG_TRUNC return value, `got` the
 * bytes actually in buf, `cap` the largest acceptable datagram. */
enum ipc_drop ipc_msg_parse(const uint8_t *buf, size_t got, size_t real_len, size_t cap,
                            struct ipc_view *ret_view);
enum ipc_type ipc_type_from_tag(const char *tag);
const char *ipc_type_tag(enum ipc_type t);

/* Write header + payload into out (cap bytes); returns total length or -ENOSPC/-EINVAL. */
long ipc_msg_build(uint8_t *out, size_t cap, const char *tag, const void *payload, size_t len);

/* Parse helpers: copy payload into the aligned struct; -EMSGSIZE if too short. For req,
 * n_used = min(n, IPC_REQ_MAX_PIDS) pids are copied into pids (cap IPC_REQ_MAX_PIDS). */
int ipc_parse_ctxt(const struct ipc_view *v, struct ipc_ctxt *ret);
int ipc_parse_status(const struct ipc_view *v, struct ipc_status *ret);
int ipc_parse_req(const struct ipc_view *v, struct ipc_req *ret_hdr, int32_t *pids,
                  int *ret_n_used);

/* Addresses. Abstract: sun_path = '\0' + name (+ '\0' if trailing_nul). */
int ipc_addr_abstract(struct sockaddr_un *addr, socklen_t *ret_len, const char *name,
                      bool trailing_nul);
int ipc_addr_path(struct sockaddr_un *addr, socklen_t *ret_len, const char *path);
/* Directory for the msMonitor endpoints: override (flag), else MSMONITOR_SOCKET_DIR,
 * else the passwd home of getuid(). HOME is deliberately not consulted (docs/design/ipc.md#endpoints). */
int ipc_socket_dir(const char *override, char *out, size_t cap);
/* "<dir>/<name>.sock"; -ENAMETOOLONG beyond 106 bytes. */
int ipc_socket_path(const char *dir, const char *name, char *out, size_t cap);
/* Printable peer address for logs ("@name", "/path", "(unnamed)"). */
void ipc_addr_str(const struct sockaddr_un *addr, socklen_t len, char *out, size_t cap);
/* "dynoconfigclient" + UUIDv4 (52 bytes + NUL). */
int ipc_client_name(char *out, size_t cap);
/* A plugin client's name as ipc_client_name makes it: "dynoconfigclient" + 36 characters of
 * [0-9a-f-] (the daemon accepts a path-bound client only under such a name). */
bool ipc_client_name_valid(const char *s, size_t n);


#define IPC_SOCK_PATH_MAX 106

#endif
