/* hosts: target-list parsing and expansion (see hosts.h). Expansion counts the product of
 * the groups before generating anything, so a hostile range cannot allocate unbounded. */
#include "cli/hosts.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli_buf.h"
#include "common/strutil.h"

#define TRIM_SET " \t\r"
#define MAX_GROUPS 16
#define MAX_NUM_DIGITS 18
#define HOSTFILE_MAX (16u << 20)
#define UNIX_PATH_MAX 107

struct range {
    uint64_t lo, hi;
    int width;        /* zero-pad width, 0 = none */
};

struct group {
    size_t lit_off, lit_len;  /* literal text before this group */
    struct range *r;
    size_t nr;
    uint64_t count;
};

void hosts_init(struct hosts *h)
{
    memset(h, 0, sizeof(*h));
}

void hosts_fini(struct hosts *h)
{
    for (size_t i = 0; i < h->n; i++)
        free(h->v[i]);
    free(h->v);
    free(h->set);
    memset(h, 0, sizeof(*h));
}

static uint64_t hash_str(const char *s)
{
    uint64_t x = 1469598103934665603ull;
    for (; *s; s++)
        x = (x ^ (unsigned char)*s) * 1099511628211ull;
    return x;
}

static int set_grow(struct hosts *h)
{
    size_t ncap = h->set_cap ? h->set_cap * 2 : 64;
    uint32_t *ns = calloc(ncap, sizeof(*ns));
    if (!ns)
        return -ENOMEM;
    for (size_t i = 0; i < h->n; i++) {
        size_t k = hash_str(h->v[i]) & (ncap - 1);
        while (ns[k])
            k = (k + 1) & (ncap - 1);
        ns[k] = (uint32_t)(i + 1);
    }
    free(h->set);
    h->set = ns;
    h->set_cap = ncap;
    return 0;
}

