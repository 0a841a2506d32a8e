/* sim_cupti: our simulated libcupti.so — the activity-API subset the plugin's CUPTI backend
 * uses (docs/design/session.md#cupti-backend) over one buffer path (request on demand, complete when full or flushed,
 * declines counted as drops), CUDA 13 record layouts from cupti_abi.h, and the mssimc_*
 * driver API that appends records (mssim_cupti.h). MSSIM_CUPTI_DUMP=<file> writes every
 * appended record as one JSON line: the ground truth the e2e tests compare against.
 * MSSIM_CUPTI_KERNEL_EXTRA=<bytes> makes kernel records longer ("a newer CUPTI"). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "msmon/cupti_abi.h"
#include "msmon/mssim_cupti.h"

#define CAPI __attribute__((visibility("default")))
#define SC_DEVICES 16
#define SC_STREAMS 64
#define SC_MAX_RECORD 1024

static struct {
    pthread_mutex_t lock;         /* buffer, enabled kinds, timelines, ids */
    cupti_abi_request_fn req;
    cupti_abi_complete_fn comp;
    bool on[64];
    uint8_t *cur;
    size_t cur_size, cur_used;
    uint32_t next_corr, next_marker;
    uint64_t busy[SC_DEVICES][SC_STREAMS]; /* stream timelines: device work end */
    uint64_t address;
    atomic_uint_fast64_t dropped_pending; /* reported and reset by GetNumDroppedRecords */
    struct mssimc_stats st;
    uint32_t version;
    size_t kernel_extra;
    FILE *dump;
    pthread_mutex_t dump_lock;
} sc = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .dump_lock = PTHREAD_MUTEX_INITIALIZER,
    .next_corr = 1,
    .next_marker = 1,
    .address = 0x7f0000000000ull,
    .version = 130001,
};
static pthread_once_t sc_once = PTHREAD_ONCE_INIT;

static void sc_init_once(void)
{
    const char *d = getenv("MSSIM_CUPTI_DUMP");
    const char *x = getenv("MSSIM_CUPTI_KERNEL_EXTRA");

    if (d && d[0])
        sc.dump = fopen(d, "ae");
    if (x && x[0]) {
        unsigned long v = strtoul(x, NULL, 10);
        if (v <= SC_MAX_RECORD - sizeof(struct cupti_abi_kernel))
            sc.kernel_extra = (v + 7) / 8 * 8;
    }
}

static void sc_init(void)
{
    pthread_once(&sc_once, sc_init_once);
}

uint64_t mssimc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int mssimc_is_simulator(void)
{
    return 1;
}

static size_t sc_size_of(uint32_t kind)
{
    switch (kind) {
    case CUPTI_ABI_KIND_CONCURRENT_KERNEL: return sizeof(struct cupti_abi_kernel) + sc.kernel_extra;
    case CUPTI_ABI_KIND_RUNTIME:
    case CUPTI_ABI_KIND_DRIVER: return sizeof(struct cupti_abi_api);
    case CUPTI_ABI_KIND_MEMCPY: return sizeof(struct cupti_abi_memcpy);
    case CUPTI_ABI_KIND_MEMSET: return sizeof(struct cupti_abi_memset);
    case CUPTI_ABI_KIND_MEMORY2: return sizeof(struct cupti_abi_memory);
    case CUPTI_ABI_KIND_MARKER: return sizeof(struct cupti_abi_marker);
    default: return 0;
    }
}

/* Complete a buffer to the consumer; never under sc.lock (the consumer may call us back). */
static void sc_complete(uint8_t *buf, size_t size, size_t used)
{
    if (buf && sc.comp) {
        sc.comp(NULL, 0, buf, size, used);
        __atomic_fetch_add(&sc.st.buffers_completed, 1, __ATOMIC_RELAXED);
    }
}

