/* tb_logger: encodes each event by hand (four protobuf field kinds are all it needs) and
 * appends it with one write(2) per framed record to an O_APPEND file, so nothing is buffered in
 * the daemon and a SIGTERM or crash loses nothing already handed to the sink. */
#include "daemon/sinks/tb_logger.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/strutil.h"
#include "contract/datamsg.h"
#include "contract/kinds.h"
#include "daemon/sinks/crc32c.h"

#define TB_DEV_CAP 64
#define TB_TAG_CAP 512
#define HOST_METRICS_DIR "host_metrics"   /* kernel-monitor records (device NULL) */
#define WARN_MS 60000

struct tb_file {
    char dir[TB_DEV_CAP + 8];     /* "device_<dev>" or HOST_METRICS_DIR */
    int fd;                       /* -1 after a failed open (not retried until restart) */
};

struct tb_step {
    char *key;                    /* "<dir>\n<counter name>" */
    uint64_t next;
};

struct tb_logger {
    char dir[4096];
    bool op_stats;
    struct tb_file files[TB_MAX_FILES];
    size_t nfiles;
    struct tb_step *steps;        /* open addressing, 2 x TB_MAX_STEPS slots */
    size_t nsteps;
    struct tb_counters c;
    bool warned_files, warned_steps;
    struct log_ratelimit rl_write, rl_dev;
};
#define STEP_SLOTS (2 * TB_MAX_STEPS)

/* ---- encoders ---- */

struct enc {
    uint8_t *p;
    size_t n, cap;
    bool over;
};

static void put(struct enc *e, const void *b, size_t n)
{
    if (e->over || e->cap - e->n < n) {
        e->over = true;
        return;
    }
    memcpy(e->p + e->n, b, n);
    e->n += n;
}

static void put_u8(struct enc *e, uint8_t b) { put(e, &b, 1); }

