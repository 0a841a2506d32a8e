/* rpc_client: one dyno RPC (01-rpc.md §1.2) — connect (TCP via getaddrinfo, or the local
 * stream socket for `unix:` targets), send one length-prefixed request, read one framed
 * reply, all under a single deadline. Used by dyno and by the tests. */
#ifndef MSMON_CLI_RPC_CLIENT_H
#define MSMON_CLI_RPC_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#define RPC_REQ_MAX 8191               /* request bodies are 1 .. 8191 bytes */
#define RPC_REPLY_MAX (64u << 20)      /* replies are far smaller; cap what we accept */

/* Why a call failed (for messages and exit codes). */
enum rpc_fail {
    RPC_OK = 0,
    RPC_FAIL_CONNECT,    /* resolve, socket or connect failed (or timed out) */
    RPC_FAIL_SEND,
    RPC_FAIL_NO_REPLY,   /* peer closed before sending any reply byte */
    RPC_FAIL_TIMEOUT,    /* deadline passed after connecting */
    RPC_FAIL_BAD_REPLY,  /* truncated frame or invalid length */
};

/* Call `target` ("host", "[v6]", "unix:" or "unix:/path") on `port` (ignored for unix).
 * `sock_dir` is the directory of dyno.sock for a bare "unix:" (NULL: ipc_socket_dir()).
 * On success returns 0 and *ret_reply (NUL-terminated, caller owns; free()) of
 * *ret_len bytes. On failure returns a negative errno, sets *ret_fail and writes a
 * user-facing one-line message (upstream wording where it exists) into err. */
int rpc_call(const char *target, uint16_t port, const char *sock_dir, int timeout_s,
             const char *body, size_t body_len, char **ret_reply, size_t *ret_len,
             enum rpc_fail *ret_fail, char *err, size_t errcap);

#endif
