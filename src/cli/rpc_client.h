/* rpc_client: one dyno RPC (docs/design/rpc.md#framing) — connect (TCP via getaddrinfo, or the local
 * stream socket for `unix:` targets), send one length-prefixed request, read one framed
 * reply, all under a single deadline. Used by dyno and by the tests. */
#ifndef MSMON_CLI_RPC_CLIENT_H
#define MSMON_CLI_RPC_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define RPC_REQ_MAX 8191               /* request bodies are 1 .. 8191 bytes */
/* Per-host cap on a reply: twice the daemon's own 1 MiB, so a hostile host cannot make dyno
 * hold (and parse) more than this per host (docs/security.md). */
#define RPC_REPLY_MAX (2u << 20)

/* Why a call failed (for messages and exit codes). */
enum rpc_fail {
    RPC_OK = 0,
    RPC_FAIL_CONNECT,    /* resolve, socket or connect failed (or timed out) */
    RPC_FAIL_SEND,
    RPC_FAIL_NO_REPLY,   /* peer closed before sending any reply byte */
    RPC_FAIL_TIMEOUT,    /* deadline passed after connecting */
    RPC_FAIL_BAD_REPLY,  /* truncated frame or invalid length */
    RPC_FAIL_TLS,        /* TLS handshake or session failure, or a TLS server for plain dyno */
};

/* Process-wide deadline (CLOCK_MONOTONIC ns, 0 = none) that no call runs past, whatever
 * its own timeout: dyno's overall --timeout-s. Set it before starting worker threads. */
void rpc_set_overall_deadline(uint64_t deadline_ns);
/* The deadline set above (monotonic ns), 0 when none. */
uint64_t rpc_overall_deadline(void);

struct rpc_tls;

/* Where rpc_call_tls sends its request: the network by default; the fuzz targets of dyno's
 * renderers put a table of replies here so the real commands run without sockets. */
struct rpc_transport {
    int (*call)(void *arg, const char *target, const char *body, size_t body_len,
                char **ret_reply, size_t *ret_len, enum rpc_fail *ret_fail, char *err,
                size_t errcap);
    void *arg;
};
/* NULL restores the network. Set before starting worker threads. */
void rpc_set_transport(const struct rpc_transport *t);

/* Mutual TLS client state (docs/design/rpc.md#cli-certificates): the checked certificates and the decrypted key,
 * loaded once for every host and shared by the worker threads. */
struct rpc_tls;
/* Load dir's client.crt, client.key, ca.crt and optional ca.crl, printing the docs/design/rpc.md#cli-certificates progress
 * lines to progress. An encrypted key is decrypted with passphrase_file (NULL/"": prompt on
 * the terminal). Caller owns *ret; free with rpc_tls_destroy(). 0 or -errno with the one-line
 * reason ("<path>: <why>") in err. */
int rpc_tls_create(const char *dir, const char *passphrase_file, FILE *progress,
                   struct rpc_tls **ret, char *err, size_t errcap);
void rpc_tls_destroy(struct rpc_tls *t);

/* rpc_call over mutual TLS when tls is non-NULL and the target is a TCP host (a `unix:` target
 * is always plain): the server's chain must verify against ca.crt and its SAN must match the
 * host name as given. tls is borrowed. */
int rpc_call_tls(const struct rpc_tls *tls, const char *target, uint16_t port,
                 const char *sock_dir, int timeout_s, const char *body, size_t body_len,
                 char **ret_reply, size_t *ret_len, enum rpc_fail *ret_fail, char *err,
                 size_t errcap);

/* Call `target` ("host", "[v6]", "unix:" or "unix:/path") on `port` (ignored for unix).
 * `sock_dir` is the directory of dyno.sock for a bare "unix:" (NULL: ipc_socket_dir()).
 * On success returns 0 and *ret_reply (NUL-terminated, caller owns; free()) of
 * *ret_len bytes. On failure returns a negative errno, sets *ret_fail and writes a
 * user-facing one-line message (upstream wording where it exists) into err. */
int rpc_call(const char *target, uint16_t port, const char *sock_dir, int timeout_s,
             const char *body, size_t body_len, char **ret_reply, size_t *ret_len,
             enum rpc_fail *ret_fail, char *err, size_t errcap);

#endif
