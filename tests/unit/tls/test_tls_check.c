/* test_tls_check: every rule of docs/design/rpc.md#mutual-tls on real certificates (made by the openssl CLI,
 * tests/fuzz/make_corpus.py): the accepted server and client certificates, and one failing
 * certificate per rule with the spec's message; the CRL's validity window and serial lookup. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/err.h>
#include <openssl/pem.h>

#include "tls/tls_check.h"

#define NOW_2030 ((time_t)1893456000)   /* inside the leaf certificates' 2020..2040 validity */

/* A corpus file minus its one-byte parser selector. */
static BIO *fixture(const char *name)
{
    char path[1024];
    static char buf[65536];
    snprintf(path, sizeof(path), "%s/%s", TLS_FIXTURES, name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    assert_true(n > 1);
    return BIO_new_mem_buf(buf + 1, (int)n - 1);
}

static X509 *cert(const char *name)
{
    BIO *b = fixture(name);
    X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);
    BIO_free(b);
    assert_non_null(x);
    return x;
}

static void expect(const char *name, enum tls_cert_role role, time_t now, const char *msg)
{
    char err[512] = "";
    X509 *x = cert(name);
    int rc = tls_check_cert(x, role, now, err, sizeof(err));
    if (!msg) {
        if (rc != 0)
            fail_msg("%s: %s", name, err);
    } else {
        assert_int_equal(rc, -EINVAL);
        if (strncmp(err, msg, strlen(msg)) != 0)
            fail_msg("%s: got '%s', want '%s...'", name, err, msg);
    }
    X509_free(x);
}

static void test_accepted(void **state)
{
    (void)state;
    expect("pem_server", TLS_CERT_SERVER, NOW_2030, NULL);
    expect("pem_client", TLS_CERT_CLIENT, NOW_2030, NULL);
}

static void test_each_rule(void **state)
{
    (void)state;
    expect("pem_expired", TLS_CERT_SERVER, NOW_2030, "Server certificate has expired (notAfter Jan  1 00:00:00 2021 GMT)");
    expect("pem_server", TLS_CERT_SERVER, (time_t)1500000000, "Server certificate is not yet valid");
    expect("pem_expired", TLS_CERT_CLIENT, NOW_2030, "Client certificate has expired");
    expect("pem_sha1", TLS_CERT_SERVER, NOW_2030, "Certificate uses insecure signature algorithm: 65 (sha1WithRSAEncryption)");
    expect("pem_sha1", TLS_CERT_CLIENT, NOW_2030, "Certificate uses insecure signature algorithm: 65");
    expect("pem_rsa2048", TLS_CERT_SERVER, NOW_2030, "RSA key length 2048 bits is less than required 3072 bits");
    expect("pem_rsa2048", TLS_CERT_CLIENT, NOW_2030, "RSA key length 2048 bits is less than required 3072 bits");
    expect("pem_no_key_usage", TLS_CERT_SERVER, NOW_2030, "Server certificate must have key usage extension");
    expect("pem_leaf_is_ca", TLS_CERT_SERVER, NOW_2030, "Server certificate must not be a CA");
    expect("pem_server", TLS_CERT_CA, NOW_2030, "CA certificate must be a CA");
}

static void test_ca(void **state)
{
    (void)state;
    X509 *x = cert("pem_ca");
    struct tm tm;
    char err[512];
    assert_int_equal(ASN1_TIME_to_tm(X509_get0_notBefore(x), &tm), 1);
    time_t inside = timegm(&tm) + 3600;
    assert_int_equal(tls_check_cert(x, TLS_CERT_CA, inside, err, sizeof(err)), 0);
    assert_int_equal(tls_check_cert(x, TLS_CERT_CLIENT, inside, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "Client certificate must not be a CA");
    X509_free(x);
}

static void test_crl(void **state)
{
    (void)state;
    BIO *b = fixture("crl_with_certs");
    X509_CRL *crl = PEM_read_bio_X509_CRL(b, NULL, NULL, NULL);
    X509 *client = PEM_read_bio_X509(b, NULL, NULL, NULL);
    X509 *server = PEM_read_bio_X509(b, NULL, NULL, NULL);
    BIO_free(b);
    assert_non_null(crl);
    assert_non_null(client);
    assert_non_null(server);
    assert_int_equal(tls_check_crl_lists(crl, client), -EKEYREVOKED);
    assert_int_equal(tls_check_crl_lists(crl, server), 0);
    struct tm tm;
    assert_int_equal(ASN1_TIME_to_tm(X509_CRL_get0_lastUpdate(crl), &tm), 1);
    time_t thisu = timegm(&tm);
    assert_true(tls_check_crl_current(crl, thisu + 3600));
    assert_false(tls_check_crl_current(crl, thisu - 3600));        /* not yet issued */
    assert_false(tls_check_crl_current(crl, NOW_2030));            /* past nextUpdate */
    X509_CRL_free(crl);
    X509_free(client);
    X509_free(server);
}

static void test_buffer_garbage(void **state)
{
    char err[256];
    (void)state;
    assert_int_equal(tls_check_buffer("", 0, TLS_IN_PEM_CERTS, NOW_2030, err, sizeof(err)), -EINVAL);
    assert_int_equal(tls_check_buffer("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", 61,
                                      TLS_IN_PEM_CERTS, NOW_2030, err, sizeof(err)), -EINVAL);
    assert_int_equal(tls_check_buffer("\x30\x82\xff\xff", 4, TLS_IN_DER_CERT, NOW_2030, err, sizeof(err)), -EINVAL);
    assert_int_equal(ERR_peek_error(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepted),
        cmocka_unit_test(test_each_rule),
        cmocka_unit_test(test_ca),
        cmocka_unit_test(test_crl),
        cmocka_unit_test(test_buffer_garbage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
