/* strutil: strict parsers. Every external number in msmonitor goes through one of these. */
#include "common/strutil.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int str_to_u64(const char *s, uint64_t *ret)
{
    if (!s || !*s)
        return -EINVAL;
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -EINVAL;
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -ERANGE;
        v = v * 10 + d;
    }
    *ret = v;
    return 0;
}

int str_to_i64(const char *s, int64_t *ret)
{
    if (!s)
        return -EINVAL;
    bool neg = false;
    if (*s == '-' || *s == '+') {
        neg = *s == '-';
        s++;
    }
    uint64_t u;
    int r = str_to_u64(s, &u);
    if (r)
        return r;
    if (neg) {
        if (u > (uint64_t)INT64_MAX + 1)
            return -ERANGE;
        *ret = u == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)u;
    } else {
        if (u > (uint64_t)INT64_MAX)
            return -ERANGE;
        *ret = (int64_t)u;
    }
    return 0;
}

int str_to_i32(const char *s, int32_t *ret)
{
    int64_t v;
    int r = str_to_i64(s, &v);
    if (r)
        return r;
    if (v < INT32_MIN || v > INT32_MAX)
        return -ERANGE;
    *ret = (int32_t)v;
    return 0;
}

int str_to_u32(const char *s, uint32_t *ret)
{
    uint64_t v;
    int r = str_to_u64(s, &v);
    if (r)
        return r;
    if (v > UINT32_MAX)
        return -ERANGE;
    *ret = (uint32_t)v;
    return 0;
}

int str_to_decimal(const char *s, double *ret)
{
    if (!s)
        return -EINVAL;
    const char *p = s;
    if (*p == '-')
        p++;
    int digits = 0;
    while (*p >= '0' && *p <= '9') {
        p++;
        digits++;
    }
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9') {
            p++;
            digits++;
        }
    }
    if (*p || digits == 0)
        return -EINVAL;
    double v = strtod(s, NULL);
    if (!isfinite(v))
        return -ERANGE;
    *ret = v;
    return 0;
}

int str_to_double(const char *s, double *ret)
{
    if (!s || !*s)
        return -EINVAL;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end)
        return -EINVAL;
    if (!isfinite(v))
        return -ERANGE;
    *ret = v;
    return 0;
}

void str_trim_view(const char **s, size_t *n, const char *set)
{
    const char *p = *s;
    size_t len = *n;
    while (len && strchr(set, *p)) {
        p++;
        len--;
    }
    while (len && strchr(set, p[len - 1]))
        len--;
    *s = p;
    *n = len;
}

int str_copy(char *dst, size_t cap, const char *src, size_t n)
{
    if (cap == 0)
        return -ENOSPC;
    int r = 0;
    if (n >= cap) {
        n = cap - 1;
        r = -ENOSPC;
    }
    memcpy(dst, src, n);
    dst[n] = '\0';
    return r;
}

bool str_starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

const char *errno_name(int err)
{
    static const struct { int e; const char *n; } names[] = {
        {EPERM, "EPERM"}, {ENOENT, "ENOENT"}, {ESRCH, "ESRCH"}, {EINTR, "EINTR"},
        {EIO, "EIO"}, {EBADF, "EBADF"}, {EAGAIN, "EAGAIN"}, {ENOMEM, "ENOMEM"},
        {EACCES, "EACCES"}, {EFAULT, "EFAULT"}, {EBUSY, "EBUSY"}, {EEXIST, "EEXIST"},
        {ENOTDIR, "ENOTDIR"}, {EISDIR, "EISDIR"}, {EINVAL, "EINVAL"}, {ENFILE, "ENFILE"},
        {EMFILE, "EMFILE"}, {ENOSPC, "ENOSPC"}, {EROFS, "EROFS"}, {EPIPE, "EPIPE"},
        {ERANGE, "ERANGE"}, {ENAMETOOLONG, "ENAMETOOLONG"}, {ENOSYS, "ENOSYS"},
        {ENOTSOCK, "ENOTSOCK"}, {EMSGSIZE, "EMSGSIZE"}, {EPROTOTYPE, "EPROTOTYPE"},
        {EAFNOSUPPORT, "EAFNOSUPPORT"}, {EADDRINUSE, "EADDRINUSE"},
        {EADDRNOTAVAIL, "EADDRNOTAVAIL"}, {ENETUNREACH, "ENETUNREACH"},
        {ECONNABORTED, "ECONNABORTED"}, {ECONNRESET, "ECONNRESET"}, {ENOBUFS, "ENOBUFS"},
        {ENOTCONN, "ENOTCONN"}, {ETIMEDOUT, "ETIMEDOUT"}, {ECONNREFUSED, "ECONNREFUSED"},
        {EHOSTUNREACH, "EHOSTUNREACH"}, {EALREADY, "EALREADY"}, {EINPROGRESS, "EINPROGRESS"},
        {ENOTSUP, "ENOTSUP"}, {EDQUOT, "EDQUOT"}, {ELOOP, "ELOOP"}, {ENODATA, "ENODATA"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (names[i].e == err)
            return names[i].n;
    static __thread char buf[16];
    buf[0] = 'E';
    int v = err < 0 ? -err : err, n = 1;
    char tmp[12];
    int k = 0;
    do {
        tmp[k++] = (char)('0' + v % 10);
        v /= 10;
    } while (v && k < 11);
    while (k)
        buf[n++] = tmp[--k];
    buf[n] = '\0';
    return buf;
}

bool str_printable(const char *s, size_t cap)
{
    size_t n = strnlen(s, cap);

    if (n == cap)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return false;
    return true;
}

int str_append(char *dst, size_t cap, const char *src)
{
    size_t o = strnlen(dst, cap), n = strlen(src);

    if (o >= cap)
        return -ENOSPC;
    if (n > cap - 1 - o) {
        memcpy(dst + o, src, cap - 1 - o);
        dst[cap - 1] = '\0';
        return -ENOSPC;
    }
    memcpy(dst + o, src, n + 1);
    return 0;
}
