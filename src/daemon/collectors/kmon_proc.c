/* kmon_proc: line/field scanners over a file's text. Every number must be whole decimal digits
 * (the kernel never writes anything else); a malformed line fails the whole file, so a cycle
 * never reports half-parsed values. */
#include "daemon/collectors/kmon_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/strutil.h"

static int join(const char *root, const char *rel, char *out, size_t cap)
{
    size_t rl = strlen(root);
    while (rl > 0 && root[rl - 1] == '/')
        rl--;
    while (*rel == '/')
        rel++;
    int n = snprintf(out, cap, "%.*s/%s", (int)rl, root, rel);
    return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

long kmon_proc_read(const char *root, const char *rel, char *buf, size_t cap)
{
    char path[4096];
    size_t got = 0;
    int fd, rc = join(root, rel, path, sizeof(path));
    if (rc)
        return rc;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    /* /proc files report size 0: read until EOF, one byte short of the cap to detect overflow */
    for (;;) {
        ssize_t r = read(fd, buf + got, cap - 1 - got);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            rc = -errno;
            goto out_fd;
        }
        if (r == 0)
            break;
        got += (size_t)r;
        if (got == cap - 1) {
            char extra;
            if (read(fd, &extra, 1) > 0) {
                rc = -EFBIG;
                goto out_fd;
            }
            break;
        }
    }
    buf[got] = '\0';
out_fd:
    close(fd);
    return rc ? rc : (long)got;
}

bool kmon_proc_exists(const char *root, const char *rel)
{
    char path[4096];
    struct stat st;
    return join(root, rel, path, sizeof(path)) == 0 && stat(path, &st) == 0;
}

/* A view cursor: lines, then whitespace-separated tokens inside a line. */
struct view {
    const char *p, *end;
};

