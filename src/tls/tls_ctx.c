/* tls_ctx: certificate directory -> SSL_CTX. Order and messages follow docs/design/rpc.md#mutual-tls: the
 * leaf certificate and (CLI) each CA certificate are checked by tls_check, the CRL is checked
 * against the leaf and installed for the peer's chain, the key is read once, decrypted with a
 * passphrase from a mode-checked file or the terminal prompt, and the passphrase wiped. */
#include "tls/tls_ctx.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "common/log.h"
#include "tls/tls_check.h"

#define FILE_MAX (1u << 20)      /* certificate, key and CRL files are far smaller */
#define PROMPT "Please enter the certificate password: "

struct paths {
    char crt[4200], key[4200], ca[4200], crl[4200];
};

/* The innermost OpenSSL reason ("certificate verify failed", "bad decrypt"). */
static const char *ossl_reason(void)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    return r ? r : "unknown OpenSSL error";
}

/* Up to want bytes from fd into buf; fewer when the file ends (or shrank) or a read fails:
 * the caller checks what it got, not how reading went. */
static size_t read_upto(int fd, char *buf, size_t want)
{
    size_t got = 0;
    while (got < want) {
        ssize_t n = read(fd, buf + got, want - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    return got;
}

/* Whole file into a NUL-terminated heap buffer (wiped and freed by the caller). */
static int read_file(const char *path, char **ret, size_t *ret_len, char *err, size_t errcap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    struct stat st;
    char *buf = NULL;
    size_t got = 0;
    int rc = 0;
    if (fd < 0) {
        rc = -errno;
        snprintf(err, errcap, "%s: cannot open: %s", path, strerror(-rc));
        return rc;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errcap, "%s: not a regular file", path);
        rc = -EINVAL;
        goto out;
    }
    if (st.st_size > (off_t)FILE_MAX) {
        snprintf(err, errcap, "%s: larger than %u bytes", path, FILE_MAX);
        rc = -EFBIG;
        goto out;
    }
    buf = malloc((size_t)st.st_size + 1);
    if (!buf) {
        rc = -ENOMEM;
        snprintf(err, errcap, "%s: out of memory", path);
        goto out;
    }
    got = read_upto(fd, buf, (size_t)st.st_size);
    buf[got] = '\0';
    *ret = buf;
    *ret_len = got;
out:
    close(fd);
    return rc;
}

int tls_ctx_read_passphrase_file(const char *path, char *buf, size_t cap, char *err,
                                 size_t errcap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
    struct stat st;
    int rc = 0;
    size_t got = 0;
    if (fd < 0) {
        rc = -errno;
        snprintf(err, errcap, "%s: cannot open passphrase file: %s", path,
                 rc == -ELOOP ? "it is a symbolic link" : strerror(-rc));
        return rc;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errcap, "%s: passphrase file is not a regular file", path);
        rc = -EINVAL;
        goto out;
    }
    if (st.st_uid != geteuid() && st.st_uid != 0) {
        snprintf(err, errcap, "%s: passphrase file is owned by uid %u, not by uid %u or root",
                 path, (unsigned)st.st_uid, (unsigned)geteuid());
        rc = -EPERM;
        goto out;
    }
    if (st.st_mode & 077) {
        snprintf(err, errcap, "%s: passphrase file mode %04o lets group/others access it (chmod 600)",
                 path, (unsigned)(st.st_mode & 07777));
        rc = -EPERM;
        goto out;
    }
    if (st.st_size <= 0 || (size_t)st.st_size >= cap || (size_t)st.st_size > TLS_PASS_MAX + 2) {
        snprintf(err, errcap, "%s: passphrase file size %lld is not 1..%d bytes", path,
                 (long long)st.st_size, TLS_PASS_MAX);
        rc = -EINVAL;
        goto out;
    }
    got = read_upto(fd, buf, (size_t)st.st_size);
    if (got && buf[got - 1] == '\n')
        got--;
    if (got && buf[got - 1] == '\r')
        got--;
    buf[got] = '\0';
    if (got == 0 || memchr(buf, '\0', got)) {
        snprintf(err, errcap, "%s: passphrase file is empty or holds a NUL byte", path);
        rc = -EINVAL;
    }
out:
    close(fd);
    return rc;
}

