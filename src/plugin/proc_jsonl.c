/* proc_jsonl: the JSONL exporter (--export-type Jsonl, 05-outputs.md §4). Completion threads
 * serialise each record into one sorted-key JSON line and push it into a bounded lock-free
 * queue (never blocking; drops are counted); a dedicated writer thread batches lines into
 * rotating files. Marker pairing and the devices-seen set come from markpair. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/jw.h"
#include "common/log.h"
#include "common/strutil.h"
#include "plugin/linering.h"
#include "plugin/markpair.h"
#include "plugin/outfile.h"
#include "plugin/penv.h"
#include "plugin/proc.h"
#include "plugin/proc_jsonl.h"

#define JSONL_LINE_MAX (1024 * 1024) /* longest line we serialise (names are bounded by msPTI) */
#define JSONL_OUTBUF (1024 * 1024)
#define JSONL_MAX_TRACKED 4096       /* files of this session remembered for maxFiles */

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
    const char *v;
    uint32_t u;
    int32_t i;

    ret->max_lines = JSONL_DEFAULT_LINES;
    if ((v = pick(flag_lines, env_lines))) {
        if (str_to_u32(v, &u) < 0) {
            LOG_WARN("jsonl: invalid rotate log lines '%s'; using %u", v, JSONL_DEFAULT_LINES);
        } else if (u < JSONL_MIN_LINES || u > JSONL_MAX_LINES) {
            ret->max_lines = u < JSONL_MIN_LINES ? JSONL_MIN_LINES : JSONL_MAX_LINES;
            LOG_WARN("jsonl: rotate log lines %u out of [%u, %u]; clamped to %u", u, JSONL_MIN_LINES,
                     JSONL_MAX_LINES, ret->max_lines);
        } else {
            ret->max_lines = u;
        }
    }
    ret->max_files = -1;
    if ((v = pick(flag_files, env_files))) {
        if (str_to_i32(v, &i) < 0 || (i != -1 && i < 2))
            LOG_WARN("jsonl: invalid rotate log files '%s' (must be -1 or >= 2); using -1", v);
        else
            ret->max_files = i;
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

struct proc {
    char *log_dir;
    int32_t rank;
    uint64_t session_start_ns;
    struct jsonl_settings set;
    struct linering ring;
    struct markpair *mp;
    /* writer side (writer thread, or the stopping thread after the join) */
    pthread_t writer;
    bool writer_running;
    _Atomic bool stop_req;
    int fd;
    char path[OUTFILE_PATH_MAX + 128];
    uint64_t file_lines;
    char *out;
    size_t outlen;
    uint64_t last_write_ns;
    char *files[JSONL_MAX_TRACKED]; /* this session's files, oldest first (maxFiles > 0) */
    size_t nfiles;
    struct log_ratelimit err_rl;
    bool stopped;
};

/* ---- line formatting (no I/O) ---- */

static void key_u(struct jw *w, const char *k, uint64_t v)
{
    jw_key(w, k);
    jw_uint(w, v);
}
static void key_s(struct jw *w, const char *k, const char *v)
{
    jw_key(w, k);
    jw_str(w, v ? v : "");
}

static void fmt_marker_line(struct jw *w, const struct mp_line *l)
{
    jw_obj_begin(w);
    if (l->source_kind == 0) {
        key_s(w, "domain", l->domain);
        key_u(w, "endNs", l->end);
        key_u(w, "id", l->id);
        key_s(w, "kind", "Marker");
        key_s(w, "name", l->name);
        key_u(w, "processId", l->pid);
        key_s(w, "sourceKind", "Host");
        key_u(w, "startNs", l->start);
        key_u(w, "threadId", l->tid);
    } else {
        key_u(w, "deviceId", l->device_id);
        key_s(w, "domain", l->domain);
        key_u(w, "endNs", l->end);
        key_u(w, "id", l->id);
        key_s(w, "kind", "Marker");
        key_s(w, "name", l->name);
        key_s(w, "sourceKind", "Device");
        key_u(w, "startNs", l->start);
        key_u(w, "streamId", l->stream_id);
    }
    jw_obj_end(w);
}

/* Serialise a non-marker record; false if the kind has no line. */
static bool fmt_record(struct jw *w, const struct mon_record *r)
{
    jw_obj_begin(w);
    if (mon_kind_is_api(r->kind)) {
        const struct mon_api *a = &r->u.api;
        key_u(w, "correlationId", a->correlation_id);
        key_u(w, "endNs", a->end);
        key_s(w, "kind", mon_kind_name(r->kind));
        key_s(w, "name", a->name);
        key_u(w, "processId", a->pid);
        key_u(w, "startNs", a->start);
        key_u(w, "threadId", a->tid);
    } else if (r->kind == MON_KIND_KERNEL) {
        const struct mon_kernel *k = &r->u.kernel;
        key_u(w, "correlationId", k->correlation_id);
        key_u(w, "deviceId", k->device_id);
        key_u(w, "endNs", k->end);
        key_s(w, "kind", "Kernel");
        key_s(w, "name", k->name);
        key_u(w, "startNs", k->start);
        key_u(w, "streamId", k->stream_id);
        key_s(w, "type", k->type);
    } else if (r->kind == MON_KIND_COMMUNICATION) {
        const struct mon_comm *c = &r->u.comm;
        key_s(w, "algType", c->alg_type);
        key_s(w, "commName", c->comm_name);
        key_u(w, "correlationId", c->correlation_id);
        key_u(w, "count", c->count);
        key_s(w, "dataType", mon_comm_dtype_name(c->data_type));
        key_u(w, "deviceId", c->device_id);
        key_u(w, "endNs", c->end);
        key_s(w, "kind", "Communication");
        key_s(w, "name", c->name);
        key_u(w, "startNs", c->start);
        key_u(w, "streamId", c->stream_id);
    } else if (r->kind == MON_KIND_HCCL) {
        const struct mon_hccl *h = &r->u.hccl;
        jw_key(w, "bandWidth");
        jw_double(w, h->bandwidth);
        key_s(w, "commName", h->comm_name);
        key_u(w, "deviceId", h->device_id);
        key_u(w, "endNs", h->end);
        key_s(w, "kind", "Hccl");
        key_s(w, "name", h->name);
        key_u(w, "startNs", h->start);
        key_u(w, "streamId", h->stream_id);
    } else if (r->kind == MON_KIND_MEMORY) {
        const struct mon_memory *m = &r->u.memory;
        key_u(w, "address", m->address);
        key_u(w, "bytes", m->bytes);
        key_u(w, "correlationId", m->correlation_id);
        key_u(w, "deviceId", m->device_id);
        key_u(w, "endNs", m->end);
        key_s(w, "kind", "Memory");
        key_s(w, "memoryKind", m->memory_kind == 1 ? "DEVICE" : "UNKNOWN");
        key_s(w, "operationType", m->op_type == 1 ? "RELEASE" : "ALLOCATION");
        key_u(w, "processId", m->pid);
        key_u(w, "startNs", m->start);
        key_u(w, "streamId", m->stream_id);
    } else if (r->kind == MON_KIND_MEMSET) {
        const struct mon_memset *m = &r->u.memset;
        key_u(w, "bytes", m->bytes);
        key_u(w, "correlationId", m->correlation_id);
        key_u(w, "deviceId", m->device_id);
        key_u(w, "endNs", m->end);
        jw_key(w, "isAsync");
        jw_bool(w, m->is_async != 0);
        key_s(w, "kind", "MemSet");
        key_u(w, "startNs", m->start);
        key_u(w, "streamId", m->stream_id);
        key_u(w, "value", m->value);
    } else if (r->kind == MON_KIND_MEMCPY) {
        const struct mon_memcpy *m = &r->u.memcpy;
        key_u(w, "bytes", m->bytes);
        key_s(w, "copyKind", mon_memcpy_kind_name(m->copy_kind));
        key_u(w, "correlationId", m->correlation_id);
        key_u(w, "deviceId", m->device_id);
        key_u(w, "endNs", m->end);
        jw_key(w, "isAsync");
        jw_bool(w, m->is_async != 0);
        key_s(w, "kind", "MemCpy");
        key_u(w, "startNs", m->start);
        key_u(w, "streamId", m->stream_id);
    } else {
        return false;
    }
    jw_obj_end(w);
    return true;
}

/* Push the writer's text plus '\n' as one heap line; drops are counted by the ring. */
static void push_jw(struct proc *p, const struct jw *w)
{
    if (w->err || w->len == 0)
        return;
    char *line = malloc(w->len + 1);
    if (!line)
        return;
    memcpy(line, w->buf, w->len);
    line[w->len] = '\n';
    if (linering_push(&p->ring, line, w->len + 1) < 0)
        free(line);
}

static void fmt_and_push(struct proc *p, bool (*fmt)(struct jw *, const void *), const void *obj)
{
    char stack[2048];
    struct jw w;
    jw_init(&w, stack, sizeof(stack));
    if (!fmt(&w, obj))
        return;
    if (w.err == -ENOSPC) {
        jw_init_dyn(&w, JSONL_LINE_MAX);
        if (fmt(&w, obj))
            push_jw(p, &w);
        jw_fini(&w);
        return;
    }
    push_jw(p, &w);
}

static bool fmt_record_v(struct jw *w, const void *obj)
{
    return fmt_record(w, obj);
}
static bool fmt_marker_v(struct jw *w, const void *obj)
{
    fmt_marker_line(w, obj);
    return true;
}

static void on_marker_line(void *ctx, const struct mp_line *line)
{
    fmt_and_push(ctx, fmt_marker_v, line);
}

static uint64_t record_end(const struct mon_record *r)
{
    switch (r->kind) {
    case MON_KIND_MARKER: return r->u.marker.timestamp;
    case MON_KIND_KERNEL: return r->u.kernel.end;
    case MON_KIND_HCCL: return r->u.hccl.end;
    case MON_KIND_MEMORY: return r->u.memory.end;
    case MON_KIND_MEMSET: return r->u.memset.end;
    case MON_KIND_MEMCPY: return r->u.memcpy.end;
    case MON_KIND_COMMUNICATION: return r->u.comm.end;
    default: return mon_kind_is_api(r->kind) ? r->u.api.end : 0;
    }
}

static void jsonl_consume(struct proc *p, const struct mon_record *recs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const struct mon_record *r = &recs[i];
        if (record_end(r) < p->session_start_ns)
            continue;
        if (r->kind == MON_KIND_MARKER) {
            markpair_feed(p->mp, &r->u.marker);
            continue;
        }
        if (r->kind == MON_KIND_KERNEL)
            markpair_add_device(p->mp, r->u.kernel.device_id);
        else if (r->kind == MON_KIND_COMMUNICATION)
            markpair_add_device(p->mp, r->u.comm.device_id);
        fmt_and_push(p, fmt_record_v, r);
    }
}

