/* tls_ctx: builds the OpenSSL context of one side of mutual TLS (docs/design/rpc.md#mutual-tls) from a
 * certificate directory: reads the files, applies tls_check's rules, loads and (when it is
 * encrypted) decrypts the key once, and sets TLS 1.2 minimum, peer verification and the CRL.
 * Shared by dynolog (server) and dyno (client); the result is thread-safe to share. */
#ifndef MSMON_TLS_TLS_CTX_H
#define MSMON_TLS_TLS_CTX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <openssl/ssl.h>

#define TLS_PASS_MAX 1024   /* passphrase bytes (terminal or file) */

struct tls_ctx_cfg {
    const char *dir;              /* the --certs_dir / --certs-dir directory */
    bool server;                  /* server.crt/.key (daemon) or client.crt/.key (CLI) */
    const char *passphrase_file;  /* NULL or "": an encrypted key is asked for on the terminal */
    FILE *progress;               /* CLI: the docs/design/rpc.md#cli-certificates "Loading ..." lines go here; NULL: none */
};

/* Caller owns *ret; free with SSL_CTX_free(). 0, or a negative errno with one line naming the
 * file and the reason in err ("<path>: <reason>"). */
int tls_ctx_create(const struct tls_ctx_cfg *cfg, SSL_CTX **ret, char *err, size_t errcap);

/* Daemon side: why the client policy refused ssl's peer certificate (the chain itself was
 * fine), or NULL. Borrowed; lives as long as ssl. */
const char *tls_ctx_client_refusal(const SSL *ssl);

/* Client: a connection object that verifies the server against `host` — an IPv4/IPv6 literal
 * (brackets allowed) must be an IP SAN, anything else a DNS SAN. Caller owns *ret (SSL_free). */
int tls_ctx_client_ssl(SSL_CTX *ctx, const char *host, SSL **ret, char *err, size_t errcap);

/* The passphrase from a file that only its owner (our euid or root) can read: a regular file
 * (not a symlink), no group/other permission bits, at most TLS_PASS_MAX bytes; one trailing
 * newline is dropped. 0 or -errno with "<path>: <reason>" in err. Wipe buf after use. */
int tls_ctx_read_passphrase_file(const char *path, char *buf, size_t cap, char *err,
                                 size_t errcap);

#endif
