/* fuzz_tls_check: the certificate rules of docs/design/rpc.md#mutual-tls (src/tls/tls_check.c) on mutated
 * certificates and CRLs, the code path both dynolog and dyno run on their --certs_dir files.
 * The first byte picks the parser: 'P' PEM certificates, 'D' a DER certificate, 'L' a PEM CRL
 * followed by PEM certificates, 'R' a DER CRL. The seed corpus (corpus/fuzz_tls_check/) holds
 * real openssl-made certificates: good, expired, SHA-1, 2048-bit, CA, no key usage, a CRL. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/err.h>

#include "tls/tls_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    enum tls_check_input kind;
    if (size < 1)
        return 0;
    switch (data[0]) {
    case 'P': kind = TLS_IN_PEM_CERTS; break;
    case 'D': kind = TLS_IN_DER_CERT; break;
    case 'L': kind = TLS_IN_PEM_CRL; break;
    case 'R': kind = TLS_IN_DER_CRL; break;
    default: return 0;
    }
    /* a fixed "now" (2030-01-01, inside the seeds' validity) keeps runs reproducible whatever the seeds' dates */
    int n = tls_check_buffer(data + 1, size - 1, kind, (time_t)1893456000, err, sizeof(err));
    if (!memchr(err, '\0', sizeof(err)) || n == 0)
        abort();
    if (ERR_peek_error() != 0)   /* the error queue must be left empty */
        abort();
    return 0;
}