static void put_varint(struct enc *e, uint64_t v)
{
    uint8_t b[10];
    size_t n = 0;
    do {
        b[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            b[n] |= 0x80;
        n++;
    } while (v);
    put(e, b, n);
}

static void put_le(struct enc *e, uint64_t v, size_t n)
{
    uint8_t b[8];
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    put(e, b, n);
}

static void put_double(struct enc *e, double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    put_le(e, u, 8);
}

long tb_encode_version(uint8_t *out, size_t cap, double wall_time)
{
    static const char ver[] = "brain.Event:2";
    struct enc e = { out, 0, cap, false };
    put_u8(&e, 0x09);
    put_double(&e, wall_time);
    put_u8(&e, 0x1a);
    put_varint(&e, sizeof(ver) - 1);
    put(&e, ver, sizeof(ver) - 1);
    return e.over ? -ENOSPC : (long)e.n;
}

long tb_encode_scalar(uint8_t *out, size_t cap, double wall_time, int64_t step, const char *tag,
                      float value)
{
    size_t tl = strlen(tag);
    /* Value = 0x0a len tag 0x15 float; Summary = 0x0a len Value */
    size_t vlen = 1 + (tl < 128 ? 1 : tl < 16384 ? 2 : 3) + tl + 1 + 4;
    size_t slen = 1 + (vlen < 128 ? 1 : vlen < 16384 ? 2 : 3) + vlen;
    struct enc e = { out, 0, cap, false };
    uint32_t fv;
    memcpy(&fv, &value, 4);
    put_u8(&e, 0x09);
    put_double(&e, wall_time);
    put_u8(&e, 0x10);
    put_varint(&e, (uint64_t)step);
    put_u8(&e, 0x2a);
    put_varint(&e, slen);
    put_u8(&e, 0x0a);
    put_varint(&e, vlen);
    put_u8(&e, 0x0a);
    put_varint(&e, tl);
    put(&e, tag, tl);
    put_u8(&e, 0x15);
    put_le(&e, fv, 4);
    return e.over ? -ENOSPC : (long)e.n;
}

long tb_frame(uint8_t *out, size_t cap, const uint8_t *data, size_t n)
{
    uint8_t len[8];
    struct enc e = { out, 0, cap, false };
    for (int i = 0; i < 8; i++)
        len[i] = (uint8_t)((uint64_t)n >> (8 * i));
    put(&e, len, 8);
    put_le(&e, crc32c_masked(len, 8), 4);
    put(&e, data, n);
    put_le(&e, crc32c_masked(data, n), 4);
    return e.over ? -ENOSPC : (long)e.n;
}

/* ---- files and step counters ---- */

static int write_all(int fd, const uint8_t *b, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

/* A record is appended whole or not at all: after a short write (disk full, file size
 * limit) the file is cut back to where it was, so readers never meet a torn record. */
static int append_event(struct tb_logger *t, int fd, const uint8_t *ev, size_t n)
{
    uint8_t rec[TB_RECORD_MAX + 16];
    struct stat st;
    long fl = tb_frame(rec, sizeof(rec), ev, n);
    int rc = fl < 0 ? (int)fl : fstat(fd, &st) != 0 ? -errno : 0;
    if (rc == 0 && (rc = write_all(fd, rec, (size_t)fl)) != 0 && ftruncate(fd, st.st_size) != 0)
        LOG_RL(&t->rl_write, WARN_MS, LOG_LVL_ERROR, "tensorboard: cannot cut a torn record in %s: %s",
               t->dir, strerror(errno));
    if (rc) {
        t->c.dropped++;
        LOG_RL(&t->rl_write, WARN_MS, LOG_LVL_ERROR, "tensorboard: cannot write to %s: %s (%" PRIu64
               " records dropped so far)", t->dir, strerror(-rc), t->c.dropped);
    }
    return rc;
}

/* The file of subdir (created on first use, opened for append; a new file starts with the
 * version event). -1 when it cannot be opened. */
static int file_for(struct tb_logger *t, const char *sub, double wall)
{
    for (size_t i = 0; i < t->nfiles; i++)
        if (strcmp(t->files[i].dir, sub) == 0)
            return t->files[i].fd;
    if (t->nfiles == TB_MAX_FILES) {
        if (!t->warned_files)
            LOG_WARN("tensorboard: more than %d device files; records of new devices are dropped", TB_MAX_FILES);
        t->warned_files = true;
        return -1;
    }
    struct tb_file *f = &t->files[t->nfiles++];
    char path[4096 + 128];
    struct stat st;
    snprintf(f->dir, sizeof(f->dir), "%s", sub);
    f->fd = -1;
    snprintf(path, sizeof(path), "%s/%s", t->dir, sub);
    if (mkdir(path, 0750) != 0 && errno != EEXIST) {
        LOG_ERROR("tensorboard: cannot create %s: %s; its records are dropped", path, strerror(errno));
        return -1;
    }
    snprintf(path, sizeof(path), "%s/%s/tfevents.pb", t->dir, sub);
    /* O_NONBLOCK: a FIFO planted there must not block the loop (open fails with ENXIO, or
     * succeeds with a reader and is then refused like any non-regular file) */
    f->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0640);
    const char *why = NULL;
    if (f->fd < 0 || fstat(f->fd, &st) != 0)
        why = strerror(errno);
    else if (!S_ISREG(st.st_mode))
        why = "not a regular file";
    if (why) {
        LOG_ERROR("tensorboard: cannot open %s: %s; its records are dropped", path, why);
        if (f->fd >= 0)
            close(f->fd);
        f->fd = -1;
        return -1;
    }
    if (st.st_size == 0) {
        uint8_t ev[64];
        long n = tb_encode_version(ev, sizeof(ev), wall);
        if (n < 0 || append_event(t, f->fd, ev, (size_t)n) != 0) {
            close(f->fd);
            f->fd = -1;
            return -1;
        }
    }
    return f->fd;
}

static uint64_t fnv(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* Next step of counter (sub, name): 0, 1, 2, ... per daemon run. -1 when the table is full. */
static int64_t next_step(struct tb_logger *t, const char *sub, const char *name)
{
    char key[TB_DEV_CAP + 8 + TB_TAG_CAP + 2];
    snprintf(key, sizeof(key), "%s\n%s", sub, name);
    size_t i = fnv(key) % STEP_SLOTS;
    while (t->steps[i].key) {
        if (strcmp(t->steps[i].key, key) == 0)
            return (int64_t)t->steps[i].next++;
        i = (i + 1) % STEP_SLOTS;
    }
    if (t->nsteps >= TB_MAX_STEPS || !(t->steps[i].key = strdup(key))) {
        if (!t->warned_steps)
            LOG_WARN("tensorboard: more than %d series; new series are dropped", TB_MAX_STEPS);
        t->warned_steps = true;
        return -1;
    }
    t->nsteps++;
    t->steps[i].next = 1;
    return 0;
}

static int scalar(struct tb_logger *t, const char *sub, const char *counter, const char *tag,
                  double wall, double value)
{
    uint8_t ev[TB_RECORD_MAX];
    int fd = file_for(t, sub, wall);
    if (fd < 0) {
        t->c.dropped++;
        return -EIO;
    }
    int64_t step = next_step(t, sub, counter);
    if (step < 0) {
        t->c.dropped++;
        return -ENOSPC;
    }
    long n = tb_encode_scalar(ev, sizeof(ev), wall, step, tag, (float)value);
    if (n < 0) {
        t->c.dropped++;
        return (int)n;
    }
    int rc = append_event(t, fd, ev, (size_t)n);
    if (rc == 0)
        t->c.events++;
    return rc;
}

/* ---- the sink ---- */

static const struct sink_kv *field(const struct sink_record *r, const char *key)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->kv[i].key, key) == 0)
            return &r->kv[i];
    return NULL;
}

