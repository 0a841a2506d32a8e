/* tls_check: the docs/design/rpc.md#mutual-tls certificate and CRL rules. Every rule names what failed with the spec's
 * message prefix; checks run in the spec's table order so the first failure is the one
 * reported. Nothing here trusts the certificate: each accessor's NULL / error is a failure. */
#include "tls/tls_check.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#define MAX_CERTS_PER_BUFFER 16

static const char *role_name(enum tls_cert_role role)
{
    switch (role) {
    case TLS_CERT_SERVER: return "Server";
    case TLS_CERT_CLIENT: return "Client";
    case TLS_CERT_CA: return "CA";
    }
    return "?";
}

/* ASN1 time as text for messages ("Jan  1 00:00:00 2030 GMT"); "?" when unreadable. */
static void time_text(const ASN1_TIME *t, char *out, size_t cap)
{
    BIO *b = BIO_new(BIO_s_mem());
    int n = 0;
    snprintf(out, cap, "?");
    if (!b)
        return;
    if (t && ASN1_TIME_print(b, t) == 1)
        n = BIO_read(b, out, (int)(cap > INT_MAX ? INT_MAX : cap - 1));
    if (n > 0)
        out[n] = '\0';
    BIO_free(b);
}

/* Server: the two algorithms docs/design/rpc.md#daemon-certificates lists. Client and CA: anything but the broken digests
 * docs/design/rpc.md#cli-certificates names (md2/md5/sha1 with RSA) — and, since the point is "no SHA-1", SHA-1 with DSA and
 * ECDSA too, and MD4. */
static bool sig_allowed(int nid, enum tls_cert_role role)
{
    if (role == TLS_CERT_SERVER)
        return nid == NID_sha256WithRSAEncryption || nid == NID_sha512WithRSAEncryption;
    switch (nid) {
    case NID_undef:
    case NID_md2WithRSAEncryption:
    case NID_md4WithRSAEncryption:
    case NID_md5WithRSAEncryption:
    case NID_sha1WithRSAEncryption:
    case NID_shaWithRSAEncryption:
    case NID_dsaWithSHA1:
    case NID_ecdsa_with_SHA1:
        return false;
    default:
        return true;
    }
}

static int check_key(X509 *x, enum tls_cert_role role, char *err, size_t errcap)
{
    EVP_PKEY *pk = X509_get0_pubkey(x);
    if (!pk) {
        snprintf(err, errcap, "Certificate public key is unreadable");
        return -EINVAL;
    }
    int id = EVP_PKEY_get_base_id(pk);
    if (id == EVP_PKEY_RSA || id == EVP_PKEY_RSA_PSS) {
        int bits = EVP_PKEY_get_bits(pk);
        if (bits < TLS_MIN_RSA_BITS) {
            snprintf(err, errcap, "RSA key length %d bits is less than required %d bits", bits,
                     TLS_MIN_RSA_BITS);
            return -EINVAL;
        }
        return 0;
    }
    /* docs/design/rpc.md#daemon-certificates allows only RSA signatures for the server, so its key is RSA too. */
    if (role == TLS_CERT_SERVER) {
        const char *name = OBJ_nid2sn(id);
        snprintf(err, errcap, "Server certificate key is not RSA (%s)", name ? name : "unknown");
        return -EINVAL;
    }
    /* A client (and a CA) may also hold an ECDSA key on a NIST curve of >= 128-bit strength
     * (docs/security.md, "Client certificates"); DSA, short curves and anything else are
     * refused, so the daemon's policy does not depend on OpenSSL's security level. */
    if (id == EVP_PKEY_EC) {
        char group[64] = "";
        size_t glen = 0;
        if (EVP_PKEY_get_group_name(pk, group, sizeof(group), &glen) == 1 &&
            (strcmp(group, "prime256v1") == 0 || strcmp(group, "secp384r1") == 0 ||
             strcmp(group, "secp521r1") == 0))
            return 0;
        snprintf(err, errcap, "%s certificate EC key on curve %s is not allowed (P-256, P-384 or P-521)",
                 role_name(role), group[0] ? group : "unknown");
        return -EINVAL;
    }
    const char *name = OBJ_nid2sn(id);
    snprintf(err, errcap, "%s certificate key type %s is not allowed (RSA >= %d bits or ECDSA P-256+)",
             role_name(role), name ? name : "unknown", TLS_MIN_RSA_BITS);
    return -EINVAL;
}

static int check_validity(X509 *x, enum tls_cert_role role, time_t now, char *err, size_t errcap)
{
    const ASN1_TIME *nb = X509_get0_notBefore(x), *na = X509_get0_notAfter(x);
    char when[64];
    /* X509_cmp_time: -1 time before now, 1 after, 0 unreadable */
    int cb = nb ? X509_cmp_time(nb, &now) : 0;
    int ca = na ? X509_cmp_time(na, &now) : 0;
    if (cb == 0 || ca == 0) {
        snprintf(err, errcap, "%s certificate has an unreadable validity period", role_name(role));
        return -EINVAL;
    }
    if (cb > 0) {
        time_text(nb, when, sizeof(when));
        snprintf(err, errcap, "%s certificate is not yet valid (notBefore %s)", role_name(role), when);
        return -EINVAL;
    }
    if (ca < 0) {
        time_text(na, when, sizeof(when));
        snprintf(err, errcap, "%s certificate has expired (notAfter %s)", role_name(role), when);
        return -EINVAL;
    }
    return 0;
}

