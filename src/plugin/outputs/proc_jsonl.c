/* proc_jsonl: the JSONL exporter (--export-type Jsonl, docs/design/outputs.md#jsonl). Completion threads
 * format each record into one sorted-key JSON line, appended to a line block of their
 * consume() batch (no allocation per line); whole blocks go through the bounded async writer
 * (asyncw.h) whose capacity counts lines. A full queue makes the completion thread wait for the
 * writer (back-pressure, bounded) before anything is dropped; drops are counted per session.
 * The writer thread gathers blocks into large writev() calls on rotating files. Marker ranges
 * and the devices seen come from the pipeline. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common/jw.h"
#include "common/log.h"
#include "common/strutil.h"
#include "contract/cfgkeys.h"
#include "contract/cfgrules.h"
#include "contract/names.h"
#include "contract/podid.h"
#include "plugin/outputs/asyncw.h"
#include "plugin/outputs/jsonl_fmt.h"
#include "plugin/outputs/outfile.h"
#include "plugin/penv.h"
#include "plugin/pipeline/output.h"
#include "plugin/pipeline/pipeline.h"
#include "plugin/pipeline/filter.h"
#include "plugin/outputs/proc_jsonl.h"

#define JSONL_LINE_MAX (1024 * 1024) /* longest line we serialise (names are bounded by msPTI) */
#define JSONL_OUTBUF (1024 * 1024)  /* pending bytes that trigger a write */
#define JSONL_IOV 64                 /* pending pieces that trigger a write (< IOV_MAX) */
#define JSONL_BLOCK_MAX (64 * 1024)  /* producer block size for large batches */
#define JSONL_MAX_TRACKED 4096       /* files of this session remembered for maxFiles */
#define JSONL_RETRY_NS 1000000000ull /* pause between attempts to create a file after a failure */
#define JSONL_CHECK_NS 1000000000ull /* how often the writer checks its file is still there */
#define JSONL_ESC_SLOTS 1024         /* pre-escaped strings cached per session (power of two) */
#define JSONL_ESC_MAX 4096           /* longest string cached */
#define ESC_BUSY ((uintptr_t)1)       /* a slot being filled */
#define JSONL_SPARE_BLOCKS 64         /* written blocks kept for reuse (4 MiB) */

/* Longest a completion thread waits for room before its lines are dropped (test seam). */
static _Atomic uint64_t g_backpressure_ns = 5000000000ull;

void proc_jsonl_test_set_backpressure_ms(uint32_t ms)
{
    atomic_store(&g_backpressure_ns, (uint64_t)ms * 1000000ull);
}

/* ---- settings ---- */

static const char *pick(const char *flag, const char *env)
{
    if (flag && *flag)
        return flag;
    if (env && *env)
        return env;
    return NULL;
}

void jsonl_settings_resolve(const char *flag_lines, const char *flag_files, const char *env_lines,
                            const char *env_files, const char *env_capacity, const char *env_interval,
                            struct jsonl_settings *ret)
{
    const struct cfgrules_rule *lr = cfgrules_of(CFGKEY_JSONL_ROTATE_LOG_LINES);
    const struct cfgrules_rule *fr = cfgrules_of(CFGKEY_JSONL_ROTATE_LOG_FILES);
    const char *v;
    uint32_t u;
    int64_t i;
    int rc;

