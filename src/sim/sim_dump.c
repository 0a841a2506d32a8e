/* sim_dump: formats records with common/jw (keys written in byte-wise sorted order) into a
 * 1 MiB line buffer that is written with O_APPEND, so several processes may share a file. */
#include "sim/sim_dump.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/jw.h"
#include "contract/kinds.h"
#include "msmon/mspti.h"
#include "sim/sim_env.h"

#define DUMP_BUF (1u << 20)

_Atomic bool sim_dump_on;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_fd = -1;          /* guarded by g_lock */
static char *g_buf;
static size_t g_len;

static void flush_locked(void)
{
    size_t off = 0;
    while (g_fd >= 0 && off < g_len) {
        ssize_t n = write(g_fd, g_buf + off, g_len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    g_len = 0;
}

void sim_dump_open(const char *path)
{
    pthread_mutex_lock(&g_lock);
    flush_locked();
    if (g_fd >= 0)
        close(g_fd);
    g_fd = -1;
    atomic_store(&sim_dump_on, false);
    if (!path || !*path)
        goto out;
    if (!g_buf && !(g_buf = malloc(DUMP_BUF)))
        goto out;
    g_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (g_fd < 0) {
        sim_log(SIM_ERROR, "cannot open MSSIM_DUMP=\"%s\": %s", path, strerror(errno));
        goto out;
    }
    atomic_store(&sim_dump_on, true);
out:
    pthread_mutex_unlock(&g_lock);
}

void sim_dump_flush(void)
{
    pthread_mutex_lock(&g_lock);
    flush_locked();
    pthread_mutex_unlock(&g_lock);
}

static uint64_t rd64(const uint8_t *p, size_t off)
{
    uint64_t v;
    memcpy(&v, p + off, 8);
    return v;
}
static uint32_t rd32(const uint8_t *p, size_t off)
{
    uint32_t v;
    memcpy(&v, p + off, 4);
    return v;
}
static const char *rdstr(const uint8_t *p, size_t off)
{
    const char *s;
    memcpy(&s, p + off, sizeof(s));
    return s;
}

static void ku(struct jw *w, const char *k, uint64_t v) { jw_key(w, k); jw_uint(w, v); }
static void ki(struct jw *w, const char *k, int64_t v) { jw_key(w, k); jw_int(w, v); }
static void ks(struct jw *w, const char *k, const char *v) { jw_key(w, k); jw_str(w, v); }

static const char *kind_name(int32_t kind)
{
    const char *n = kinds_name(kind);

    return n ? n : kind == KINDS_EXTERNAL_CORRELATION ? "ExternalCorrelation" : "Unknown";
}

/* Minimum record size per kind; shorter raw records are dumped as "Unknown". */
static size_t kind_size(int32_t kind)
{
    static const size_t sizes[] = {0, 56, 56, 48, 56, 64, 56, 56, 24, 72, 48, 48, 48};
    return kind >= 1 && kind <= 12 ? sizes[kind] : SIZE_MAX;
}

long sim_dump_format(const void *rec, size_t size, char *buf, size_t cap)
{
    const uint8_t *p = rec;
    struct jw w;
    int32_t kind = (int32_t)rd32(p, 0);
    jw_init(&w, buf, cap);
    jw_obj_begin(&w);
    if (size < kind_size(kind)) {
        ks(&w, "kind", "Unknown");
        goto done;
    }
    switch (kind) {
    case MSPTI_ACTIVITY_KIND_MARKER: {
        bool dev = (int32_t)rd32(p, 8) == MSPTI_ACTIVITY_SOURCE_KIND_DEVICE;
        if (dev)
            ku(&w, "deviceId", rd32(p, 28));
        ks(&w, "domain", rdstr(p, 44));
        ki(&w, "flag", (int32_t)rd32(p, 4));
        ku(&w, "id", rd64(p, 20));
        ks(&w, "kind", "Marker");
        ks(&w, "name", rdstr(p, 36));
        if (!dev)
            ku(&w, "processId", rd32(p, 28));
        ki(&w, "sourceKind", (int32_t)rd32(p, 8));
        if (dev)
            ku(&w, "streamId", rd32(p, 32));
        if (!dev)
            ku(&w, "threadId", rd32(p, 32));
        ku(&w, "timestamp", rd64(p, 12));
        break;
    }
    case MSPTI_ACTIVITY_KIND_API:
    case MSPTI_ACTIVITY_KIND_ACL_API:
    case MSPTI_ACTIVITY_KIND_NODE_API:
    case MSPTI_ACTIVITY_KIND_RUNTIME_API:
        ku(&w, "correlationId", rd64(p, 28));
        ku(&w, "end", rd64(p, 12));
        ks(&w, "kind", kind_name(kind));
        ks(&w, "name", rdstr(p, 36));
        ku(&w, "processId", rd32(p, 20));
        ku(&w, "start", rd64(p, 4));
        ku(&w, "threadId", rd32(p, 24));
        break;
    case MSPTI_ACTIVITY_KIND_KERNEL:
        ku(&w, "correlationId", rd64(p, 28));
        ku(&w, "deviceId", rd32(p, 20));
        ku(&w, "end", rd64(p, 12));
        ks(&w, "kind", "Kernel");
        ks(&w, "name", rdstr(p, 44));
        ku(&w, "start", rd64(p, 4));
        ku(&w, "streamId", rd32(p, 24));
        ks(&w, "type", rdstr(p, 36));
        break;
    case MSPTI_ACTIVITY_KIND_HCCL: {
        double bw;
        memcpy(&bw, p + 28, 8);
        jw_key(&w, "bandWidth");
        jw_double(&w, bw);
        ks(&w, "commName", rdstr(p, 44));
        ku(&w, "deviceId", rd32(p, 20));
        ku(&w, "end", rd64(p, 12));
        ks(&w, "kind", "Hccl");
        ks(&w, "name", rdstr(p, 36));
        ku(&w, "start", rd64(p, 4));
        ku(&w, "streamId", rd32(p, 24));
        break;
    }
    case MSPTI_ACTIVITY_KIND_MEMORY:
        ku(&w, "address", rd64(p, 36));
        ku(&w, "bytes", rd64(p, 44));
        ku(&w, "correlationId", rd64(p, 12));
        ku(&w, "deviceId", rd32(p, 56));
        ku(&w, "end", rd64(p, 28));
        ks(&w, "kind", "Memory");
        ki(&w, "memoryKind", (int32_t)rd32(p, 8));
        ki(&w, "memoryOperationType", (int32_t)rd32(p, 4));
        ku(&w, "processId", rd32(p, 52));
        ku(&w, "start", rd64(p, 20));
        ku(&w, "streamId", rd32(p, 60));
        break;
    case MSPTI_ACTIVITY_KIND_MEMSET:
    case MSPTI_ACTIVITY_KIND_MEMCPY:
        ku(&w, "bytes", rd64(p, 8));
        if (kind == MSPTI_ACTIVITY_KIND_MEMCPY)
            ki(&w, "copyKind", (int32_t)rd32(p, 4));
        ku(&w, "correlationId", rd64(p, 40));
        ku(&w, "deviceId", rd32(p, 32));
        ku(&w, "end", rd64(p, 24));
        ku(&w, "isAsync", p[48]);
        ks(&w, "kind", kind_name(kind));
        ku(&w, "start", rd64(p, 16));
        ku(&w, "streamId", rd32(p, 36));
        if (kind == MSPTI_ACTIVITY_KIND_MEMSET)
            ku(&w, "value", rd32(p, 4));
        break;
    case MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
        ku(&w, "correlationId", rd64(p, 16));
        ku(&w, "externalId", rd64(p, 8));
        ki(&w, "externalKind", (int32_t)rd32(p, 4));
        ks(&w, "kind", "ExternalCorrelation");
        break;
    case MSPTI_ACTIVITY_KIND_COMMUNICATION:
        ks(&w, "algType", rdstr(p, 40));
        ks(&w, "commName", rdstr(p, 56));
        ku(&w, "correlationId", rd64(p, 64));
        ku(&w, "count", rd64(p, 8));
        ki(&w, "dataType", (int32_t)rd32(p, 4));
        ku(&w, "deviceId", rd32(p, 16));
        ku(&w, "end", rd64(p, 32));
        ks(&w, "kind", "Communication");
        ks(&w, "name", rdstr(p, 48));
        ku(&w, "start", rd64(p, 24));
        ku(&w, "streamId", rd32(p, 20));
        break;
    default:
        ks(&w, "kind", "Unknown");
        break;
    }
done:
    jw_obj_end(&w);
    if (w.err)
        return w.err;
    return (long)w.len;
}

void sim_dump_record(const void *rec, size_t size)
{
    char line[8192];
    long n = sim_dump_format(rec, size, line, sizeof(line) - 1);
    if (n < 0)
        return;
    line[n++] = '\n';
    pthread_mutex_lock(&g_lock);
    if (g_fd >= 0) {
        if (g_len + (size_t)n > DUMP_BUF)
            flush_locked();
        memcpy(g_buf + g_len, line, (size_t)n);
        g_len += (size_t)n;
    }
    pthread_mutex_unlock(&g_lock);
}