/* ---- writer ---- */

static void out_flush(struct proc *p)
{
    size_t off = 0;
    while (off < p->outlen && p->fd >= 0) {
        ssize_t w = write(p->fd, p->out + off, p->outlen - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int err = w < 0 ? errno : ENOSPC;
            LOG_RL(&p->err_rl, 10000, LOG_LVL_ERROR, "jsonl: write to %s failed: %s; %zu bytes dropped", p->path,
                   strerror(err), p->outlen - off);
            break;
        }
        off += (size_t)w;
    }
    p->outlen = 0;
}

static void file_close(struct proc *p)
{
    if (p->fd < 0)
        return;
    out_flush(p);
    close(p->fd);
    p->fd = -1;
}

/* Our files that still exist and are owned by us; forget the others. */
static size_t prune_tracked(struct proc *p, struct timespec *mtimes)
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
static void rotate_delete(struct proc *p)
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

static int file_open(struct proc *p)
{
    if (p->set.max_files > 0)
        rotate_delete(p);
    int rc = outfile_make_name(p->path, sizeof(p->path), p->log_dir, p->rank, "jsonl");
    if (rc < 0) {
        LOG_RL(&p->err_rl, 10000, LOG_LVL_ERROR, "jsonl: output path in '%s' is too long", p->log_dir);
        return rc;
    }
    p->fd = outfile_create(p->path, 1);
    if (p->fd < 0) {
        rc = p->fd;
        LOG_RL(&p->err_rl, 10000, LOG_LVL_ERROR, "jsonl: cannot create %s: %s", p->path, strerror(-rc));
        return rc;
    }
    p->file_lines = 0;
    if (p->set.max_files > 0 && p->nfiles < JSONL_MAX_TRACKED) {
        char *copy = strdup(p->path);
        if (copy)
            p->files[p->nfiles++] = copy;
    }
    return 0;
}