    ret->max_lines = JSONL_DEFAULT_LINES;
    if ((v = pick(flag_lines, env_lines))) {
        /* the contract's range (cfgrules.def); the plugin clamps where the CLI refuses */
        rc = cfgrules_int(lr, v, &i);
        if (rc == -EINVAL || (rc == -ERANGE && i > UINT32_MAX)) {
            LOG_WARN("jsonl: invalid rotate log lines '%s'; using %u", v, JSONL_DEFAULT_LINES);
        } else if (rc == -ERANGE) {
            ret->max_lines = (uint32_t)(i < lr->min ? lr->min : lr->max);
            LOG_WARN("jsonl: rotate log lines %u out of [%u, %u]; clamped to %u", (unsigned)i, (unsigned)lr->min,
                     (unsigned)lr->max, ret->max_lines);
        } else {
            ret->max_lines = (uint32_t)i;
        }
    }
    ret->max_files = -1;
    if ((v = pick(flag_files, env_files))) {
        if (cfgrules_int(fr, v, &i) < 0)
            LOG_WARN("jsonl: invalid rotate log files '%s' (must be -1 or >= 2); using -1", v);
        else
            ret->max_files = (int32_t)i;
    }
    ret->capacity = JSONL_DEFAULT_CAPACITY;
    if (env_capacity && *env_capacity) {
        if (str_to_u32(env_capacity, &u) < 0 || u == 0 || (u & (u - 1)) != 0) {
            LOG_WARN("jsonl: MSMONITOR_JSONL_BUFFER_CAPACITY '%s' is not a power of two; using %u", env_capacity,
                     JSONL_DEFAULT_CAPACITY);
        } else if (u < JSONL_MIN_CAPACITY || u > JSONL_MAX_CAPACITY) {
            ret->capacity = u < JSONL_MIN_CAPACITY ? JSONL_MIN_CAPACITY : JSONL_MAX_CAPACITY;
            LOG_WARN("jsonl: MSMONITOR_JSONL_BUFFER_CAPACITY %u out of [%u, %u]; clamped to %u", u,
                     JSONL_MIN_CAPACITY, JSONL_MAX_CAPACITY, ret->capacity);
        } else {
            ret->capacity = u;
        }
    }
    ret->interval_ms = JSONL_DEFAULT_INTERVAL_MS;
    if (env_interval && *env_interval) {
        if (str_to_u32(env_interval, &u) < 0 || u < JSONL_MIN_INTERVAL_MS)
            LOG_WARN("jsonl: MSMONITOR_JSONL_MAX_DUMP_INTERVAL '%s' invalid (minimum %u ms); using %u",
                     env_interval, JSONL_MIN_INTERVAL_MS, JSONL_DEFAULT_INTERVAL_MS);
        else
            ret->interval_ms = u;
    }
}

/* ---- processor state ---- */

/* A block of whole lines: text[0..len) holds nlines lines, each ending with '\n'; queued as
 * one asyncw item whose weight is its line count. */
struct lineblock {
    struct asyncw_item q;
    size_t len;
    size_t cap; /* bytes allocated for text */
    size_t nlines;
    char text[];
};

/* An empty block with room for cap bytes. Caller owns; free with free(). NULL on ENOMEM. */
static struct lineblock *lineblock_create(size_t cap)
{
    struct lineblock *b = malloc(sizeof(*b) + cap);
    if (b) {
        b->len = 0;
        b->cap = cap;
        b->nlines = 0;
    }
    return b;
}

/* A backend string (stable address for the process, record.h) and its JSON-escaped copy.
 * Filled once by the first completion thread that claims the slot, read-only afterwards. */
struct esc_slot {
    _Atomic uintptr_t src; /* 0 free, ESC_BUSY being filled, else the backend's pointer */
    char *esc;
    size_t len;
};

struct output {
    struct outfile_sess s;
    struct jsonl_settings set;
    struct asyncw *aw;
    /* writer side (the asyncw writer thread, or the stopping thread after it ended) */
    int fd;
    char path[OUTFILE_PATH_MAX + 128];
    dev_t fdev;                   /* identity of the open file, to notice its removal */
    ino_t fino;
    uint64_t next_check_ns;       /* monotonic time of the next removal check */
    uint64_t next_open_ns;        /* no file creation attempt before this (after a failure) */
    uint64_t lost_lines;          /* lines dropped because no file could be created */
    uint64_t file_lines;
    struct iovec iov[JSONL_IOV];   /* text not yet written, in order */
    size_t iov_nl[JSONL_IOV];      /* lines of each piece */
    int niov;
    size_t iov_bytes;
    struct lineblock *hold[JSONL_IOV]; /* blocks whose text the iovecs may point into */
    int nhold;
    char *files[JSONL_MAX_TRACKED]; /* this session's files, oldest first (maxFiles > 0) */
    size_t nfiles;
    struct log_ratelimit err_rl;
    bool stopped;
    struct esc_slot esc[JSONL_ESC_SLOTS];
    /* written JSONL_BLOCK_MAX blocks, for the producers */
    struct asyncw_spare *spare;
};