/* Append one record of `size` bytes (kind at offset 0). Returns true if it went into a buffer. */
static bool sc_append(const void *rec, size_t size)
{
    uint32_t kind;
    bool ok = false;

    memcpy(&kind, rec, sizeof(kind));
    pthread_mutex_lock(&sc.lock);
    for (;;) {
        uint8_t *full, *b = NULL;
        size_t full_size, full_used, bsz = 0, maxr = 0;
        if (!sc.req || kind >= 64 || !sc.on[kind])
            break;
        if (sc.cur && sc.cur_used + size <= sc.cur_size) {
            memcpy(sc.cur + sc.cur_used, rec, size);
            sc.cur_used += size;
            sc.st.appended++;
            ok = true;
            break;
        }
        full = sc.cur;
        full_size = sc.cur_size;
        full_used = sc.cur_used;
        sc.cur = NULL;
        pthread_mutex_unlock(&sc.lock);
        sc_complete(full, full_size, full_used);
        if (sc.req)
            sc.req(&b, &bsz, &maxr);
        pthread_mutex_lock(&sc.lock);
        sc.st.buffers_requested++;
        if (!b || bsz < size) {
            sc.st.dropped_declined++;
            atomic_fetch_add(&sc.dropped_pending, 1);
            if (b) {
                pthread_mutex_unlock(&sc.lock);
                sc_complete(b, bsz, 0);
                pthread_mutex_lock(&sc.lock);
            }
            break;
        }
        if (sc.cur) { /* another thread installed one meanwhile: hand ours back empty */
            pthread_mutex_unlock(&sc.lock);
            sc_complete(b, bsz, 0);
            pthread_mutex_lock(&sc.lock);
            continue;
        }
        sc.cur = b;
        sc.cur_size = bsz;
        sc.cur_used = 0;
    }
    pthread_mutex_unlock(&sc.lock);
    return ok;
}

static void sc_dump(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sc_dump(const char *fmt, ...)
{
    va_list ap;
    if (!sc.dump)
        return;
    pthread_mutex_lock(&sc.dump_lock);
    va_start(ap, fmt);
    vfprintf(sc.dump, fmt, ap);
    va_end(ap);
    fputc('\n', sc.dump);
    fflush(sc.dump);
    pthread_mutex_unlock(&sc.dump_lock);
}

/* ---- CUPTI subset ---- */

CAPI cupti_abi_result cuptiActivityRegisterCallbacks(cupti_abi_request_fn req, cupti_abi_complete_fn comp)
{
    sc_init();
    if (!req || !comp)
        return CUPTI_ABI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&sc.lock);
    sc.req = req; /* replaces any earlier registration, process-wide, like CUPTI */
    sc.comp = comp;
    pthread_mutex_unlock(&sc.lock);
    return CUPTI_ABI_SUCCESS;
}

static cupti_abi_result sc_set_kind(int kind, bool on)
{
    sc_init();
    if (kind <= 0 || kind >= 64 || (!sc_size_of((uint32_t)kind) && on))
        return on ? CUPTI_ABI_ERROR_NOT_SUPPORTED : CUPTI_ABI_ERROR_INVALID_KIND;
    pthread_mutex_lock(&sc.lock);
    sc.on[kind] = on;
    pthread_mutex_unlock(&sc.lock);
    return CUPTI_ABI_SUCCESS;
}

CAPI cupti_abi_result cuptiActivityEnable(int kind)
{
    return sc_set_kind(kind, true);
}

CAPI cupti_abi_result cuptiActivityDisable(int kind)
{
    return sc_set_kind(kind, false);
}

/* Strides come from each record's kind (kernel records may be longer, see the top). */
CAPI cupti_abi_result cuptiActivityGetNextRecord(uint8_t *buf, size_t valid, void **rec)
{
    uint8_t *p;
    uint32_t kind;
    size_t size;

    if (!buf || !rec)
        return CUPTI_ABI_ERROR_INVALID_PARAMETER;
    if (*rec) {
        memcpy(&kind, *rec, sizeof(kind));
        p = (uint8_t *)*rec + sc_size_of(kind);
    } else {
        p = buf;
    }
    if ((size_t)(p - buf) + sizeof(kind) > valid)
        return CUPTI_ABI_ERROR_MAX_LIMIT_REACHED;
    memcpy(&kind, p, sizeof(kind));
    size = sc_size_of(kind);
    if (!size)
        return CUPTI_ABI_ERROR_INVALID_KIND;
    if ((size_t)(p - buf) + size > valid)
        return CUPTI_ABI_ERROR_MAX_LIMIT_REACHED;
    *rec = p;
    return CUPTI_ABI_SUCCESS;
}