static bool num(const struct sink_kv *kv, double *ret)
{
    if (!kv)
        return false;
    switch (kv->type) {
    case SINK_INT: *ret = (double)kv->i; return true;
    case SINK_UINT: *ret = (double)kv->u; return true;
    case SINK_DOUBLE: *ret = kv->d; return true;
    case SINK_STR: return false;
    }
    return false;
}

/* A string value as a C string in buf; NULL when absent, not a string, or too long. */
static const char *str(const struct sink_kv *kv, char *buf, size_t cap)
{
    if (!kv || kv->type != SINK_STR || kv->slen >= cap)
        return NULL;
    memcpy(buf, kv->s, kv->slen);
    buf[kv->slen] = '\0';
    return buf;
}

/* Device names become directory names: plain characters only, no "." / ".." games. */
static bool safe_device(const char *d)
{
    size_t n = strlen(d);
    if (n == 0 || n >= TB_DEV_CAP || d[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = d[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              c == '-' || c == '.'))
            return false;
    }
    return true;
}

static void write_host_metrics(struct tb_logger *t, const struct sink_record *r, double wall)
{
    for (size_t i = 0; i < r->n; i++) {
        double v;
        if (num(&r->kv[i], &v) && strlen(r->kv[i].key) < TB_TAG_CAP)
            scalar(t, HOST_METRICS_DIR, r->kv[i].key, r->kv[i].key, wall, v);
    }
}

static void write_opstats(struct tb_logger *t, const char *sub, const struct sink_record *r, double wall)
{
    static const struct { const char *field, *suffix; } parts[] = {
        { "total", "total_ns" }, { "count", "count" }, { "avg", "avg_ns" } };
    char act[64], name[256], tag[TB_TAG_CAP];
    if (!str(field(r, "activity"), act, sizeof(act)) || !str(field(r, "name"), name, sizeof(name)))
        return;
    for (size_t i = 0; i < 3; i++) {
        double v;
        if (!num(field(r, parts[i].field), &v))
            continue;
        snprintf(tag, sizeof(tag), "ops/%s/%s/%s", act, name, parts[i].suffix);
        scalar(t, sub, tag, tag, wall, v);
    }
}

/* PluginStats records carry the session counters (data_sink.c): one tag per counter and
 * sending process, "PluginStats/<pid>/<counter>". */
static void write_plugin_stats(struct tb_logger *t, const char *sub, const struct sink_record *r,
                               double wall)
{
    char tag[TB_TAG_CAP];
    for (size_t i = 0; i < r->n; i++) {
        const struct sink_kv *kv = &r->kv[i];
        double v;
        if (!sink_is_stats_counter(kv->key) || !num(kv, &v))
            continue;
        snprintf(tag, sizeof(tag), "PluginStats/%d/%s", (int)r->pid, kv->key);
        scalar(t, sub, tag, tag, wall, v);
    }
}