static struct lineblock *block_get(struct output *p, size_t cap)
{
    struct lineblock *b = cap == JSONL_BLOCK_MAX ? asyncw_spare_get(p->spare) : NULL;
    if (b) {
        b->len = 0;
        b->nlines = 0;
        return b;
    }
    return lineblock_create(cap);
}

static void block_put(struct output *p, struct lineblock *b)
{
    if (b && b->cap == JSONL_BLOCK_MAX)
        asyncw_spare_put(p->spare, b);
    else
        free(b);
}

/* ---- producer side: line blocks ---- */

/* The block a consume() call is filling; queued when full and at the end of the call. */
struct lbuild {
    struct output *p;
    struct lineblock *b;
    size_t block_cap; /* size of the blocks this call allocates */
};

static void lb_init(struct lbuild *lb, struct output *p, size_t nrec)
{
    size_t cap = nrec * 256 + 1024;
    lb->p = p;
    lb->b = NULL;
    lb->block_cap = cap < JSONL_BLOCK_MAX ? cap : JSONL_BLOCK_MAX;
}

/* Queue the current block; a refused block (queue full after back-pressure, drops counted)
 * is kept for reuse. A mostly empty block (small consume() batches) is shrunk first, so a
 * full queue holds about the bytes of its lines, not of their worst-case bounds. */
static void lb_flush(struct lbuild *lb)
{
    if (!lb->b || lb->b->nlines == 0)
        return;
    if (lb->b->len < lb->b->cap / 2) {
        struct lineblock *small = realloc(lb->b, sizeof(*small) + lb->b->len);
        if (small) {
            small->cap = small->len;
            lb->b = small;
        }
    }
    lb->b->q.weight = lb->b->nlines;
    if (asyncw_push(lb->p->aw, &lb->b->q, NULL) == 0) {
        lb->b = NULL;
    } else {
        lb->b->len = 0;
        lb->b->nlines = 0;
    }
}

static void lb_finish(struct lbuild *lb)
{
    lb_flush(lb);
    block_put(lb->p, lb->b);
    lb->b = NULL;
}

/* Room for `need` more bytes (a line bound plus its '\n'); NULL on ENOMEM (line dropped). */
static char *lb_room(struct lbuild *lb, size_t need)
{
    if (lb->b && lb->b->cap - lb->b->len >= need)
        return lb->b->text + lb->b->len;
    lb_flush(lb);
    if (lb->b && lb->b->cap < need) {
        free(lb->b);
        lb->b = NULL;
    }
    if (!lb->b && !(lb->b = block_get(lb->p, need > lb->block_cap ? need : lb->block_cap)))
        return NULL;
    return lb->b->text;
}

/* Close the line that ends at `end` (exclusive) inside the current block. Lines longer than
 * JSONL_LINE_MAX are not written (as the jw-based writer refused them). */
static void lb_commit(struct lbuild *lb, char *end)
{
    char *start = lb->b->text + lb->b->len;
    if ((size_t)(end - start) >= JSONL_LINE_MAX)
        return;
    *end++ = '\n';
    lb->b->len = (size_t)(end - lb->b->text);
    lb->b->nlines++;
}

static void emit_marker(struct lbuild *lb, const struct pl_range *line)
{
    size_t nlen = jsonl_fmt_slen(line->name), dlen = jsonl_fmt_slen(line->domain);
    if (nlen + dlen >= JSONL_LINE_MAX)
        return;
    char *o = lb_room(lb, jsonl_fmt_bound(nlen + dlen) + 1);
    if (o)
        lb_commit(lb, jsonl_fmt_marker(o, line, nlen, dlen));
}