/* docs/design/rpc.md#daemon-certificates: the prompt on the controlling terminal, echo off, '*' per character, backspace and
 * DEL erase. The terminal settings are restored whatever happens. */
static int prompt_passphrase(char *buf, size_t cap, const char *no_tty_msg, char *err,
                             size_t errcap)
{
    struct termios old, raw;
    size_t n = 0;
    int rc = 0;
    int fd = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
    if (fd < 0 || tcgetattr(fd, &old) != 0) {
        if (fd >= 0)
            close(fd);
        snprintf(err, errcap, "%s", no_tty_msg);
        return -ENOTTY;
    }
    raw = old;
    raw.c_lflag &= ~(tcflag_t)(ECHO | ICANON);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    if (tcsetattr(fd, TCSAFLUSH, &raw) != 0) {
        close(fd);
        snprintf(err, errcap, "%s", no_tty_msg);
        return -ENOTTY;
    }
    (void)!write(fd, PROMPT, sizeof(PROMPT) - 1);
    for (;;) {
        unsigned char c;
        ssize_t r = read(fd, &c, 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0 || c == 0x04) {
            snprintf(err, errcap, "password entry ended without a password");
            rc = -ECANCELED;
            break;
        }
        if (c == '\n' || c == '\r')
            break;
        if (c == 0x7f || c == 0x08) {
            if (n > 0) {
                n--;
                (void)!write(fd, "\b \b", 3);
            }
            continue;
        }
        if (n + 1 < cap) {
            buf[n++] = (char)c;
            (void)!write(fd, "*", 1);
        }
    }
    buf[n] = '\0';
    (void)!write(fd, "\n", 1);
    tcsetattr(fd, TCSAFLUSH, &old);
    close(fd);
    return rc;
}

/* PEM password callback that never prompts: OpenSSL's default one would read the terminal
 * itself for an encrypted key we did not expect. */
static int pass_cb(char *buf, int size, int rwflag, void *u)
{
    const char *pass = u;
    (void)rwflag;
    if (!pass || size <= 0)
        return 0;
    size_t n = strlen(pass);
    if (n > (size_t)size)
        n = (size_t)size;
    memcpy(buf, pass, n);
    return (int)n;
}

static X509 *load_cert(const char *path, const char *text, size_t len, char *err, size_t errcap)
{
    BIO *b = BIO_new_mem_buf(text, (int)len);
    X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    if (!x)
        snprintf(err, errcap, "%s: not a PEM certificate (%s)", path, ossl_reason());
    return x;
}

static int load_leaf(const struct paths *p, bool server, time_t now, X509 **ret, char *err,
                     size_t errcap)
{
    char *text = NULL, why[512];
    size_t len = 0;
    int rc = read_file(p->crt, &text, &len, err, errcap);
    if (rc)
        return rc;
    X509 *x = load_cert(p->crt, text, len, err, errcap);
    free(text);
    if (!x)
        return -EINVAL;
    if (tls_check_cert(x, server ? TLS_CERT_SERVER : TLS_CERT_CLIENT, now, why, sizeof(why)) != 0) {
        snprintf(err, errcap, "%s: %s", p->crt, why);
        X509_free(x);
        return -EINVAL;
    }
    *ret = x;
    return 0;
}