static int tb_write(void *self, const struct sink_record *r)
{
    struct tb_logger *t = self;
    double wall = (double)r->time_ns / 1e9;
    char kind[32], dom[256], sub[TB_DEV_CAP + 8], tag[TB_TAG_CAP];
    double dur;

    if (!r->device) {
        write_host_metrics(t, r, wall);
        return 0;
    }
    if (!safe_device(r->device)) {
        t->c.dropped++;
        LOG_RL(&t->rl_dev, WARN_MS, LOG_LVL_WARNING, "tensorboard: device name '%.64s' is not usable as a "
               "directory name; its records are dropped", r->device);
        return -EINVAL;
    }
    snprintf(sub, sizeof(sub), "device_%s", r->device);
    if (!str(field(r, "kind"), kind, sizeof(kind)))
        return 0;
    if (strcmp(kind, DATAMSG_OP_STATS) == 0) {
        if (t->op_stats)
            write_opstats(t, sub, r, wall);
        return 0;
    }
    if (strcmp(kind, DATAMSG_PLUGIN_STATS) == 0) {
        write_plugin_stats(t, sub, r, wall);
        return 0;
    }
    if (kinds_from_name(kind, strlen(kind)) < 0 || !num(field(r, "duration"), &dur))
        return 0; /* PluginInfo and other non-activity messages have no scalar */
    /* markers: tag Marker/<domain>, but one "Marker" step counter for all domains */
    if (strcmp(kind, "Marker") == 0 && str(field(r, "domain"), dom, sizeof(dom)))
        snprintf(tag, sizeof(tag), "Marker/%s", dom);
    else
        snprintf(tag, sizeof(tag), "%s", kind);
    return scalar(t, sub, kind, tag, wall, dur);
}

static void tb_flush(void *self)
{
    struct tb_logger *t = self;
    /* every record is already in the kernel; make it durable at shutdown */
    for (size_t i = 0; i < t->nfiles; i++)
        if (t->files[i].fd >= 0)
            (void)fsync(t->files[i].fd);
}

static void tb_destroy(void *self)
{
    struct tb_logger *t = self;
    if (!t)
        return;
    for (size_t i = 0; i < t->nfiles; i++)
        if (t->files[i].fd >= 0)
            close(t->files[i].fd);
    for (size_t i = 0; t->steps && i < STEP_SLOTS; i++)
        free(t->steps[i].key);
    free(t->steps);
    free(t);
}

static const struct sink_ops tb_ops = { "tensorboard", tb_write, tb_flush, tb_destroy };

void tb_logger_counters(const struct sink *s, struct tb_counters *ret)
{
    const struct tb_logger *t = s->self;
    *ret = t->c;
}

static void warn_odd(const char *dir)
{
    static const char odd[] = "\n\f\r\b\t\v\x7f\"'\\%><|&$;`";
    struct stat st;
    if (lstat(dir, &st) == 0 && S_ISLNK(st.st_mode))
        LOG_WARN("tensorboard: --metric_log_dir %s is a symbolic link", dir);
    if (strpbrk(dir, odd))
        LOG_WARN("tensorboard: --metric_log_dir '%s' contains unusual characters", dir);
}

/* mkdir -p with 0750 for each missing component. */
static int mkdirs(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        int rc = mkdir(path, 0750) != 0 && errno != EEXIST ? -errno : 0;
        *p = '/';
        if (rc)
            return rc;
    }
    return mkdir(path, 0750) != 0 && errno != EEXIST ? -errno : 0;
}

int tb_logger_create(const struct tb_cfg *cfg, struct sink *ret, char *err, size_t errcap)
{
    struct tb_logger *t = calloc(1, sizeof(*t));
    char tmp[4096];
    struct stat st;
    int rc;
    if (!t)
        return -ENOMEM;
    t->op_stats = cfg->op_stats;
    if (str_copy(t->dir, sizeof(t->dir), cfg->dir, strlen(cfg->dir)) != 0) {
        rc = -ENAMETOOLONG;
        goto fail;
    }
    warn_odd(t->dir);
    snprintf(tmp, sizeof(tmp), "%s", t->dir);
    if ((rc = mkdirs(tmp)) != 0)
        goto fail;
    if (stat(t->dir, &st) != 0) {
        rc = -errno;
        goto fail;
    }
    if (!S_ISDIR(st.st_mode)) {
        rc = -ENOTDIR;
        goto fail;
    }
    if (access(t->dir, W_OK | X_OK) != 0) {
        rc = -errno;
        goto fail;
    }
    t->steps = calloc(STEP_SLOTS, sizeof(*t->steps));
    if (!t->steps) {
        rc = -ENOMEM;
        goto fail;
    }
    LOG_INFO("Initialized tensorboard logger on = %s", t->dir);
    *ret = (struct sink){ &tb_ops, t };
    return 0;
fail:
    snprintf(err, errcap, "Unable to record logs in the target folder: %s: %s", cfg->dir, strerror(-rc));
    free(t->steps);
    free(t);
    return rc;
}