/* The escaped copy of s (not NULL) from the session's cache, keyed by the pointer: a hit
 * never measures s. False when s is not cached and cannot be (its slot is taken, too long,
 * out of memory): *ret_len is then strlen(s) and the caller escapes it while formatting, as
 * for any string. */
static bool esc_lookup(struct output *p, const char *s, const char **ret, size_t *ret_len)
{
    struct esc_slot *sl = &p->esc[((uintptr_t)s >> 3) * 0x9E3779B97F4A7C15ull >> 54 & (JSONL_ESC_SLOTS - 1)];
    uintptr_t v = atomic_load_explicit(&sl->src, memory_order_acquire), expect = 0;
    size_t n;

    if (v == (uintptr_t)s) {
        *ret = sl->esc;
        *ret_len = sl->len;
        return true;
    }
    *ret_len = n = strlen(s);
    if (v != 0 || n == 0 || n > JSONL_ESC_MAX ||
        !atomic_compare_exchange_strong_explicit(&sl->src, &expect, ESC_BUSY, memory_order_acquire,
                                                 memory_order_relaxed))
        return false;
    char *e = malloc(n * 6);
    if (!e) {
        atomic_store_explicit(&sl->src, 0, memory_order_release);
        return false;
    }
    sl->len = jsonl_fmt_escape(e, s, n);
    sl->esc = e;
    atomic_store_explicit(&sl->src, (uintptr_t)s, memory_order_release); /* publishes esc, len */
    *ret = e;
    *ret_len = sl->len;
    return true;
}

static void emit_record(struct lbuild *lb, const struct mon_record *r)
{
    struct jsonl_strs st;
    size_t k = jsonl_fmt_string_ptrs(r, st.s);
    /* Names repeat on almost every record: escape each once per session, not once per line,
     * and find it by its pointer without measuring it. */
    st.total = 0;
    for (size_t i = 0; i < k; i++) {
        st.n[i] = 0;
        st.escaped[i] = st.s[i] && esc_lookup(lb->p, st.s[i], &st.s[i], &st.n[i]);
        st.total += st.n[i];
    }
    if (st.total >= JSONL_LINE_MAX)
        return;
    char *o = lb_room(lb, jsonl_fmt_bound(st.total) + 1);
    char *end = o ? jsonl_fmt_record(o, r, &st) : NULL;
    if (end)
        lb_commit(lb, end);
}

/* Records and the marker parts they completed, in arrival order, into line blocks. */
static void jsonl_consume(struct output *p, const struct pl_batch *b)
{
    struct lbuild lb;
    size_t j = 0;
    lb_init(&lb, p, b->nrecs);
    for (size_t i = 0; i < b->nrecs; i++) {
        if (b->recs[i].kind != MON_KIND_MARKER)
            emit_record(&lb, &b->recs[i]);
        for (; j < b->nranges && b->ranges[j].at == i; j++)
            emit_marker(&lb, &b->ranges[j]);
    }
    lb_finish(&lb);
}

/* ---- writer ---- */