static bool next_line(struct view *v, struct view *ret)
{
    if (v->p >= v->end)
        return false;
    const char *nl = memchr(v->p, '\n', (size_t)(v->end - v->p));
    ret->p = v->p;
    ret->end = nl ? nl : v->end;
    v->p = nl ? nl + 1 : v->end;
    return true;
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r'; }

static bool next_tok(struct view *v, const char **ret, size_t *ret_len)
{
    while (v->p < v->end && is_space(*v->p))
        v->p++;
    if (v->p >= v->end)
        return false;
    const char *s = v->p;
    while (v->p < v->end && !is_space(*v->p))
        v->p++;
    *ret = s;
    *ret_len = (size_t)(v->p - s);
    return true;
}

static int tok_u64(const char *t, size_t n, uint64_t *ret)
{
    char buf[32];
    if (n == 0 || n >= sizeof(buf))
        return -EINVAL;
    memcpy(buf, t, n);
    buf[n] = '\0';
    return str_to_u64(buf, ret);
}

static int tok_double(const char *t, size_t n, double *ret)
{
    char buf[32];
    if (n == 0 || n >= sizeof(buf))
        return -EINVAL;
    memcpy(buf, t, n);
    buf[n] = '\0';
    return str_to_decimal(buf, ret);
}

static int next_u64(struct view *v, uint64_t *ret)
{
    const char *t;
    size_t n;
    return next_tok(v, &t, &n) ? tok_u64(t, n, ret) : -EINVAL;
}

int kmon_parse_uptime(const char *s, size_t len, uint64_t *ret_secs)
{
    struct view v = { s, s + len }, line;
    const char *t;
    size_t n, dot;
    if (!next_line(&v, &line) || !next_tok(&line, &t, &n))
        return -EINVAL;
    for (dot = 0; dot < n && t[dot] != '.'; dot++)
        ;
    for (size_t i = dot + 1; i < n; i++)
        if (t[i] < '0' || t[i] > '9')
            return -EINVAL;
    return tok_u64(t, dot, ret_secs);
}

int kmon_parse_stat(const char *s, size_t len, struct kmon_cpu *ret)
{
    struct view v = { s, s + len }, line;
    memset(ret, 0, sizeof(*ret));
    while (next_line(&v, &line)) {
        const char *t;
        size_t n, k = 0;
        if (!next_tok(&line, &t, &n) || n != 3 || memcmp(t, "cpu", 3) != 0)
            continue;
        while (k < KC_COUNT && next_tok(&line, &t, &n)) {
            if (tok_u64(t, n, &ret->t[k]) != 0)
                return -EINVAL;
            k++;
        }
        return k >= 4 ? 0 : -EINVAL;
    }
    return -ENOENT;
}

int kmon_parse_stat_cores(const char *s, size_t len, struct kmon_core *ret, size_t cap, size_t *ret_n)
{
    struct view v = { s, s + len }, line;
    *ret_n = 0;
    while (next_line(&v, &line)) {
        const char *t;
        size_t n, k = 0;
        uint64_t id;
        if (!next_tok(&line, &t, &n) || n < 4 || memcmp(t, "cpu", 3) != 0)
            continue;
        if (tok_u64(t + 3, n - 3, &id) != 0 || id > UINT32_MAX)
            return -EINVAL;
        if (*ret_n >= cap)
            return -ENOSPC;
        struct kmon_core *c = &ret[*ret_n];
        memset(c, 0, sizeof(*c));
        c->id = (uint32_t)id;
        while (k < KC_COUNT && next_tok(&line, &t, &n)) {
            if (tok_u64(t, n, &c->c.t[k]) != 0)
                return -EINVAL;
            k++;
        }
        if (k < 4)
            return -EINVAL;
        (*ret_n)++;
    }
    return 0;
}

static bool has_prefix(const char *name, const char *prefixes)
{
    const char *p = prefixes;
    while (*p) {
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        if (n > 0 && strncmp(name, p, n) == 0)
            return true;
        if (!c)
            break;
        p = c + 1;
    }
    return false;
}

int kmon_parse_netdev(const char *s, size_t len, const char *prefixes, struct kmon_netif *ret,
                      size_t cap, size_t *ret_n)
{
    struct view v = { s, s + len }, line;
    *ret_n = 0;
    while (next_line(&v, &line)) {
        /* "  eth0: 1 2 3 ..." — the name may touch the first number ("eth0:123") */
        const char *colon = memchr(line.p, ':', (size_t)(line.end - line.p));
        if (!colon)
            continue; /* the two header lines */
        const char *np = line.p;
        while (np < colon && is_space(*np))
            np++;
        size_t nl = (size_t)(colon - np);
        /* a NUL in the name would make it "" once copied (fuzz_kmon_proc found it) */
        if (nl == 0 || memchr(np, '|', nl) || memchr(np, '\0', nl))
            continue;
        struct view f = { colon + 1, line.end };
        uint64_t c[16];
        for (int i = 0; i < 16; i++)
            if (next_u64(&f, &c[i]) != 0)
                return -EINVAL;
        if (nl >= KMON_NAME_CAP)
            continue;
        struct kmon_netif e = { .c = { c[0], c[1], c[2], c[3], c[8], c[9], c[10], c[11] } };
        memcpy(e.name, np, nl);
        e.name[nl] = '\0';
        if (prefixes && !has_prefix(e.name, prefixes))
            continue;
        if (*ret_n >= cap)
            return -ENOSPC;
        ret[(*ret_n)++] = e;
    }
    return 0;
}

int kmon_parse_meminfo(const char *s, size_t len, struct kmon_mem *ret)
{
    static const char *const keys[KM_COUNT] = { "MemTotal:", "MemFree:", "MemAvailable:", "Buffers:",
                                                "Cached:", "SwapTotal:", "SwapFree:" };
    struct view v = { s, s + len }, line;
    memset(ret, 0, sizeof(*ret));
    while (next_line(&v, &line)) {
        const char *t;
        size_t n;
        if (!next_tok(&line, &t, &n))
            continue;
        for (int k = 0; k < KM_COUNT; k++) {
            if (strlen(keys[k]) != n || memcmp(keys[k], t, n) != 0)
                continue;
            if (next_u64(&line, &ret->kb[k]) != 0)
                return -EINVAL;
            ret->has[k] = true;
        }
    }
    return ret->has[KM_TOTAL] ? 0 : -ENOENT;
}

int kmon_parse_loadavg(const char *s, size_t len, struct kmon_load *ret)
{
    struct view v = { s, s + len }, line;
    const char *t;
    size_t n;
    double *d[3] = { &ret->l1, &ret->l5, &ret->l15 };
    if (!next_line(&v, &line))
        return -EINVAL;
    for (int i = 0; i < 3; i++)
        if (!next_tok(&line, &t, &n) || tok_double(t, n, d[i]) != 0)
            return -EINVAL;
    if (!next_tok(&line, &t, &n))
        return -EINVAL;
    const char *slash = memchr(t, '/', n);
    if (!slash || tok_u64(t, (size_t)(slash - t), &ret->running) != 0 ||
        tok_u64(slash + 1, n - (size_t)(slash - t) - 1, &ret->total) != 0)
        return -EINVAL;
    return 0;
}

int kmon_parse_diskstats(const char *s, size_t len, struct kmon_disk *ret, size_t cap, size_t *ret_n)
{
    struct view v = { s, s + len }, line;
    *ret_n = 0;
    while (next_line(&v, &line)) {
        const char *t, *name;
        size_t n, nl;
        uint64_t f[10];
        if (!next_tok(&line, &t, &n))
            continue; /* blank line */
        if (next_u64(&(struct view){ t, t + n }, &f[0]) != 0 || next_u64(&line, &f[0]) != 0 ||
            !next_tok(&line, &name, &nl))
            return -EINVAL;
        /* reads, reads merged, sectors read, ms reading, writes, merged, sectors written, ms
         * writing, in flight, ms doing I/O (later kernels append discard/flush fields) */
        for (int i = 0; i < 10; i++)
            if (next_u64(&line, &f[i]) != 0)
                return -EINVAL;
        if (nl >= KMON_DISK_NAME_CAP)
            continue;
        if (*ret_n >= cap)
            return -ENOSPC;
        struct kmon_disk *d = &ret[(*ret_n)++];
        memcpy(d->name, name, nl);
        d->name[nl] = '\0';
        d->c[KD_READS] = f[0];
        d->c[KD_SECT_READ] = f[2];
        d->c[KD_WRITES] = f[4];
        d->c[KD_SECT_WRITTEN] = f[6];
        d->c[KD_IO_MS] = f[9];
    }
    return 0;
}