CAPI cupti_abi_result cuptiActivityFlushAll(uint32_t flag)
{
    uint8_t *b;
    size_t size, used;

    (void)flag; /* we hold no half-written records: forced or not, the current buffer goes */
    sc_init();
    pthread_mutex_lock(&sc.lock);
    b = sc.cur_used ? sc.cur : NULL;
    size = sc.cur_size;
    used = sc.cur_used;
    if (b)
        sc.cur = NULL;
    pthread_mutex_unlock(&sc.lock);
    sc_complete(b, size, used);
    return CUPTI_ABI_SUCCESS;
}

CAPI cupti_abi_result cuptiGetVersion(uint32_t *v)
{
    if (!v)
        return CUPTI_ABI_ERROR_INVALID_PARAMETER;
    *v = __atomic_load_n(&sc.version, __ATOMIC_RELAXED);
    return CUPTI_ABI_SUCCESS;
}

static const struct {
    int domain;
    uint32_t cbid;
    const char *name;
} sc_names[] = {
    { 2, MSSIMC_CBID_LAUNCH_KERNEL, "cudaLaunchKernel_v7000" },
    { 2, MSSIMC_CBID_MEMCPY, "cudaMemcpy_v3020" },
    { 2, MSSIMC_CBID_MEMCPY_ASYNC, "cudaMemcpyAsync_v3020" },
    { 2, MSSIMC_CBID_MEMSET, "cudaMemset_v3020" },
    { 2, MSSIMC_CBID_MALLOC, "cudaMalloc_v3020" },
    { 2, MSSIMC_CBID_FREE, "cudaFree_v3020" },
    { 2, MSSIMC_CBID_DEVICE_SYNCHRONIZE, "cudaDeviceSynchronize_v3020" },
    { 1, MSSIMC_CBID_DRV_LAUNCH_KERNEL, "cuLaunchKernel" },
};

static const char *sc_name_of(int domain, uint32_t cbid)
{
    for (size_t i = 0; i < sizeof(sc_names) / sizeof(sc_names[0]); i++)
        if (sc_names[i].domain == domain && sc_names[i].cbid == cbid)
            return sc_names[i].name;
    return NULL;
}

CAPI cupti_abi_result cuptiGetCallbackName(int domain, uint32_t cbid, const char **name)
{
    const char *n = sc_name_of(domain, cbid);
    if (!name || !n)
        return CUPTI_ABI_ERROR_INVALID_PARAMETER;
    *name = n;
    return CUPTI_ABI_SUCCESS;
}

CAPI cupti_abi_result cuptiGetResultString(cupti_abi_result r, const char **str)
{
    if (!str)
        return CUPTI_ABI_ERROR_INVALID_PARAMETER;
    *str = r == CUPTI_ABI_SUCCESS ? "CUPTI_SUCCESS" : "CUPTI_ERROR (simulated)";
    return CUPTI_ABI_SUCCESS;
}

CAPI cupti_abi_result cuptiActivityGetNumDroppedRecords(void *ctx, uint32_t stream, size_t *dropped)
{
    (void)ctx;
    (void)stream;
    if (!dropped)
        return CUPTI_ABI_ERROR_INVALID_PARAMETER;
    *dropped = (size_t)atomic_exchange(&sc.dropped_pending, 0); /* reset per call, like CUPTI */
    return CUPTI_ABI_SUCCESS;
}

CAPI cupti_abi_result cuptiActivityFlushPeriod(uint32_t ms)
{
    (void)ms; /* no periodic worker: FlushAll and full buffers complete */
    return CUPTI_ABI_SUCCESS;
}