/* Write the pending pieces in order, then release the blocks they pointed into. */
static void out_flush(struct output *p)
{
    struct iovec *v = p->iov;
    int n = p->niov;
    uint64_t lines = 0, whole = 0; /* bytes of the pieces written completely */
    /* where this flush starts: a failed write is cut back to the end of the last whole piece
     * (pieces end on a line end), so a full disk leaves only whole lines (docs/outputs.md) */
    off_t start = p->fd >= 0 && n > 0 ? lseek(p->fd, 0, SEEK_CUR) : -1;
    while (n > 0 && p->fd >= 0) {
        ssize_t w = writev(p->fd, v, n > JSONL_IOV ? JSONL_IOV : n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int err = w < 0 ? errno : ENOSPC;
            bool cut = start >= 0 && ftruncate(p->fd, start + (off_t)whole) == 0 &&
                       lseek(p->fd, start + (off_t)whole, SEEK_SET) >= 0;
            LOG_RL(&p->err_rl, 10000, LOG_LVL_ERROR, "jsonl: write to %s failed: %s; %zu bytes dropped%s",
                   p->path, strerror(err), p->iov_bytes - (size_t)whole,
                   cut ? " (file cut back to its last whole line)" : "");
            break;
        }
        while (n > 0 && (size_t)w >= v->iov_len) {
            w -= (ssize_t)v->iov_len;
            whole += v->iov_len;
            lines += p->iov_nl[v - p->iov];
            v++;
            n--;
        }
        if (n > 0) {
            v->iov_base = (char *)v->iov_base + w;
            v->iov_len -= (size_t)w;
        }
    }
    if (p->s.ctr) {
        uint64_t lost = 0; /* pieces not (completely) written */
        for (int i = (int)(v - p->iov); i < p->niov; i++)
            lost += p->iov_nl[i];
        atomic_fetch_add_explicit(&p->s.ctr->written, lines, memory_order_relaxed);
        atomic_fetch_add_explicit(&p->s.ctr->bytes_written, whole, memory_order_relaxed);
        atomic_fetch_add_explicit(&p->s.ctr->dropped_write, lost, memory_order_relaxed);
    }
    p->niov = 0;
    p->iov_bytes = 0;
    for (int i = 0; i < p->nhold; i++)
        block_put(p, p->hold[i]);
    p->nhold = 0;
}

static void out_add(struct output *p, const char *text, size_t len, size_t nlines)
{
    if (p->niov == JSONL_IOV)
        out_flush(p);
    p->iov_nl[p->niov] = nlines;
    p->iov[p->niov++] = (struct iovec){(void *)text, len};
    p->iov_bytes += len;
}

static void file_close(struct output *p)
{
    if (p->fd < 0)
        return;
    out_flush(p);
    close(p->fd);
    p->fd = -1;
}

