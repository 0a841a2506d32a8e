/* cli_fake_transport: the replies of the dyno fuzz targets, served through rpc_transport so
 * the real commands run without sockets. Host "unix:/hN" gets, on its c-th call, segment
 * (N * 4 + c) % nseg of the input (segments split on the byte 0x01). Header-only: each
 * fuzz_*.c is its own binary. */
#ifndef MSMON_FUZZ_CLI_FAKE_TRANSPORT_H
#define MSMON_FUZZ_CLI_FAKE_TRANSPORT_H

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/rpc_client.h"

#define FAKE_SEG_MAX 16
#define FAKE_HOSTS 8

struct fake_replies {
    const char *seg[FAKE_SEG_MAX];
    size_t len[FAKE_SEG_MAX];
    size_t nseg;
    unsigned calls[FAKE_HOSTS];
    pthread_mutex_t mu;
};

static int fake_call(void *arg, const char *target, const char *body, size_t body_len,
                     char **ret_reply, size_t *ret_len, enum rpc_fail *ret_fail, char *err,
                     size_t errcap)
{
    struct fake_replies *f = arg;
    unsigned h = 0, c;
    (void)body;
    (void)body_len;
    if (strncmp(target, "unix:/h", 7) == 0 && target[7] >= '0' && target[7] < '0' + FAKE_HOSTS)
        h = (unsigned)(target[7] - '0');
    pthread_mutex_lock(&f->mu);
    c = f->calls[h]++;
    pthread_mutex_unlock(&f->mu);
    *ret_fail = RPC_OK;
    if (f->nseg == 0) {
        *ret_fail = RPC_FAIL_NO_REPLY;
        snprintf(err, errcap, "no reply");
        return -ENODATA;
    }
    size_t k = (h * 4 + c) % f->nseg, n = f->len[k];
    /* the real client refuses frames past RPC_REPLY_MAX and hands out NUL-terminated text */
    if (n == 0 || n > RPC_REPLY_MAX) {
        *ret_fail = RPC_FAIL_BAD_REPLY;
        snprintf(err, errcap, "Invalid reply length %zu from the server", n);
        return -EBADMSG;
    }
    char *r = malloc(n + 1);
    if (!r)
        return -ENOMEM;
    memcpy(r, f->seg[k], n);
    r[n] = '\0';
    *ret_reply = r;
    *ret_len = n;
    return 0;
}

static void fake_split(struct fake_replies *f, const char *data, size_t size)
{
    size_t s = 0;
    memset(f->calls, 0, sizeof(f->calls));
    f->nseg = 0;
    while (s <= size && f->nseg < FAKE_SEG_MAX) {
        const char *e = memchr(data + s, 0x01, size - s);
        size_t end = e ? (size_t)(e - data) : size;
        f->seg[f->nseg] = data + s;
        f->len[f->nseg++] = end - s;
        if (!e)
            break;
        s = end + 1;
    }
}

#endif