/* ca.crt into the context's trust store; the CLI checks each certificate as a CA (docs/design/rpc.md#cli-certificates). */
static int load_ca(SSL_CTX *ctx, const struct paths *p, bool server, time_t now, char *err,
                   size_t errcap)
{
    char *text = NULL, why[512];
    size_t len = 0;
    int n = 0, rc = read_file(p->ca, &text, &len, err, errcap);
    if (rc)
        return rc;
    BIO *b = BIO_new_mem_buf(text, (int)len);
    X509_STORE *store = SSL_CTX_get_cert_store(ctx);
    X509 *x;
    rc = 0;
    while (b && (x = PEM_read_bio_X509(b, NULL, NULL, NULL))) {
        n++;
        if (!server && tls_check_cert(x, TLS_CERT_CA, now, why, sizeof(why)) != 0) {
            snprintf(err, errcap, "%s: certificate %d: %s", p->ca, n, why);
            rc = -EINVAL;
        } else if (X509_STORE_add_cert(store, x) != 1) {
            snprintf(err, errcap, "%s: certificate %d: %s", p->ca, n, ossl_reason());
            rc = -EINVAL;
        } else if (server) {
            SSL_CTX_add_client_CA(ctx, x);   /* names sent in the CertificateRequest */
        }
        X509_free(x);
        if (rc)
            break;
    }
    ERR_clear_error();   /* the loop ends on "no start line" */
    BIO_free(b);
    free(text);
    if (rc == 0 && n == 0) {
        snprintf(err, errcap, "%s: no PEM certificate in the file", p->ca);
        rc = -EINVAL;
    }
    return rc;
}

/* ca.crl (optional): checked against the leaf and installed so the peer's chain is checked
 * against it too. The daemon skips an out-of-date CRL for its own serial (docs/design/rpc.md#daemon-certificates) but still
 * installs it, so clients are refused ("CRL has expired") rather than let through unchecked. */
