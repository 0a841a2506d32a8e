/* tls_check: the certificate rules of docs/design/rpc.md#mutual-tls written once, for the daemon's server.crt,
 * the CLI's client.crt and ca.crt, and both sides' ca.crl. Pure functions over parsed OpenSSL
 * objects (or PEM/DER bytes, for the fuzz target): no file access, no global state. */
#ifndef MSMON_TLS_TLS_CHECK_H
#define MSMON_TLS_TLS_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include <openssl/x509.h>

#define TLS_MIN_RSA_BITS 3072
#define TLS_CRL_DEFAULT_DAYS 365   /* a CRL without nextUpdate is valid this long (docs/design/rpc.md#cli-certificates) */

/* Which table of docs/design/rpc.md#mutual-tls a certificate is checked against. */
enum tls_cert_role {
    TLS_CERT_SERVER,   /* server.crt (docs/design/rpc.md#daemon-certificates): sha256/sha512WithRSA only, RSA >= 3072 */
    TLS_CERT_CLIENT,   /* client.crt (docs/design/rpc.md#cli-certificates): no md2/md5/sha1; RSA >= 3072; not a CA */
    TLS_CERT_CA,       /* each cert in ca.crt (docs/design/rpc.md#cli-certificates): CA=true, keyCertSign + cRLSign */
};

/* Check x against role's table at time now. 0, or -EINVAL with the spec's message (prefixed
 * by the role's name where the spec says "Server certificate ...") in err. */
int tls_check_cert(X509 *x, enum tls_cert_role role, time_t now, char *err, size_t errcap);

/* Is crl within thisUpdate .. nextUpdate (thisUpdate + 365 days without one) at now? */
bool tls_check_crl_current(const X509_CRL *crl, time_t now);
/* 0 when x's serial is not listed in crl, -EKEYREVOKED when it is. */
int tls_check_crl_lists(X509_CRL *crl, X509 *x);

/* What one fuzz input is parsed as. */
enum tls_check_input { TLS_IN_PEM_CERTS, TLS_IN_DER_CERT, TLS_IN_PEM_CRL, TLS_IN_DER_CRL };
/* Parse buf as kind and run every check that applies (all three roles on each certificate;
 * for a CRL the validity and a serial lookup of every certificate in the same buffer).
 * Returns the number of objects checked (>= 0) or -EINVAL when nothing parsed; err holds the
 * last failure. Used by the fuzz target and the unit tests; the daemon and CLI read files
 * through tls_ctx. */
int tls_check_buffer(const void *buf, size_t len, enum tls_check_input kind, time_t now,
                     char *err, size_t errcap);

#endif