CAPI cupti_abi_result cuptiFinalize(void)
{
    return cuptiActivityFlushAll(CUPTI_ABI_FLUSH_FORCED);
}

/* ---- driver API ---- */

static uint32_t sc_tid(void)
{
    return (uint32_t)syscall(SYS_gettid);
}

static uint32_t sc_corr(void)
{
    return __atomic_fetch_add(&sc.next_corr, 1, __ATOMIC_RELAXED);
}

/* Device interval on (device, stream): after the stream's previous work and not before now. */
static void sc_device_slot(uint32_t device, uint32_t stream, uint64_t dur, uint64_t *start, uint64_t *end)
{
    uint64_t now = mssimc_now_ns();
    uint64_t *busy = &sc.busy[device % SC_DEVICES][stream % SC_STREAMS];

    pthread_mutex_lock(&sc.lock);
    *start = *busy > now ? *busy : now;
    *end = *start + (dur ? dur : 1);
    *busy = *end;
    pthread_mutex_unlock(&sc.lock);
}

static uint32_t sc_api_rec(int domain, uint32_t cbid, uint64_t dur, uint32_t corr)
{
    struct cupti_abi_api a = {
        .kind = domain == CUPTI_ABI_CB_DOMAIN_RUNTIME_API ? CUPTI_ABI_KIND_RUNTIME : CUPTI_ABI_KIND_DRIVER,
        .cbid = cbid, .processId = (uint32_t)getpid(), .threadId = sc_tid(), .correlationId = corr,
    };
    const char *name = sc_name_of(domain, cbid);

    a.start = mssimc_now_ns();
    a.end = a.start + (dur ? dur : 1);
    if (sc_append(&a, sizeof(a)))
        sc_dump("{\"kind\":\"%s\",\"cbid\":%u,\"name\":\"%s\",\"start\":%" PRIu64 ",\"end\":%" PRIu64
                ",\"processId\":%u,\"threadId\":%u,\"correlationId\":%u}",
                a.kind == CUPTI_ABI_KIND_RUNTIME ? "RUNTIME" : "DRIVER", cbid, name ? name : "", a.start,
                a.end, a.processId, a.threadId, corr);
    return corr;
}

uint32_t mssimc_api(int domain, uint32_t cbid, uint64_t duration_ns)
{
    sc_init();
    return sc_api_rec(domain, cbid, duration_ns, sc_corr());
}

uint32_t mssimc_kernel(uint32_t device, uint32_t stream, const char *name, uint64_t duration_ns)
{
    uint8_t raw[SC_MAX_RECORD];
    struct cupti_abi_kernel k = { .kind = CUPTI_ABI_KIND_CONCURRENT_KERNEL, .deviceId = device,
                                  .contextId = 1, .streamId = stream };
    uint32_t corr;

    sc_init();
    corr = sc_api_rec(CUPTI_ABI_CB_DOMAIN_RUNTIME_API, MSSIMC_CBID_LAUNCH_KERNEL, 2000, sc_corr());
    k.correlationId = corr;
    k.name = name; /* CUPTI's names live for the process: callers pass literals */
    sc_device_slot(device, stream, duration_ns, &k.start, &k.end);
    memset(raw, 0, sizeof(raw));
    memcpy(raw, &k, sizeof(k));
    if (sc_append(raw, sc_size_of(k.kind)))
        sc_dump("{\"kind\":\"CONCURRENT_KERNEL\",\"name\":\"%s\",\"deviceId\":%u,\"streamId\":%u,\"start\":%" PRIu64
                ",\"end\":%" PRIu64 ",\"correlationId\":%u}",
                name, device, stream, k.start, k.end, corr);
    return corr;
}

