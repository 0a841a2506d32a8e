/* ipc_client: the plugin's datagram endpoint (docs/design/ipc.md#plugin-endpoint, #plugin-client): one abstract
 * dynoconfigclient<uuid> socket per process, sends with exponential-backoff retries to
 * <home>/<name>.sock, and receives replies from <home>/dynolog.sock only. */
#ifndef MSMON_PLUGIN_IPC_CLIENT_H
#define MSMON_PLUGIN_IPC_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "contract/names.h"
#include "ipc/ipc_msg.h"

#define IPC_CLIENT_CTRL NAMES_SOCK_CTL   /* control endpoint name */
#define IPC_CLIENT_DATA NAMES_SOCK_DATA  /* data endpoint name */
#define IPC_CLIENT_CTRL_RETRIES 10
#define IPC_CLIENT_CTRL_FIRST_SLEEP_NS 10000000ull /* 10 ms */
#define IPC_CLIENT_DATA_RETRIES 5
#define IPC_CLIENT_DATA_FIRST_SLEEP_NS 1000000ull  /* 1 ms */

struct ipc_client;

/* Test seam: called instead of nanosleep between retries. */
typedef void (*ipc_client_sleep_fn)(void *ctx, uint64_t ns);

/* sock_dir: directory of the daemon's sockets, NULL = ipc_socket_dir(NULL) (env or passwd
 * home). The socket itself is created at first use. Caller owns; free with
 * ipc_client_destroy(). */
int ipc_client_create(const char *sock_dir, struct ipc_client **ret);
void ipc_client_destroy(struct ipc_client *c);
void ipc_client_set_sleep(struct ipc_client *c, ipc_client_sleep_fn fn, void *ctx);

/* Send one datagram `tag` + payload to <dir>/<dest>.sock with `retries` retries after the
 * first attempt, sleeping first_sleep_ns, doubled each time, on EAGAIN/EWOULDBLOCK/
 * ECONNREFUSED. 0 if an attempt succeeded, else the last -errno (logged). Thread-safe. */
#define IPC_CLIENT_QUIET 1u /* flags: caller logs failures itself (per-tick data sends) */
int ipc_client_send(struct ipc_client *c, const char *dest, const char *tag, const void *payload,
                    size_t len, unsigned retries, uint64_t first_sleep_ns, unsigned flags);

/* One received datagram; payload borrowed from the client until the next receive. */
struct ipc_client_msg {
    enum ipc_type type;
    char type_str[IPC_TYPE_LEN];
    const uint8_t *payload;
    size_t len;
};
/* Wait up to timeout_ms (0 = non-blocking) for a valid datagram from <dir>/dynolog.sock
 * sent by root or this process's user (SO_PASSCRED: the kernel's word, not the path);
 * invalid or foreign ones are dropped (WARNING, rate-limited) and waiting continues. 0, -EAGAIN when
 * nothing arrived in time, or -errno. One receiver at a time (callers serialise). */
int ipc_client_recv(struct ipc_client *c, int timeout_ms, struct ipc_client_msg *ret);

/* Datagrams refused for their sender (credentials or source address) so far. */
uint64_t ipc_client_refused(struct ipc_client *c);

/* Identity of the file <dir>/<dest>: inode and change time folded into one non-zero value,
 * 0 if absent (daemon restart detection). A restarted daemon's new socket file often gets
 * the inode number the old one freed, so the inode alone cannot tell them apart. */
uint64_t ipc_client_dest_stamp(struct ipc_client *c, const char *dest);

#endif