static void write_line(struct proc *p, const char *line, size_t len)
{
    if (len == 0)
        return;
    if (p->fd >= 0 && p->file_lines >= p->set.max_lines)
        file_close(p);
    if (p->fd < 0 && file_open(p) < 0)
        return;
    if (p->outlen + len > JSONL_OUTBUF)
        out_flush(p);
    if (len > JSONL_OUTBUF) {
        /* A line longer than the buffer goes out on its own (the buffer is empty now). */
        char *saved = p->out;
        p->out = (char *)line;
        p->outlen = len;
        out_flush(p);
        p->out = saved;
    } else {
        memcpy(p->out + p->outlen, line, len);
        p->outlen += len;
    }
    p->file_lines++;
}

static size_t write_queued(struct proc *p, size_t max)
{
    size_t done = 0;
    char *line;
    size_t len;
    while (done < max && linering_pop(&p->ring, &line, &len) == 0) {
        write_line(p, line, len);
        free(line);
        done++;
    }
    return done;
}

static void *writer_main(void *arg)
{
    struct proc *p = arg;
    const struct timespec nap = {0, 1000000};
    uint64_t interval_ns = (uint64_t)p->set.interval_ms * 1000000u;
    p->last_write_ns = clock_mono_ns();
    while (!atomic_load(&p->stop_req)) {
        if (linering_size(&p->ring) > JSONL_BATCH_LINES) {
            write_queued(p, JSONL_BATCH_LINES);
            p->last_write_ns = clock_mono_ns();
        } else if (clock_mono_ns() - p->last_write_ns >= interval_ns) {
            write_queued(p, SIZE_MAX);
            out_flush(p);
            p->last_write_ns = clock_mono_ns();
        } else {
            nanosleep(&nap, NULL);
        }
    }
    return NULL;
}