static int load_crl(SSL_CTX *ctx, const struct paths *p, bool server, X509 *leaf, time_t now,
                    FILE *progress, char *err, size_t errcap)
{
    struct stat st;
    char *text = NULL;
    size_t len = 0;
    if (stat(p->crl, &st) != 0 && errno == ENOENT) {
        if (progress)
            fprintf(progress, "CRL file does not exist: %s\n", p->crl);
        return 0;
    }
    if (progress)
        fprintf(progress, "Checking CRL file: %s\n", p->crl);
    int rc = read_file(p->crl, &text, &len, err, errcap);
    if (rc)
        return rc;
    BIO *b = BIO_new_mem_buf(text, (int)len);
    X509_CRL *crl = b ? PEM_read_bio_X509_CRL(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    free(text);
    if (!crl) {
        snprintf(err, errcap, "%s: not a PEM CRL (%s)", p->crl, ossl_reason());
        return -EINVAL;
    }
    bool current = tls_check_crl_current(crl, now);
    if (!current && !server) {
        snprintf(err, errcap, "%s: CRL is not currently valid (outside thisUpdate..nextUpdate)", p->crl);
        rc = -EINVAL;
    } else if (current && tls_check_crl_lists(crl, leaf) != 0) {
        snprintf(err, errcap, "%s: %s", p->crt,
                 server ? "Server certificate is revoked" : "Certificate is revoked");
        rc = -EKEYREVOKED;
    } else if (X509_STORE_add_crl(SSL_CTX_get_cert_store(ctx), crl) != 1 ||
               X509_STORE_set_flags(SSL_CTX_get_cert_store(ctx), X509_V_FLAG_CRL_CHECK) != 1) {
        snprintf(err, errcap, "%s: %s", p->crl, ossl_reason());
        rc = -EINVAL;
    } else if (!current) {
        LOG_WARN("tls: %s is not currently valid; clients are refused until it is renewed", p->crl);
    }
    X509_CRL_free(crl);
    return rc;
}

static int load_key(SSL_CTX *ctx, const struct tls_ctx_cfg *cfg, const struct paths *p,
                    char *err, size_t errcap)
{
    char *text = NULL;
    size_t len = 0;
    char pass[TLS_PASS_MAX + 4];
    bool have_pass = false;
    EVP_PKEY *pk = NULL;
    int rc = read_file(p->key, &text, &len, err, errcap);
    if (rc)
        return rc;
    if (memmem(text, len, "ENCRYPTED", 9)) {
        if (cfg->passphrase_file && cfg->passphrase_file[0])
            rc = tls_ctx_read_passphrase_file(cfg->passphrase_file, pass, sizeof(pass), err, errcap);
        else
            rc = prompt_passphrase(pass, sizeof(pass),
                                   cfg->server ? "encrypted server key requires an interactive terminal"
                                               : "encrypted client key requires an interactive terminal",
                                   err, errcap);
        if (rc)
            goto out;
        have_pass = true;
    }
    BIO *b = BIO_new_mem_buf(text, (int)len);
    pk = b ? PEM_read_bio_PrivateKey(b, NULL, pass_cb, have_pass ? pass : NULL) : NULL;
    BIO_free(b);
    if (!pk) {
        snprintf(err, errcap, "%s: cannot load the key: %s%s", p->key, ossl_reason(),
                 have_pass ? " (wrong passphrase?)" : "");
        rc = -EINVAL;
        goto out;
    }
    if (SSL_CTX_use_PrivateKey(ctx, pk) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
        snprintf(err, errcap, "%s: the key does not match %s", p->key, p->crt);
        rc = -EINVAL;
    }
out:
    EVP_PKEY_free(pk);
    OPENSSL_cleanse(pass, sizeof(pass));
    OPENSSL_cleanse(text, len);
    free(text);
    return rc;
}

static int make_paths(const char *dir, bool server, struct paths *p, char *err, size_t errcap)
{
    const char *role = server ? "server" : "client";
    if (snprintf(p->crt, sizeof(p->crt), "%s/%s.crt", dir, role) >= (int)sizeof(p->crt) ||
        snprintf(p->key, sizeof(p->key), "%s/%s.key", dir, role) >= (int)sizeof(p->key) ||
        snprintf(p->ca, sizeof(p->ca), "%s/ca.crt", dir) >= (int)sizeof(p->ca) ||
        snprintf(p->crl, sizeof(p->crl), "%s/ca.crl", dir) >= (int)sizeof(p->crl)) {
        snprintf(err, errcap, "--certs-dir path too long");
        return -ENAMETOOLONG;
    }
    return 0;
}

/* The client policy on the daemon's side (docs/security.md, "Client certificates"): the chain
 * verified against ca.crt is not enough; the leaf must also pass the same rules dyno applies
 * to its own client.crt (key type and size, not a CA, key usage). The reason is kept on the
 * SSL for the handshake's log line. */
static int refusal_idx = -1;

static void refusal_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp)
{
    (void)parent;
    (void)ad;
    (void)idx;
    (void)argl;
    (void)argp;
    free(ptr);
}

static int verify_client(int ok, X509_STORE_CTX *sctx)
{
    char why[256];
    if (!ok || X509_STORE_CTX_get_error_depth(sctx) != 0)
        return ok;
    X509 *leaf = X509_STORE_CTX_get_current_cert(sctx);
    if (tls_check_cert(leaf, TLS_CERT_CLIENT, time(NULL), why, sizeof(why)) == 0)
        return 1;
    SSL *ssl = X509_STORE_CTX_get_ex_data(sctx, SSL_get_ex_data_X509_STORE_CTX_idx());
    if (ssl && refusal_idx >= 0) {
        char *copy = strdup(why);
        free(SSL_get_ex_data(ssl, refusal_idx));
        if (SSL_set_ex_data(ssl, refusal_idx, copy) != 1)
            free(copy);
    }
    X509_STORE_CTX_set_error(sctx, X509_V_ERR_APPLICATION_VERIFICATION);
    return 0;
}