/* Our files that still exist and are owned by us; forget the others. */
static size_t prune_tracked(struct output *p, struct timespec *mtimes)
{
    size_t k = 0;
    for (size_t i = 0; i < p->nfiles; i++) {
        struct stat st;
        if (lstat(p->files[i], &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid()) {
            mtimes[k] = st.st_mtim;
            p->files[k++] = p->files[i];
        } else {
            free(p->files[i]);
        }
    }
    p->nfiles = k;
    return k;
}

/* Delete the oldest files (by mtime) until opening one more leaves exactly maxFiles. */
static void rotate_delete(struct output *p)
{
    struct timespec *mtimes = malloc(sizeof(*mtimes) * (p->nfiles ? p->nfiles : 1));
    if (!mtimes)
        return;
    size_t n = prune_tracked(p, mtimes);
    while (n > 0 && n >= (size_t)p->set.max_files) {
        size_t old = 0;
        for (size_t i = 1; i < n; i++) {
            if (mtimes[i].tv_sec < mtimes[old].tv_sec ||
                (mtimes[i].tv_sec == mtimes[old].tv_sec && mtimes[i].tv_nsec < mtimes[old].tv_nsec))
                old = i;
        }
        if (unlink(p->files[old]) != 0)
            LOG_WARN("jsonl: cannot delete old file %s: %s", p->files[old], strerror(errno));
        free(p->files[old]);
        memmove(&p->files[old], &p->files[old + 1], (n - old - 1) * sizeof(p->files[0]));
        memmove(&mtimes[old], &mtimes[old + 1], (n - old - 1) * sizeof(mtimes[0]));
        n--;
        p->nfiles = n;
    }
    free(mtimes);
}

/* Open the next file. After a failure (directory removed, read-only, full) the next attempt
 * waits JSONL_RETRY_NS: a failed attempt per block would spin on the file system and push the
 * forced-unique name stamps (outfile_make_name) far into the future. */
static int file_open(struct output *p)
{
    uint64_t now = clock_mono_ns();
    if (now < p->next_open_ns)
        return -EAGAIN;
    if (p->set.max_files > 0)
        rotate_delete(p);
    int rc = outfile_make_name(p->path, sizeof(p->path), p->s.log_dir, p->s.rank, NAMES_EXT_JSONL);
    if (rc < 0) {
        p->next_open_ns = now + JSONL_RETRY_NS;
        LOG_RL(&p->err_rl, 10000, LOG_LVL_ERROR, "jsonl: output path in '%s' is too long", p->s.log_dir);
        return rc;
    }
    p->fd = outfile_create(p->path, 1);
    struct stat st;
    if (p->fd >= 0 && fstat(p->fd, &st) != 0) {
        close(p->fd);
        p->fd = -errno;
    }
    if (p->fd < 0) {
        rc = p->fd;
        p->fd = -1;
        p->next_open_ns = now + JSONL_RETRY_NS;
        LOG_RL(&p->err_rl, 10000, LOG_LVL_ERROR,
               "jsonl: cannot create %s: %s; lines are dropped until a file can be created", p->path,
               strerror(-rc));
        return rc;
    }
    p->fdev = st.st_dev;
    p->fino = st.st_ino;
    p->next_check_ns = now + JSONL_CHECK_NS;
    p->next_open_ns = 0;
    p->file_lines = 0;
    if (p->set.max_files > 0 && p->nfiles < JSONL_MAX_TRACKED) {
        char *copy = strdup(p->path);
        if (copy)
            p->files[p->nfiles++] = copy;
    }
    return 0;
}

/* The open file was removed (its directory deleted, or the file itself) or replaced: what is
 * written to it is lost, so log it and continue in a new file. Checked at most once per
 * JSONL_CHECK_NS by the writer, and always when force is set (stop). */
static void check_file(struct output *p, bool force)
{
    struct stat st;
    if (p->fd < 0)
        return;
    uint64_t now = clock_mono_ns();
    if (!force && now < p->next_check_ns)
        return;
    p->next_check_ns = now + JSONL_CHECK_NS;
    if (stat(p->path, &st) == 0 && st.st_dev == p->fdev && st.st_ino == p->fino)
        return;
    LOG_ERROR("jsonl: %s was removed or replaced; lines written to it since are lost, continuing in a new file",
              p->path);
    file_close(p);
}

/* Byte length of the first k lines of text (k <= the lines it holds). */
static size_t lines_prefix(const char *text, size_t len, size_t k)
{
    const char *s = text, *end = text + len;
    for (size_t i = 0; i < k; i++)
        s = (const char *)memchr(s, '\n', (size_t)(end - s)) + 1;
    return (size_t)(s - text);
}

/* Append a block's lines to the output files, rotating after maxLines lines; takes
 * ownership of b. Lines that find no open file are dropped (the failure is logged). */
static void write_block(struct output *p, struct lineblock *b)
{
    const char *s = b->text;
    size_t len = b->len, nl = b->nlines;
    while (nl > 0) {
        if (p->fd >= 0 && p->file_lines >= p->set.max_lines)
            file_close(p);
        if (p->fd < 0 && file_open(p) < 0) {
            p->lost_lines += nl;
            if (p->s.ctr)
                atomic_fetch_add_explicit(&p->s.ctr->dropped_write, nl, memory_order_relaxed);
            break;
        }
        size_t take = nl, bytes = len;
        if (nl > p->set.max_lines - p->file_lines) {
            take = p->set.max_lines - p->file_lines;
            bytes = lines_prefix(s, len, take);
        }
        out_add(p, s, bytes, take);
        p->file_lines += take;
        s += bytes;
        len -= bytes;
        nl -= take;
    }
    if (p->nhold == JSONL_IOV)
        out_flush(p);
    p->hold[p->nhold++] = b;
    if (p->iov_bytes >= JSONL_OUTBUF)
        out_flush(p);
}

/* ---- asyncw callbacks (the writer thread; the stopping thread once it ended) ---- */

static void aw_write(void *ctx, struct asyncw_item *it)
{
    struct output *p = ctx;
    if (p->niov == 0) /* once per writev() group: reading the clock per block is measurable */
        check_file(p, false);
    write_block(p, (struct lineblock *)it);
}

static void aw_sync(void *ctx)
{
    out_flush(ctx);
}

/* Keep the first k lines: the part of a block that fits a full queue. */
static void aw_cut(void *ctx, struct asyncw_item *it, size_t k)
{
    struct lineblock *b = (struct lineblock *)it;
    (void)ctx;
    b->len = lines_prefix(b->text, b->len, k);
    b->nlines = k;
}

static const struct asyncw_ops jsonl_aw_ops = {.write = aw_write, .sync = aw_sync, .cut = aw_cut};

/* ---- vtable ---- */

static void jsonl_destroy(struct output *p)
{
    if (!p)
        return;
    asyncw_destroy(p->aw); /* joins the writer; queued blocks are freed unwritten */
    if (p->fd >= 0)
        file_close(p);
    out_flush(p); /* releases held blocks when no file is open */
    for (size_t i = 0; i < JSONL_ESC_SLOTS; i++)
        if (atomic_load(&p->esc[i].src) > ESC_BUSY)
            free(p->esc[i].esc);
    asyncw_spare_destroy(p->spare);
    for (size_t i = 0; i < p->nfiles; i++)
        free(p->files[i]);
    outfile_sess_fini(&p->s);
    free(p);
}

static int jsonl_create(const struct output_config *cfg, struct output **ret)
{
    int rc;
    if (!cfg)
        return -EINVAL;
    struct output *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->fd = -1;
    if ((rc = outfile_sess_init(&p->s, cfg)) < 0) /* before the settings: no warnings for a refused config */
        goto fail;
    jsonl_settings_resolve(cfg->jsonl_rotate_lines, cfg->jsonl_rotate_files,
                           penv_get(PENV_JSONL_ROTATE_LOG_LINES), penv_get(PENV_JSONL_ROTATE_LOG_FILES),
                           penv_get(PENV_JSONL_BUFFER_CAPACITY), penv_get(PENV_JSONL_MAX_DUMP_INTERVAL), &p->set);
    /* capacity - 1 lines: the ring buffer semantics users know from upstream */
    struct asyncw_cfg ac = {
        .name = "MsMonitorJsonl",
        .what = "jsonl",
        .capacity = p->set.capacity - 1,
        /* lines reach the file in writev()s of up to 1 MiB anyway: waking the writer for
         * every block (one consume() batch, 256 lines) would only cost context switches */
        .batch = JSONL_BATCH_LINES,
        .interval_ns = (uint64_t)p->set.interval_ms * 1000000u,
        .backpressure_ns = atomic_load(&g_backpressure_ns),
        .cpu_ns = p->s.ctr ? &p->s.ctr->cpu_ns : NULL,
        .ops = &jsonl_aw_ops,
        .ctx = p,
    };
    if ((rc = asyncw_create(&ac, &p->aw)) < 0 || (rc = asyncw_spare_create(JSONL_SPARE_BLOCKS, &p->spare)) < 0)
        goto fail;
    *ret = p;
    return 0;
fail:
    jsonl_destroy(p);
    return rc;
}

static int jsonl_start(struct output *p)
{
    return p->stopped ? 0 : asyncw_start(p->aw);
}

static int jsonl_tick(struct output *p)
{
    (void)p;
    return 0; /* the writer thread paces itself (docs/design/outputs.md#jsonl) */
}

static void jsonl_set_kinds(struct output *p, uint32_t mask)
{
    (void)p;
    (void)mask;
}

/* One line (text without '\n') as a block through the normal write path. */
static void write_text_line(struct output *p, const char *text, size_t len)
{
    struct lineblock *b = lineblock_create(len + 1);
    if (!b)
        return;
    memcpy(b->text, text, len);
    b->text[len] = '\n';
    b->len = len + 1;
    b->nlines = 1;
    write_block(p, b);
}

static void write_session_end(struct output *p, const char *parallel_group_info)
{
    char stack[4096];
    struct jw w;
    if (parallel_group_info && *parallel_group_info) {
        jw_init_dyn(&w, JSONL_LINE_MAX);
        jw_obj_begin(&w);
        jw_key(&w, "kind");
        jw_str(&w, NAMES_META_PARALLEL);
        jw_key(&w, "value");
        jw_str(&w, parallel_group_info);
        jw_obj_end(&w);
        if (!w.err)
            write_text_line(p, w.buf, w.len);
        jw_fini(&w);
    }
    if (p->s.pl) { /* the filter and the counters at stop (docs/outputs.md#session-end) */
        char filt[FILTER_MAX_TEXT + 1];
        struct pipeline_stats ps;
        pipeline_filter_text(p->s.pl, filt, sizeof(filt));
        pipeline_stats(p->s.pl, &ps);
        jw_init_dyn(&w, JSONL_LINE_MAX); /* the filter's 1024 bytes may escape to 6x that */
        jw_obj_begin(&w);
        jw_key(&w, "filter");
        jw_str(&w, filt);
        jw_key(&w, "kind");
        jw_str(&w, NAMES_META_STATS);
        jw_key(&w, "stats");
        pipeline_stats_obj(&w, &ps);
        jw_obj_end(&w);
        if (!w.err)
            write_text_line(p, w.buf, w.len);
        jw_fini(&w);
    }
    { /* the pod the rank ran in (docs/outputs.md#session-end) */
        char line[PODID_JSON_CAP + 32];
        size_t n = outfile_pod_line(line, sizeof(line));
        if (n > 0)
            write_text_line(p, line, n);
    }
    uint32_t devs[256];
    size_t ndev = 0;
    if (p->s.pl)
        pipeline_devices(p->s.pl, devs, 256, &ndev);
    if (ndev > 256)
        ndev = 256;
    if (ndev > 0) {
        jw_init(&w, stack, sizeof(stack));
        jw_obj_begin(&w);
        jw_key(&w, "device");
        jw_arr_begin(&w);
        for (size_t i = 0; i < ndev; i++)
            jw_uint(&w, devs[i]);
        jw_arr_end(&w);
        jw_key(&w, "kind");
        jw_str(&w, NAMES_META_RANK_DEVICE_MAP);
        jw_key(&w, "rank");
        jw_int(&w, p->s.rank);
        jw_obj_end(&w);
        if (!w.err)
            write_text_line(p, w.buf, w.len);
    }
}

static int jsonl_stop(struct output *p, const char *parallel_group_info)
{
    if (p->stopped)
        return 0;
    asyncw_stop(p->aw);
    check_file(p, true);
    p->next_open_ns = 0; /* the final lines get one more attempt */
    asyncw_drain(p->aw);
    uint64_t dropped = asyncw_dropped(p->aw); /* counted before the session end records it */
    if (dropped > 0)
        LOG_WARN("RingBuffer full %llu times", (unsigned long long)dropped);
    if (p->s.ctr)
        atomic_fetch_add_explicit(&p->s.ctr->dropped_queue, dropped, memory_order_relaxed);
    write_session_end(p, parallel_group_info);
    file_close(p);
    if (p->lost_lines > 0)
        LOG_ERROR("jsonl: %llu lines lost because no file could be created in %s",
                  (unsigned long long)p->lost_lines, p->s.log_dir);
    p->stopped = true;
    return 0;
}

const struct output_ops proc_jsonl_ops = {
    .name = "Jsonl",
    .create = jsonl_create,
    .start = jsonl_start,
    .consume = jsonl_consume,
    .tick = jsonl_tick,
    .set_kinds = jsonl_set_kinds,
    .stop = jsonl_stop,
    .destroy = jsonl_destroy,
    .prepare_dir = outfile_prepare_dir,
};