/* ---- vtable ---- */

static void jsonl_destroy(struct proc *p)
{
    if (!p)
        return;
    if (p->writer_running) {
        atomic_store(&p->stop_req, true);
        pthread_join(p->writer, NULL);
    }
    if (p->fd >= 0)
        file_close(p);
    linering_fini(&p->ring);
    markpair_destroy(p->mp);
    for (size_t i = 0; i < p->nfiles; i++)
        free(p->files[i]);
    free(p->out);
    free(p->log_dir);
    free(p);
}

static int jsonl_create(const struct proc_config *cfg, struct proc **ret)
{
    int rc = -ENOMEM;
    if (!cfg || !cfg->log_dir || !*cfg->log_dir)
        return -EINVAL;
    struct proc *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->fd = -1;
    jsonl_settings_resolve(cfg->jsonl_rotate_lines, cfg->jsonl_rotate_files,
                           penv_get(PENV_JSONL_ROTATE_LOG_LINES), penv_get(PENV_JSONL_ROTATE_LOG_FILES),
                           penv_get(PENV_JSONL_BUFFER_CAPACITY), penv_get(PENV_JSONL_MAX_DUMP_INTERVAL), &p->set);
    p->log_dir = strdup(cfg->log_dir);
    p->out = malloc(JSONL_OUTBUF);
    if (!p->log_dir || !p->out)
        goto fail;
    p->rank = cfg->rank;
    p->session_start_ns = cfg->session_start_ns;
    if ((rc = linering_init(&p->ring, p->set.capacity)) < 0)
        goto fail;
    if ((rc = markpair_create(on_marker_line, p, &p->mp)) < 0)
        goto fail;
    *ret = p;
    return 0;
fail:
    jsonl_destroy(p);
    return rc;
}

/* The writer thread blocks every signal: it lives in the application's process. */
static int jsonl_start(struct proc *p)
{
    sigset_t all, old;
    if (p->writer_running || p->stopped)
        return 0;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&p->writer, NULL, writer_main, p);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        LOG_ERROR("jsonl: cannot start the writer thread: %s", strerror(rc));
        return -rc;
    }
    pthread_setname_np(p->writer, "MsMonitorJsonl");
    p->writer_running = true;
    return 0;
}

static int jsonl_tick(struct proc *p)
{
    (void)p;
    return 0; /* the writer thread paces itself (§4.3) */
}

static void jsonl_set_kinds(struct proc *p, uint32_t mask)
{
    (void)p;
    (void)mask;
}

static void write_session_end(struct proc *p, const char *parallel_group_info)
{
    char stack[4096];
    struct jw w;
    if (parallel_group_info && *parallel_group_info) {
        jw_init_dyn(&w, JSONL_LINE_MAX);
        jw_obj_begin(&w);
        key_s(&w, "kind", "parallel_group_info");
        key_s(&w, "value", parallel_group_info);
        jw_obj_end(&w);
        char *line = w.err ? NULL : malloc(w.len + 1);
        if (line) {
            memcpy(line, w.buf, w.len);
            line[w.len] = '\n';
            write_line(p, line, w.len + 1);
            free(line);
        }
        jw_fini(&w);
    }
    uint32_t devs[256];
    size_t ndev = 0;
    markpair_devices(p->mp, devs, 256, &ndev);
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
        key_s(&w, "kind", "rank_device_map");
        jw_key(&w, "rank");
        jw_int(&w, p->rank);
        jw_obj_end(&w);
        if (!w.err && w.len + 1 < sizeof(stack)) {
            stack[w.len] = '\n';
            write_line(p, stack, w.len + 1);
        }
    }
}

static int jsonl_stop(struct proc *p, const char *parallel_group_info)
{
    if (p->stopped)
        return 0;
    if (p->writer_running) {
        atomic_store(&p->stop_req, true);
        pthread_join(p->writer, NULL);
        p->writer_running = false;
    }
    write_queued(p, SIZE_MAX);
    write_session_end(p, parallel_group_info);
    file_close(p);
    uint64_t dropped = linering_dropped(&p->ring);
    if (dropped > 0)
        LOG_WARN("RingBuffer full %llu times", (unsigned long long)dropped);
    markpair_clear(p->mp);
    p->stopped = true;
    return 0;
}

const struct proc_ops proc_jsonl_ops = {
    .name = "Jsonl",
    .create = jsonl_create,
    .start = jsonl_start,
    .consume = jsonl_consume,
    .tick = jsonl_tick,
    .set_kinds = jsonl_set_kinds,
    .stop = jsonl_stop,
    .destroy = jsonl_destroy,
};