uint32_t mssimc_memcpy(uint32_t device, uint32_t stream, int copy_kind, uint64_t bytes, int async)
{
    struct cupti_abi_memcpy c = { .kind = CUPTI_ABI_KIND_MEMCPY, .copyKind = (uint8_t)copy_kind,
                                  .flags = async ? CUPTI_ABI_MEMCPY_ASYNC : 0, .bytes = bytes,
                                  .deviceId = device, .contextId = 1, .streamId = stream };
    sc_init();
    c.correlationId = sc_api_rec(CUPTI_ABI_CB_DOMAIN_RUNTIME_API, async ? MSSIMC_CBID_MEMCPY_ASYNC : MSSIMC_CBID_MEMCPY,
                                 1500, sc_corr());
    sc_device_slot(device, stream, bytes / 10 + 1, &c.start, &c.end);
    if (sc_append(&c, sizeof(c)))
        sc_dump("{\"kind\":\"MEMCPY\",\"copyKind\":%d,\"async\":%d,\"bytes\":%" PRIu64 ",\"deviceId\":%u,\"streamId\":%u,"
                "\"start\":%" PRIu64 ",\"end\":%" PRIu64 ",\"correlationId\":%u}",
                copy_kind, async ? 1 : 0, bytes, device, stream, c.start, c.end, c.correlationId);
    return c.correlationId;
}

uint32_t mssimc_memset(uint32_t device, uint32_t stream, uint32_t value, uint64_t bytes, int async)
{
    struct cupti_abi_memset s = { .kind = CUPTI_ABI_KIND_MEMSET, .value = value, .bytes = bytes,
                                  .deviceId = device, .contextId = 1, .streamId = stream,
                                  .flags = async ? CUPTI_ABI_MEMSET_ASYNC : 0,
                                  .memoryKind = CUPTI_ABI_MEMORY_KIND_DEVICE };
    sc_init();
    s.correlationId = sc_api_rec(CUPTI_ABI_CB_DOMAIN_RUNTIME_API, MSSIMC_CBID_MEMSET, 1000, sc_corr());
    sc_device_slot(device, stream, bytes / 50 + 1, &s.start, &s.end);
    if (sc_append(&s, sizeof(s)))
        sc_dump("{\"kind\":\"MEMSET\",\"value\":%u,\"bytes\":%" PRIu64 ",\"deviceId\":%u,\"streamId\":%u,\"start\":%" PRIu64
                ",\"end\":%" PRIu64 ",\"correlationId\":%u}",
                value, bytes, device, stream, s.start, s.end, s.correlationId);
    return s.correlationId;
}

static uint32_t sc_memory(uint32_t device, uint32_t op, uint64_t address, uint64_t bytes)
{
    struct cupti_abi_memory m = { .kind = CUPTI_ABI_KIND_MEMORY2, .memoryOperationType = op,
                                  .memoryKind = CUPTI_ABI_MEMORY_KIND_DEVICE, .address = address,
                                  .bytes = bytes, .processId = (uint32_t)getpid(), .deviceId = device,
                                  .contextId = 1 };
    m.correlationId = sc_api_rec(CUPTI_ABI_CB_DOMAIN_RUNTIME_API,
                                 op == CUPTI_ABI_MEMOP_ALLOCATION ? MSSIMC_CBID_MALLOC : MSSIMC_CBID_FREE, 3000,
                                 sc_corr());
    m.timestamp = mssimc_now_ns();
    if (sc_append(&m, sizeof(m)))
        sc_dump("{\"kind\":\"MEMORY2\",\"op\":%u,\"address\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"deviceId\":%u,"
                "\"timestamp\":%" PRIu64 ",\"correlationId\":%u}",
                op, address, bytes, device, m.timestamp, m.correlationId);
    return m.correlationId;
}

uint32_t mssimc_malloc(uint32_t device, uint64_t bytes, uint64_t *ret_address)
{
    uint64_t a;
    sc_init();
    pthread_mutex_lock(&sc.lock);
    a = sc.address;
    sc.address += (bytes + 4095) / 4096 * 4096;
    pthread_mutex_unlock(&sc.lock);
    if (ret_address)
        *ret_address = a;
    return sc_memory(device, CUPTI_ABI_MEMOP_ALLOCATION, a, bytes);
}