/* Append a copy of s unless already present. */
static int add_one(struct hosts *h, const char *s, char *err, size_t errcap)
{
    if ((h->n + 1) * 2 > h->set_cap && set_grow(h) < 0)
        return -ENOMEM;
    size_t k = hash_str(s) & (h->set_cap - 1);
    while (h->set[k]) {
        if (strcmp(h->v[h->set[k] - 1], s) == 0)
            return 0;
        k = (k + 1) & (h->set_cap - 1);
    }
    if (h->n >= HOSTS_MAX) {
        snprintf(err, errcap, "more than %d hosts", HOSTS_MAX);
        return -EINVAL;
    }
    if (h->n == h->cap) {
        size_t ncap = h->cap ? h->cap * 2 : 16;
        char **nv = realloc(h->v, ncap * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        h->v = nv;
        h->cap = ncap;
    }
    char *copy = strdup(s);
    if (!copy)
        return -ENOMEM;
    h->v[h->n++] = copy;
    h->set[k] = (uint32_t)h->n;
    return 0;
}

static int parse_num(const char *s, size_t n, uint64_t *ret)
{
    char tmp[MAX_NUM_DIGITS + 1];
    if (n == 0 || n > MAX_NUM_DIGITS || str_copy(tmp, sizeof(tmp), s, n) < 0)
        return -EINVAL;
    return str_to_u64(tmp, ret);
}

/* Parse the inside of one bracket group ("1,3,5-6"). */
static int parse_group(const char *s, size_t n, struct group *g, char *err, size_t errcap)
{
    size_t nitems = 1;
    for (size_t i = 0; i < n; i++)
        nitems += s[i] == ',';
    g->r = calloc(nitems, sizeof(*g->r));
    if (!g->r)
        return -ENOMEM;
    g->nr = 0;
    g->count = 0;
    const char *p = s;
    const char *end = s + n;
    while (p <= end) {
        const char *c = memchr(p, ',', (size_t)(end - p));
        const char *iend = c ? c : end;
        const char *dash = memchr(p, '-', (size_t)(iend - p));
        struct range *r = &g->r[g->nr];
        const char *lo_s = p;
        size_t lo_n = dash ? (size_t)(dash - p) : (size_t)(iend - p);
        if (parse_num(lo_s, lo_n, &r->lo) < 0 ||
            (dash && parse_num(dash + 1, (size_t)(iend - dash - 1), &r->hi) < 0)) {
            snprintf(err, errcap, "invalid range '%.*s' in '[%.*s]' (expected numbers or lo-hi)",
                     (int)(iend - p), p, (int)n, s);
            return -EINVAL;
        }
        if (!dash)
            r->hi = r->lo;
        if (r->lo > r->hi) {
            snprintf(err, errcap, "invalid range '%.*s' (lo > hi)", (int)(iend - p), p);
            return -EINVAL;
        }
        r->width = (lo_n > 1 && lo_s[0] == '0') ? (int)lo_n : 0;
        uint64_t cnt = r->hi - r->lo + 1;
        if (cnt > HOSTS_MAX || g->count + cnt > HOSTS_MAX) {
            snprintf(err, errcap, "more than %d hosts", HOSTS_MAX);
            return -EINVAL;
        }
        g->count += cnt;
        g->nr++;
        if (!c)
            break;
        p = c + 1;
    }
    return 0;
}

/* The value of the idx-th host of group g (idx < g->count). */
static void group_value(const struct group *g, uint64_t idx, uint64_t *ret_v, int *ret_width)
{
    for (size_t i = 0; i < g->nr; i++) {
        uint64_t cnt = g->r[i].hi - g->r[i].lo + 1;
        if (idx < cnt) {
            *ret_v = g->r[i].lo + idx;
            *ret_width = g->r[i].width;
            return;
        }
        idx -= cnt;
    }
}

static bool is_bracketed_ipv6(const char *s, size_t n)
{
    return n >= 2 && s[0] == '[' && s[n - 1] == ']' && memchr(s, ':', n) &&
           !memchr(s + 1, '[', n - 2) && !memchr(s + 1, ']', n - 2);
}

static int expand_item(struct hosts *h, const char *s, size_t n, char *err, size_t errcap)
{
    struct group groups[MAX_GROUPS];
    size_t ng = 0;
    int r = 0;
    struct cli_buf name;
    cli_buf_init(&name, 4096);
    uint64_t idx[MAX_GROUPS] = {0};
    size_t lit_start = 0;
    size_t tail_off, tail_len;

    for (size_t i = 0; i < n; i++) {
        if (s[i] == ']') {
            snprintf(err, errcap, "unbalanced brackets in '%.*s'", (int)n, s);
            r = -EINVAL;
            goto out;
        }
        if (s[i] != '[')
            continue;
        size_t j = i + 1;
        while (j < n && s[j] != ']' && s[j] != '[')
            j++;
        if (j == n) {
            snprintf(err, errcap, "unbalanced brackets in '%.*s'", (int)n, s);
            r = -EINVAL;
            goto out;
        }
        if (s[j] == '[') {
            snprintf(err, errcap, "nested brackets in '%.*s'", (int)n, s);
            r = -EINVAL;
            goto out;
        }
        if (ng == MAX_GROUPS) {
            snprintf(err, errcap, "more than %d bracket groups in '%.*s'", MAX_GROUPS, (int)n, s);
            r = -EINVAL;
            goto out;
        }
        struct group *g = &groups[ng];
        g->lit_off = lit_start;
        g->lit_len = i - lit_start;
        g->r = NULL;
        ng++;
        r = parse_group(s + i + 1, j - i - 1, g, err, errcap);
        if (r < 0)
            goto out;
        lit_start = j + 1;
        i = j;
    }
    tail_off = lit_start;
    tail_len = n - lit_start;

    uint64_t total = 1;
    for (size_t g = 0; g < ng; g++) {
        total *= groups[g].count;
        if (total > HOSTS_MAX) {
            snprintf(err, errcap, "more than %d hosts", HOSTS_MAX);
            r = -EINVAL;
            goto out;
        }
    }
    for (uint64_t k = 0; k < total; k++) {
        name.len = 0;
        name.err = 0;
        for (size_t g = 0; g < ng; g++) {
            uint64_t v = 0;
            int width = 0;
            group_value(&groups[g], idx[g], &v, &width);
            cli_buf_append(&name, s + groups[g].lit_off, groups[g].lit_len);
            cli_buf_printf(&name, "%0*llu", width, (unsigned long long)v);
        }
        cli_buf_append(&name, s + tail_off, tail_len);
        if (name.err) {
            snprintf(err, errcap, "host name too long in '%.*s'", (int)n, s);
            r = -EINVAL;
            goto out;
        }
        r = add_one(h, cli_buf_str(&name), err, errcap);
        if (r < 0)
            goto out;
        /* Odometer: the rightmost group changes fastest (leftmost outermost). */
        for (size_t g = ng; g-- > 0;) {
            if (++idx[g] < groups[g].count)
                break;
            idx[g] = 0;
        }
    }
out:
    for (size_t g = 0; g < ng; g++)
        free(groups[g].r);
    cli_buf_fini(&name);
    return r;
}

int hosts_add_list(struct hosts *h, const char *text, size_t len, char *err, size_t errcap)
{
    size_t start = 0;
    int depth = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && text[i] == '\0') {
            snprintf(err, errcap, "NUL byte in host list");
            return -EINVAL;
        }
        if (i < len && text[i] == '[')
            depth++;
        else if (i < len && text[i] == ']')
            depth--;
        if (i < len && !(text[i] == ',' && depth <= 0))
            continue;
        const char *item = text + start;
        size_t n = i - start;
        start = i + 1;
        depth = 0;
        str_trim_view(&item, &n, TRIM_SET);
        if (n == 0) {
            snprintf(err, errcap, "empty host name");
            return -EINVAL;
        }
        int r;
        if (n >= strlen(HOSTS_UNIX_PREFIX) && memcmp(item, HOSTS_UNIX_PREFIX, 5) == 0) {
            const char *path = item + 5;
            size_t pn = n - 5;
            char tmp[UNIX_PATH_MAX + 6];
            if ((pn > 0 && path[0] != '/') || pn > UNIX_PATH_MAX) {
                snprintf(err, errcap, "'%.*s' must be 'unix:' or 'unix:/absolute/path' "
                         "(at most %d bytes)", (int)n, item, UNIX_PATH_MAX);
                return -EINVAL;
            }
            str_copy(tmp, sizeof(tmp), item, n);
            r = add_one(h, tmp, err, errcap);
        } else if (is_bracketed_ipv6(item, n) || !memchr(item, '[', n)) {
            if (!is_bracketed_ipv6(item, n) && memchr(item, ']', n)) {
                snprintf(err, errcap, "unbalanced brackets in '%.*s'", (int)n, item);
                return -EINVAL;
            }
            char *tmp = strndup(item, n);
            if (!tmp)
                return -ENOMEM;
            r = add_one(h, tmp, err, errcap);
            free(tmp);
        } else {
            r = expand_item(h, item, n, err, errcap);
        }
        if (r < 0)
            return r;
    }
    return 0;
}