const char *tls_ctx_client_refusal(const SSL *ssl)
{
    return ssl && refusal_idx >= 0 ? SSL_get_ex_data(ssl, refusal_idx) : NULL;
}

int tls_ctx_create(const struct tls_ctx_cfg *cfg, SSL_CTX **ret, char *err, size_t errcap)
{
    struct paths p;
    X509 *leaf = NULL;
    time_t now = time(NULL);
    int rc = make_paths(cfg->dir, cfg->server, &p, err, errcap);
    *ret = NULL;
    if (rc)
        return rc;
    SSL_CTX *ctx = SSL_CTX_new(cfg->server ? TLS_server_method() : TLS_client_method());
    if (!ctx || SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
        snprintf(err, errcap, "cannot create the TLS context: %s", ossl_reason());
        rc = -ENOMEM;
        goto fail;
    }
    if (cfg->progress)
        fprintf(cfg->progress, "Loading CA cert from: %s\n", p.ca);
    rc = load_ca(ctx, &p, cfg->server, now, err, errcap);
    if (rc)
        goto fail;
    if (cfg->progress)
        fprintf(cfg->progress, "Loading %s cert from: %s\n", cfg->server ? "server" : "client", p.crt);
    rc = load_leaf(&p, cfg->server, now, &leaf, err, errcap);
    if (rc)
        goto fail;
    if (SSL_CTX_use_certificate(ctx, leaf) != 1) {
        snprintf(err, errcap, "%s: %s", p.crt, ossl_reason());
        rc = -EINVAL;
        goto fail;
    }
    rc = load_crl(ctx, &p, cfg->server, leaf, now, cfg->progress, err, errcap);
    if (rc)
        goto fail;
    if (cfg->progress) {
        fprintf(cfg->progress, "Loading %s key from: %s\n", cfg->server ? "server" : "client", p.key);
        fflush(cfg->progress);
    }
    rc = load_key(ctx, cfg, &p, err, errcap);
    if (rc)
        goto fail;
    if (cfg->server) {
        /* mutual TLS is mandatory (docs/design/rpc.md#daemon-certificates); renegotiation is never needed for one request */
        if (refusal_idx < 0)
            refusal_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, refusal_free);
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, verify_client);
        SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
        /* dyno is a new process per command and never resumes: no session tickets to make */
        SSL_CTX_set_num_tickets(ctx, 0);
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    }
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    X509_free(leaf);
    ERR_clear_error();
    *ret = ctx;
    return 0;
fail:
    X509_free(leaf);
    SSL_CTX_free(ctx);
    ERR_clear_error();
    return rc;
}

int tls_ctx_client_ssl(SSL_CTX *ctx, const char *host, SSL **ret, char *err, size_t errcap)
{
    char name[256];
    size_t n = strlen(host);
    unsigned char bin[16];
    *ret = NULL;
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
        host++;
        n -= 2;
    }
    if (n == 0 || n >= sizeof(name)) {
        snprintf(err, errcap, "host name '%s' cannot be verified (length %zu)", host, n);
        return -EINVAL;
    }
    memcpy(name, host, n);
    name[n] = '\0';
    SSL *ssl = SSL_new(ctx);
    if (!ssl) {
        snprintf(err, errcap, "cannot create a TLS connection: %s", ossl_reason());
        return -ENOMEM;
    }
    X509_VERIFY_PARAM *vp = SSL_get0_param(ssl);
    bool is_ip = inet_pton(AF_INET, name, bin) == 1 || inet_pton(AF_INET6, name, bin) == 1;
    int ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(vp, name)
                   : (X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS),
                      X509_VERIFY_PARAM_set1_host(vp, name, 0)) &&
                         SSL_set_tlsext_host_name(ssl, name);
    if (ok != 1) {
        snprintf(err, errcap, "host name '%s' cannot be verified: %s", name, ossl_reason());
        SSL_free(ssl);
        return -EINVAL;
    }
    *ret = ssl;
    return 0;
}