uint32_t mssimc_free(uint32_t device, uint64_t address, uint64_t bytes)
{
    sc_init();
    return sc_memory(device, CUPTI_ABI_MEMOP_RELEASE, address, bytes);
}

static uint32_t sc_marker(uint32_t flags, uint32_t id, const char *name, const char *domain)
{
    struct cupti_abi_marker k = { .kind = CUPTI_ABI_KIND_MARKER, .flags = flags, .id = id,
                                  .objectKind = CUPTI_ABI_OBJECT_THREAD,
                                  .objectId = { (uint32_t)getpid(), sc_tid(), 0 },
                                  .name = flags == CUPTI_ABI_MARKER_END ? NULL : name,
                                  .domain = flags == CUPTI_ABI_MARKER_END ? NULL : domain };
    sc_init();
    k.timestamp = mssimc_now_ns();
    if (sc_append(&k, sizeof(k)))
        sc_dump("{\"kind\":\"MARKER\",\"flags\":%u,\"id\":%u,\"name\":\"%s\",\"domain\":\"%s\",\"timestamp\":%" PRIu64 "}",
                flags, id, k.name ? k.name : "", k.domain ? k.domain : "", k.timestamp);
    return id;
}

uint32_t mssimc_nvtx_mark(const char *name, const char *domain)
{
    return sc_marker(CUPTI_ABI_MARKER_INSTANT, __atomic_fetch_add(&sc.next_marker, 1, __ATOMIC_RELAXED), name, domain);
}

uint32_t mssimc_nvtx_range_start(const char *name, const char *domain)
{
    return sc_marker(CUPTI_ABI_MARKER_START, __atomic_fetch_add(&sc.next_marker, 1, __ATOMIC_RELAXED), name, domain);
}

void mssimc_nvtx_range_end(uint32_t id)
{
    (void)sc_marker(CUPTI_ABI_MARKER_END, id, NULL, NULL);
}

void mssimc_add_dropped(uint64_t n)
{
    atomic_fetch_add(&sc.dropped_pending, n);
    __atomic_fetch_add(&sc.st.dropped_injected, n, __ATOMIC_RELAXED);
}

void mssimc_set_version(uint32_t v)
{
    __atomic_store_n(&sc.version, v, __ATOMIC_RELAXED);
}

void mssimc_get_stats(struct mssimc_stats *ret)
{
    pthread_mutex_lock(&sc.lock);
    *ret = sc.st;
    pthread_mutex_unlock(&sc.lock);
}

int64_t mssimc_bench_fill(uint64_t n)
{
    static const char *const names[] = { "gemm_128x128", "softmax_fwd", "layernorm_fwd", "gelu",
                                         "flash_attn_fwd", "adam_step", "reduce_sum", "ncclDevKernel_AllReduce_Sum_f32_RING_LL" };
    uint8_t raw[SC_MAX_RECORD];
    struct cupti_abi_kernel k = { .kind = CUPTI_ABI_KIND_CONCURRENT_KERNEL, .contextId = 1 };
    struct cupti_abi_api a = { .kind = CUPTI_ABI_KIND_RUNTIME, .cbid = MSSIMC_CBID_LAUNCH_KERNEL,
                               .processId = (uint32_t)getpid(), .threadId = sc_tid() };
    uint64_t t = mssimc_now_ns();
    int64_t got = 0;

    sc_init();
    memset(raw, 0, sizeof(raw));
    for (uint64_t i = 0; i < n; i++) {
        if (i & 1) { /* every other record a runtime API call: the msPTI bench's Kernel+API mix */
            a.start = t + i * 1000;
            a.end = a.start + 500;
            a.correlationId = (uint32_t)i;
            got += sc_append(&a, sizeof(a));
            continue;
        }
        k.name = names[(i / 2) % 8];
        k.start = t + i * 1000;
        k.end = k.start + 900;
        k.correlationId = (uint32_t)i;
        k.streamId = (uint32_t)(i % 4);
        memcpy(raw, &k, sizeof(k));
        got += sc_append(raw, sc_size_of(k.kind));
    }
    return got;
}