int hosts_add_file(struct hosts *h, const char *path, char *err, size_t errcap)
{
    int r = 0;
    char *data = NULL;
    size_t len = 0;
    FILE *f = NULL;
    struct stat st;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; only a regular file is
     * read, so neither a FIFO nor a device can block or feed dyno forever. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        r = fd < 0 ? -errno : 0;
        snprintf(err, errcap, "error: invalid value '%s' for '--hostfile': %s%s", path,
                 r ? "cannot read: " : "not a regular file", r ? strerror(-r) : "");
        if (fd >= 0)
            close(fd);
        return -EINVAL;
    }
    f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        snprintf(err, errcap, "error: invalid value '%s' for '--hostfile': cannot read", path);
        return -EINVAL;
    }
    /* Size the buffer by the file (fuzz_cli_hosts found every hostfile, even one line, cost a
     * 16 MiB allocation). */
    size_t want = HOSTFILE_MAX + 1;
    if (st.st_size >= 0 && (uint64_t)st.st_size < HOSTFILE_MAX)
        want = (size_t)st.st_size + 1;   /* + 1: a file that grew meanwhile is still seen */
    data = malloc(want + 1);
    if (!data) {
        r = -ENOMEM;
        goto out_close;
    }
    len = fread(data, 1, want, f);
    if (ferror(f) || len > HOSTFILE_MAX || (len == want && want <= HOSTFILE_MAX)) {
        snprintf(err, errcap, "error: invalid value '%s' for '--hostfile': %s", path,
                 ferror(f) ? "cannot read" : len > HOSTFILE_MAX ? "larger than 16 MiB" : "changed while reading");
        r = -EINVAL;
        goto out_free;
    }
    size_t lineno = 0;
    for (size_t off = 0; off < len;) {
        char *nl = memchr(data + off, '\n', len - off);
        size_t n = nl ? (size_t)(nl - (data + off)) : len - off;
        const char *line = data + off;
        off += n + 1;
        lineno++;
        const char *hash = memchr(line, '#', n);
        if (hash)
            n = (size_t)(hash - line);
        str_trim_view(&line, &n, TRIM_SET);
        if (n == 0)
            continue;
        char reason[512];
        r = hosts_add_list(h, line, n, reason, sizeof(reason));
        if (r < 0) {
            snprintf(err, errcap, "error: invalid value '%.*s' for '--hostfile' (%s line %zu): %s",
                     (int)n, line, path, lineno, reason);
            goto out_free;
        }
    }
out_free:
    free(data);
out_close:
    fclose(f);
    return r;
}