int tls_check_cert(X509 *x, enum tls_cert_role role, time_t now, char *err, size_t errcap)
{
    if (!x) {
        snprintf(err, errcap, "no certificate");
        return -EINVAL;
    }
    if (X509_get_version(x) != X509_VERSION_3) {
        snprintf(err, errcap, "Certificate is not X.509v3");
        return -EINVAL;
    }
    int nid = X509_get_signature_nid(x);
    if (!sig_allowed(nid, role)) {
        const char *name = nid == NID_undef ? NULL : OBJ_nid2ln(nid);
        snprintf(err, errcap, "Certificate uses insecure signature algorithm: %d (%s)", nid,
                 name ? name : "unknown");
        return -EINVAL;
    }
    int rc = check_key(x, role, err, errcap);
    if (rc == 0)
        rc = check_validity(x, role, now, err, errcap);
    if (rc)
        return rc;
    /* computes and caches the extension flags; malformed extensions set EXFLAG_INVALID */
    uint32_t fl = X509_get_extension_flags(x);
    if (fl & EXFLAG_INVALID) {
        snprintf(err, errcap, "%s certificate has malformed extensions", role_name(role));
        return -EINVAL;
    }
    bool is_ca = (fl & EXFLAG_CA) != 0, has_ku = (fl & EXFLAG_KUSAGE) != 0;
    if (role == TLS_CERT_CA) {
        if (!is_ca) {
            snprintf(err, errcap, "CA certificate must be a CA (basicConstraints CA:TRUE)");
            return -EINVAL;
        }
        uint32_t ku = X509_get_key_usage(x);
        if (!has_ku || (ku & (KU_KEY_CERT_SIGN | KU_CRL_SIGN)) != (KU_KEY_CERT_SIGN | KU_CRL_SIGN)) {
            snprintf(err, errcap, "CA certificate must have key usage keyCertSign and cRLSign");
            return -EINVAL;
        }
        return 0;
    }
    if (is_ca) {
        snprintf(err, errcap, "%s certificate must not be a CA", role_name(role));
        return -EINVAL;
    }
    if (!has_ku) {
        snprintf(err, errcap, "%s certificate must have key usage extension", role_name(role));
        return -EINVAL;
    }
    return 0;
}

bool tls_check_crl_current(const X509_CRL *crl, time_t now)
{
    const ASN1_TIME *thisu = X509_CRL_get0_lastUpdate(crl), *next = X509_CRL_get0_nextUpdate(crl);
    if (!thisu || X509_cmp_time(thisu, &now) >= 0)   /* unreadable or in the future */
        return false;
    if (next)
        return X509_cmp_time(next, &now) > 0;
    struct tm tm;
    if (ASN1_TIME_to_tm(thisu, &tm) != 1)
        return false;
    time_t t = timegm(&tm);
    return t != (time_t)-1 && now - t < (time_t)TLS_CRL_DEFAULT_DAYS * 86400;
}

int tls_check_crl_lists(X509_CRL *crl, X509 *x)
{
    X509_REVOKED *rev = NULL;
    const ASN1_INTEGER *serial = X509_get0_serialNumber(x);
    if (!serial)
        return 0;
    /* 1: listed; 2: listed as removeFromCRL (a delta entry that un-revokes) */
    return X509_CRL_get0_by_serial(crl, &rev, (ASN1_INTEGER *)serial) == 1 ? -EKEYREVOKED : 0;
}

static void check_all_roles(X509 *x, time_t now, char *err, size_t errcap)
{
    char e[512];
    for (int r = TLS_CERT_SERVER; r <= TLS_CERT_CA; r++) {
        if (tls_check_cert(x, (enum tls_cert_role)r, now, e, sizeof(e)) != 0)
            snprintf(err, errcap, "%s", e);
    }
}

int tls_check_buffer(const void *buf, size_t len, enum tls_check_input kind, time_t now,
                     char *err, size_t errcap)
{
    X509 *certs[MAX_CERTS_PER_BUFFER];
    X509_CRL *crl = NULL;
    int n = 0, checked = 0;
    BIO *b = NULL;
    snprintf(err, errcap, "nothing parsed");
    if (len > INT_MAX)
        return -EINVAL;
    if (kind == TLS_IN_DER_CERT || kind == TLS_IN_DER_CRL) {
        const unsigned char *p = buf;
        if (kind == TLS_IN_DER_CERT) {
            certs[0] = d2i_X509(NULL, &p, (long)len);
            n = certs[0] != NULL;
        } else {
            crl = d2i_X509_CRL(NULL, &p, (long)len);
        }
    } else {
        b = BIO_new_mem_buf(buf, (int)len);
        if (!b)
            return -ENOMEM;
        if (kind == TLS_IN_PEM_CRL)
            crl = PEM_read_bio_X509_CRL(b, NULL, NULL, NULL);
        while (n < MAX_CERTS_PER_BUFFER && (certs[n] = PEM_read_bio_X509(b, NULL, NULL, NULL)))
            n++;
    }
    for (int i = 0; i < n; i++) {
        check_all_roles(certs[i], now, err, errcap);
        checked++;
    }
    if (crl) {
        (void)tls_check_crl_current(crl, now);
        for (int i = 0; i < n; i++)
            (void)tls_check_crl_lists(crl, certs[i]);
        checked++;
    }
    for (int i = 0; i < n; i++)
        X509_free(certs[i]);
    X509_CRL_free(crl);
    BIO_free(b);
    ERR_clear_error();   /* parse failures leave entries; the queue must not grow */
    return checked ? checked : -EINVAL;
}
