/* test_tls_policy: the client-certificate key policy (docs/security.md, "Client certificates")
 * on certificates made here with OpenSSL: RSA >= 3072 and ECDSA P-256/P-384/P-521 pass; RSA
 * 2048, secp256k1, Ed25519 and a CA:TRUE leaf are refused with their one-line reason. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/x509v3.h>

#include "tls/tls_check.h"

/* A self-signed v3 certificate for key, valid now, with key usage and the given CA flag. */
static X509 *make_cert(EVP_PKEY *key, int ca)
{
    X509 *x = X509_new();
    X509V3_CTX ctx;
    assert_non_null(x);
    assert_int_equal(X509_set_version(x, X509_VERSION_3), 1);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 7);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 3600);
    assert_int_equal(X509_set_pubkey(x, key), 1);
    X509_NAME *n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)"client", -1, -1, 0);
    X509_set_issuer_name(x, n);
    X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
    X509_EXTENSION *bc = X509V3_EXT_conf_nid(NULL, &ctx, NID_basic_constraints,
                                             ca ? "critical,CA:TRUE" : "critical,CA:FALSE");
    X509_EXTENSION *ku = X509V3_EXT_conf_nid(NULL, &ctx, NID_key_usage, "critical,digitalSignature");
    assert_non_null(bc);
    assert_non_null(ku);
    X509_add_ext(x, bc, -1);
    X509_add_ext(x, ku, -1);
    X509_EXTENSION_free(bc);
    X509_EXTENSION_free(ku);
    int id = EVP_PKEY_get_base_id(key);
    assert_true(X509_sign(x, key, id == EVP_PKEY_ED25519 ? NULL : EVP_sha256()) > 0);
    return x;
}

static void check(EVP_PKEY *key, int ca, const char *want)
{
    char err[256] = "";
    assert_non_null(key);
    X509 *x = make_cert(key, ca);
    int rc = tls_check_cert(x, TLS_CERT_CLIENT, time(NULL), err, sizeof(err));
    if (!want && rc != 0)
        fail_msg("refused: %s", err);
    if (want && (rc != -EINVAL || !strstr(err, want)))
        fail_msg("got %d '%s', want '%s'", rc, err, want);
    X509_free(x);
    EVP_PKEY_free(key);
}

static void test_client_key_policy(void **state)
{
    (void)state;
    check(EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256"), 0, NULL);
    check(EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-384"), 0, NULL);
    check(EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)3072), 0, NULL);
    check(EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048), 0,
          "RSA key length 2048 bits is less than required 3072 bits");
    check(EVP_PKEY_Q_keygen(NULL, NULL, "EC", "secp256k1"), 0,
          "Client certificate EC key on curve secp256k1 is not allowed (P-256, P-384 or P-521)");
    check(EVP_PKEY_Q_keygen(NULL, NULL, "ED25519"), 0,
          "Client certificate key type ED25519 is not allowed (RSA >= 3072 bits or ECDSA P-256+)");
    check(EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256"), 1, "Client certificate must not be a CA");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_client_key_policy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
