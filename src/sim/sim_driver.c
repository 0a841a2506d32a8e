/* sim_driver: the mssim_* driver API (docs/design/mspti.md#driver-api): host records appended during the call,
 * device records placed on per-(device, stream) timelines and handed to sim_dev, mstx-style
 * markers with domains, ENTER/EXIT callbacks, and the benchmark producer. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/strutil.h"
#include "sim/sim_core.h"
#include "sim/sim_dev.h"
#include "sim/sim_dump.h"
#include "sim/sim_fabric.h"
#include "sim/sim_intern.h"
#include "sim/sim_mspti.h"

#define MSG_MAX 255
#define RANGES_MAX 4096

static _Atomic uint64_t g_corr = 1;
static _Atomic uint64_t g_marker = 1;
static _Atomic uint64_t g_next_addr = 0x124000000000ull;
static __thread uint32_t t_device;
static __thread uint32_t t_tid;

struct range {
    uint64_t id;            /* 0 = free slot */
    struct sim_domain *dom;
    uint32_t device;
    int32_t stream;
    bool recorded;          /* START was recorded (END is recorded only then) */
};
struct alloc {
    uint64_t addr, bytes;
};
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct range g_ranges[RANGES_MAX];    /* guarded by g_lock; id-indexed, open addressing */
static struct alloc *g_allocs;               /* guarded by g_lock */
static size_t g_nallocs, g_cap_allocs;

static uint32_t my_pid(void) { return (uint32_t)getpid(); }
static uint32_t my_tid(void)
{
    if (!t_tid)
        t_tid = (uint32_t)syscall(SYS_gettid);
    return t_tid;
}
/* Interned constant cached in *slot; producer threads may race to fill it (same value). */
static const char *cached_intern(_Atomic(const char *) *slot, const char *s)
{
    const char *v = atomic_load_explicit(slot, memory_order_acquire);
    if (!v) {
        v = sim_intern(s);
        atomic_store_explicit(slot, v, memory_order_release);
    }
    return v;
}
static const char *empty_str(void)
{
    static _Atomic(const char *) empty;
    return cached_intern(&empty, "");
}

static uint64_t next_corr(void) { return atomic_fetch_add_explicit(&g_corr, 1, memory_order_relaxed); }

SIM_EXPORT int mssim_is_simulator(void) { return 1; }

SIM_EXPORT uint64_t mssim_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

SIM_EXPORT int mssim_set_device(uint32_t device)
{
    sim_core_init();
    if (device >= sim_knobs()->devices || device >= SIM_MAX_DEVICES) {
        sim_log(SIM_WARN, "mssim_set_device: invalid device %u (MSSIM_DEVICES=%u)", device, sim_knobs()->devices);
        return -EINVAL;
    }
    sim_callback(MSPTI_CB_DOMAIN_RUNTIME, MSPTI_CBID_RUNTIME_DEVICE_SET, MSPTI_API_ENTER, "aclrtSetDevice");
    t_device = device;
    sim_callback(MSPTI_CB_DOMAIN_RUNTIME, MSPTI_CBID_RUNTIME_DEVICE_SET, MSPTI_API_EXIT, "aclrtSetDevice");
    return 0;
}

SIM_EXPORT int mssim_synchronize(int32_t device)
{
    sim_core_init();
    if (device < -1 || (device >= 0 && (uint32_t)device >= sim_knobs()->devices))
        return -EINVAL;
    sim_dev_synchronize(device);
    return 0;
}

SIM_EXPORT void mssim_reset(void)
{
    sim_core_init();
    sim_dev_reset();
    sim_core_reset();
    sim_domain_enable_all();
    sim_ext_reset_thread();
    atomic_store(&g_corr, 1);
    atomic_store(&g_marker, 1);
    pthread_mutex_lock(&g_lock);
    memset(g_ranges, 0, sizeof(g_ranges));
    g_nallocs = 0;
    pthread_mutex_unlock(&g_lock);
    t_device = 0;
}

SIM_EXPORT void mssim_get_stats(struct mssim_stats *out)
{
    sim_core_init();
    if (out)
        sim_core_get_stats(out);
}

SIM_EXPORT void mssim_dump_flush(void)
{
    sim_core_init();
    sim_dump_flush();
}

/* ---------------- host API records ---------------- */

static int api_kind(int level)
{
    if (sim_knobs()->profile < SIM_P260)
        return MSPTI_ACTIVITY_KIND_API;
    switch (level) {
    case MSSIM_LEVEL_ACL: return MSPTI_ACTIVITY_KIND_ACL_API;
    case MSSIM_LEVEL_RUNTIME: return MSPTI_ACTIVITY_KIND_RUNTIME_API;
    case MSSIM_LEVEL_NODE: return MSPTI_ACTIVITY_KIND_NODE_API;
    default: return MSPTI_ACTIVITY_KIND_API;
    }
}

static void emit_api(int level, const char *interned, uint64_t start, uint64_t end, uint64_t corr)
{
    int kind = api_kind(level);
    if (!sim_subscribed() || !sim_kind_enabled(kind))
        return;
    sim_ext_emit(corr);
    msptiActivityApi r = {.kind = kind, .start = start, .end = end, .correlationId = corr, .name = interned};
    r.pt.processId = my_pid();
    r.pt.threadId = my_tid();
    sim_append(&r, sizeof(r));
}

SIM_EXPORT uint64_t mssim_api(const char *name, int level, uint64_t duration_ns)
{
    sim_core_init();
    if (!name || level < MSSIM_LEVEL_ACL || level > MSSIM_LEVEL_OTHER)
        return 0;
    const char *in = sim_intern(name);
    if (!in)
        return 0;
    uint64_t corr = next_corr();
    uint64_t t = mssim_now_ns();
    emit_api(level, in, t, t + duration_ns, corr);
    return corr;
}

/* ---------------- device work ---------------- */

static void submit_dev(uint32_t device, uint64_t end, const void *rec, size_t size)
{
    if (sim_dev_submit(device, end + sim_knobs()->device_lag_ns, rec, size) != 0)
        sim_log(SIM_ERROR, "cannot queue a device record (out of memory)");
}

SIM_EXPORT uint64_t mssim_launch_kernel(uint32_t stream, const char *name, const char *type, uint64_t duration_ns)
{
    static _Atomic(const char *) launch_slot;
    sim_core_init();
    if (!name || !type)
        return 0;
    const char *launch_name = cached_intern(&launch_slot, "aclrtLaunchKernel");
    uint32_t dev = t_device;
    uint64_t corr = next_corr();
    const struct sim_knobs *k = sim_knobs();
    sim_callback(MSPTI_CB_DOMAIN_RUNTIME, MSPTI_CBID_RUNTIME_LAUNCH, MSPTI_API_ENTER, launch_name);
    uint64_t t = mssim_now_ns();
    emit_api(MSSIM_LEVEL_RUNTIME, launch_name, t, t + k->api_overhead_ns, corr);
    uint64_t start = sim_dev_place(dev, stream, t + k->launch_latency_ns, duration_ns, true);
    if (sim_subscribed() && sim_kind_produces(MSPTI_ACTIVITY_KIND_KERNEL) && str_starts_with(type, "KERNEL")) {
        msptiActivityKernel r = {.kind = MSPTI_ACTIVITY_KIND_KERNEL, .start = start, .end = start + duration_ns,
                                 .correlationId = corr, .type = sim_intern(type), .name = sim_intern(name)};
        r.ds.deviceId = dev;
        r.ds.streamId = stream;
        if (r.type && r.name)
            submit_dev(dev, r.end, &r, sizeof(r));
    }
    sim_callback(MSPTI_CB_DOMAIN_RUNTIME, MSPTI_CBID_RUNTIME_LAUNCH, MSPTI_API_EXIT, launch_name);
    return corr;
}

/* HCCL callback id by case-insensitive substring, longest candidate first (docs/design/mspti.md#driver-api). */
static uint32_t hccl_cbid(const char *name)
{
    static const struct { const char *s; uint32_t id; } c[] = {
        {"ReduceScatter", 4}, {"AlltoAllV", 7}, {"AllReduce", 1}, {"Broadcast", 2}, {"AllGather", 3},
        {"AlltoAll", 6}, {"SendRecv", 12}, {"Barrier", 8}, {"Scatter", 9}, {"Reduce", 5}, {"Send", 10},
        {"Recv", 11},
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        if (strcasestr(name, c[i].s))
            return c[i].id;
    }
    return 0;
}

SIM_EXPORT uint64_t mssim_collective(uint32_t stream, const char *name, const char *comm_name, const char *alg_type,
                                     int32_t data_type, uint64_t count, uint64_t bytes, uint64_t duration_ns)
{
    sim_core_init();
    if (!name || !comm_name || !alg_type)
        return 0;
    const char *iname = sim_intern(name), *icomm = sim_intern(comm_name), *ialg = sim_intern(alg_type);
    if (!iname || !icomm || !ialg)
        return 0;
    uint32_t dev = t_device;
    uint32_t cbid = hccl_cbid(name);
    uint64_t corr = next_corr();
    if (cbid)
        sim_callback(MSPTI_CB_DOMAIN_HCCL, cbid, MSPTI_API_ENTER, iname);
    uint64_t t = mssim_now_ns();
    uint64_t start, end, xfer_start;
    if (sim_fabric_on()) {
        /* Synchronised (docs/simulator.md): this rank arrives when its stream reaches the
         * collective; the data moves once the last member has arrived, so the wait is inside
         * the Communication record and the Hccl record covers the transfer only. */
        uint64_t last = 0;
        start = sim_dev_place(dev, stream, t + sim_knobs()->launch_latency_ns, 0, false);
        if (sim_fabric_arrive(icomm, start, duration_ns, &last) != 0 || last < start)
            last = start;
        xfer_start = last;
        end = last + duration_ns;
        (void)sim_dev_place(dev, stream, start, end - start, true);
    } else {
        start = sim_dev_place(dev, stream, t + sim_knobs()->launch_latency_ns, duration_ns, true);
        xfer_start = start;
        end = start + duration_ns;
    }
    if (sim_subscribed() && sim_kind_produces(MSPTI_ACTIVITY_KIND_COMMUNICATION)) {
        msptiActivityCommunication r = {.kind = MSPTI_ACTIVITY_KIND_COMMUNICATION, .dataType = data_type,
                                        .count = count, .start = start, .end = end, .algType = ialg,
                                        .name = iname, .commName = icomm, .correlationId = corr};
        r.ds.deviceId = dev;
        r.ds.streamId = stream;
        submit_dev(dev, end, &r, sizeof(r));
    }
    if (sim_subscribed() && sim_kind_produces(MSPTI_ACTIVITY_KIND_HCCL)) {
        msptiActivityHccl r = {.kind = MSPTI_ACTIVITY_KIND_HCCL, .start = xfer_start, .end = end,
                               .bandWidth = duration_ns ? (double)bytes / (double)duration_ns : 0.0,
                               .name = iname, .commName = icomm};
        r.ds.deviceId = dev;
        r.ds.streamId = stream;
        submit_dev(dev, end, &r, sizeof(r));
    }
    if (cbid)
        sim_callback(MSPTI_CB_DOMAIN_HCCL, cbid, MSPTI_API_EXIT, iname);
    return corr;
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull), .tv_nsec = (long)(ns % 1000000000ull)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Memcpy (kind 7) and memset (kind 6) share a layout apart from field 4. */
static uint64_t mem_op(int kind, int32_t stream, int32_t field4, uint64_t bytes, double gbps)
{
    const char *fn;
    uint32_t cbid;
    bool async = stream >= 0;
    if (kind == MSPTI_ACTIVITY_KIND_MEMCPY) {
        fn = async ? "aclrtMemcpyAsync" : "aclrtMemcpy";
        cbid = async ? MSPTI_CBID_RUNTIME_MEMCPY_ASYNC : MSPTI_CBID_RUNTIME_MEMCPY;
    } else {
        fn = async ? "aclrtMemsetAsync" : "aclrtMemset";
        cbid = async ? MSPTI_CBID_RUNTIME_MEM_SET_ASYNC : MSPTI_CBID_RUNTIME_MEM_SET;
    }
    uint32_t dev = t_device;
    uint64_t corr = next_corr();
    uint64_t dur = 2000 + (uint64_t)((double)bytes / gbps);
    sim_callback(MSPTI_CB_DOMAIN_RUNTIME, cbid, MSPTI_API_ENTER, fn);
    uint64_t t = mssim_now_ns(), start, end;
    if (async) {
        start = sim_dev_place(dev, (uint32_t)stream, t + sim_knobs()->launch_latency_ns, dur, true);
    } else {
        sleep_ns(dur);    /* synchronous copies block the caller for their duration */
        start = t;
    }
    end = start + dur;
    if (sim_subscribed() && sim_kind_produces(kind)) {
        msptiActivityMemcpy r = {.kind = kind, .copyKind = field4, .bytes = bytes, .start = start, .end = end,
                                 .deviceId = dev, .streamId = async ? (uint32_t)stream : MSPTI_INVALID_STREAM_ID,
                                 .correlationId = corr, .isAsync = async};
        if (async)
            submit_dev(dev, end, &r, sizeof(r));
        else
            sim_append(&r, sizeof(r));
    }
    sim_callback(MSPTI_CB_DOMAIN_RUNTIME, cbid, MSPTI_API_EXIT, fn);
    return corr;
}

_Static_assert(sizeof(msptiActivityMemcpy) == sizeof(msptiActivityMemset), "memset/memcpy share a layout");

SIM_EXPORT uint64_t mssim_memcpy(int32_t stream, int32_t copy_kind, uint64_t bytes)
{
    double gbps;
    sim_core_init();
    if (stream < -1 || copy_kind < MSPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN || copy_kind > MSPTI_ACTIVITY_MEMCPY_KIND_DEFAULT)
        return 0;
    switch (copy_kind) {
    case MSPTI_ACTIVITY_MEMCPY_KIND_DTOD: gbps = 500; break;
    case MSPTI_ACTIVITY_MEMCPY_KIND_HTOH: gbps = 10; break;
    default: gbps = 25; break;
    }
    return mem_op(MSPTI_ACTIVITY_KIND_MEMCPY, stream, copy_kind, bytes, gbps);
}

SIM_EXPORT uint64_t mssim_memset(int32_t stream, uint32_t value, uint64_t bytes)
{
    sim_core_init();
    if (stream < -1)
        return 0;
    return mem_op(MSPTI_ACTIVITY_KIND_MEMSET, stream, (int32_t)value, bytes, 1000);
}

static void memory_record(int op, uint64_t addr, uint64_t bytes, uint64_t corr)
{
    if (!sim_subscribed() || !sim_kind_produces(MSPTI_ACTIVITY_KIND_MEMORY))
        return;
    uint64_t t = mssim_now_ns();
    msptiActivityMemory r = {.kind = MSPTI_ACTIVITY_KIND_MEMORY, .memoryOperationType = op,
                             .memoryKind = MSPTI_ACTIVITY_MEMORY_KIND_DEVICE, .correlationId = corr,
                             .start = t, .end = t + sim_knobs()->api_overhead_ns, .address = addr,
                             .bytes = bytes, .processId = my_pid(), .deviceId = t_device,
                             .streamId = MSPTI_INVALID_STREAM_ID};
    sim_append(&r, sizeof(r));
}

SIM_EXPORT uint64_t mssim_malloc(uint64_t bytes, uint64_t *address)
{
    sim_core_init();
    uint64_t addr = atomic_fetch_add(&g_next_addr, (bytes + 511) / 512 * 512 + 512);
    pthread_mutex_lock(&g_lock);
    if (g_nallocs == g_cap_allocs) {
        size_t ncap = g_cap_allocs ? g_cap_allocs * 2 : 64;
        struct alloc *na = realloc(g_allocs, ncap * sizeof(*na));
        if (!na) {
            pthread_mutex_unlock(&g_lock);
            return 0;
        }
        g_allocs = na;
        g_cap_allocs = ncap;
    }
    g_allocs[g_nallocs++] = (struct alloc){addr, bytes};
    pthread_mutex_unlock(&g_lock);
    uint64_t corr = next_corr();
    sim_callback(MSPTI_CB_DOMAIN_RUNTIME, MSPTI_CBID_RUNTIME_MALLOC, MSPTI_API_ENTER, "aclrtMalloc");
    memory_record(MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, addr, bytes, corr);
    sim_callback(MSPTI_CB_DOMAIN_RUNTIME, MSPTI_CBID_RUNTIME_MALLOC, MSPTI_API_EXIT, "aclrtMalloc");
    if (address)
        *address = addr;
    return corr;
}

SIM_EXPORT uint64_t mssim_free(uint64_t address)
{
    uint64_t bytes = 0;
    bool found = false;
    sim_core_init();
    pthread_mutex_lock(&g_lock);
    for (size_t i = g_nallocs; i-- > 0;) {
        if (g_allocs[i].addr == address) {
            bytes = g_allocs[i].bytes;
            g_allocs[i] = g_allocs[--g_nallocs];
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&g_lock);
    if (!found)
        return 0;
    uint64_t corr = next_corr();
    sim_callback(MSPTI_CB_DOMAIN_RUNTIME, MSPTI_CBID_RUNTIME_FREE, MSPTI_API_ENTER, "aclrtFree");
    memory_record(MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, address, bytes, corr);
    sim_callback(MSPTI_CB_DOMAIN_RUNTIME, MSPTI_CBID_RUNTIME_FREE, MSPTI_API_EXIT, "aclrtFree");
    return corr;
}

SIM_EXPORT int mssim_emit_raw(const void *record, size_t size)
{
    sim_core_init();
    if (!record || size < sizeof(int32_t) || size > 4096)
        return -EINVAL;
    if (!sim_subscribed())
        return -ENOTCONN;
    sim_append_raw(record, size);
    return 0;
}

/* ---------------- markers ---------------- */

static void marker_pair(int32_t flag_host, uint64_t id, const char *name, const char *domain, int32_t stream,
                        uint32_t dev)
{
    const char *empty = empty_str();
    uint64_t t = mssim_now_ns();
    msptiActivityMarker h = {.kind = MSPTI_ACTIVITY_KIND_MARKER, .flag = stream >= 0 ? flag_host << 3 : flag_host,
                             .sourceKind = MSPTI_ACTIVITY_SOURCE_KIND_HOST, .timestamp = t, .id = id,
                             .name = name, .domain = domain};
    h.objectId.pt.processId = my_pid();
    h.objectId.pt.threadId = my_tid();
    sim_append(&h, sizeof(h));
    if (stream < 0)
        return;
    /* Device twin at the stream's current position, without advancing it. */
    uint64_t ts = sim_dev_place(dev, (uint32_t)stream, t, 0, false);
    msptiActivityMarker dr = {.kind = MSPTI_ACTIVITY_KIND_MARKER, .flag = flag_host << 3,
                              .sourceKind = MSPTI_ACTIVITY_SOURCE_KIND_DEVICE, .timestamp = ts, .id = id,
                              .name = empty, .domain = empty};
    dr.objectId.ds.deviceId = dev;
    dr.objectId.ds.streamId = (uint32_t)stream;
    submit_dev(dev, ts, &dr, sizeof(dr));
}

static bool marker_recording(void) { return sim_subscribed() && sim_kind_enabled(MSPTI_ACTIVITY_KIND_MARKER); }

static uint64_t marker_begin(struct sim_domain *dom, const char *message, int32_t stream, bool range)
{
    sim_core_init();
    if (!dom || !message || strnlen(message, MSG_MAX) >= MSG_MAX || stream < -1)
        return 0;
    uint64_t id = atomic_fetch_add(&g_marker, 1);
    uint32_t dev = t_device;
    bool recorded = false;
    if (atomic_load(&dom->disabled)) {
        sim_stats_add_suppressed();
    } else if (marker_recording()) {
        const char *msg = sim_intern(message);
        if (!msg)
            return 0;
        marker_pair(range ? MSPTI_ACTIVITY_FLAG_MARKER_START : MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, id, msg,
                    dom->name, stream, dev);
        recorded = true;
    }
    if (range) {
        pthread_mutex_lock(&g_lock);
        struct range *r = &g_ranges[id % RANGES_MAX];
        /* Oldest open range in a colliding slot is forgotten: its END will not be recorded. */
        *r = (struct range){.id = id, .dom = dom, .device = dev, .stream = stream, .recorded = recorded};
        pthread_mutex_unlock(&g_lock);
    }
    return id;
}

static void marker_end(uint64_t id)
{
    sim_core_init();
    const char *empty = empty_str();
    pthread_mutex_lock(&g_lock);
    struct range r = g_ranges[id % RANGES_MAX];
    if (id && r.id == id)
        g_ranges[id % RANGES_MAX].id = 0;
    pthread_mutex_unlock(&g_lock);
    if (!id || r.id != id)
        return;
    if (atomic_load(&r.dom->disabled)) {
        sim_stats_add_suppressed();
        return;
    }
    /* No orphan END: a range whose START was not recorded (Marker off then) ends silently. */
    if (r.recorded && marker_recording())
        marker_pair(MSPTI_ACTIVITY_FLAG_MARKER_END, id, empty, empty, r.stream, r.device);
}

SIM_EXPORT uint64_t mssim_mstx_mark(const char *message, int32_t stream)
{
    return marker_begin(sim_domain_default(), message, stream, false);
}
SIM_EXPORT uint64_t mssim_mstx_range_start(const char *message, int32_t stream)
{
    return marker_begin(sim_domain_default(), message, stream, true);
}
SIM_EXPORT void mssim_mstx_range_end(uint64_t range_id) { marker_end(range_id); }

SIM_EXPORT void *mssim_mstx_domain_create(const char *name)
{
    sim_core_init();
    if (!name || strnlen(name, MSG_MAX) >= MSG_MAX || strcmp(name, "default") == 0)
        return NULL;
    return sim_domain_get(name);
}
SIM_EXPORT uint64_t mssim_mstx_domain_mark(void *domain, const char *message, int32_t stream)
{
    return marker_begin(domain, message, stream, false);
}
SIM_EXPORT uint64_t mssim_mstx_domain_range_start(void *domain, const char *message, int32_t stream)
{
    return marker_begin(domain, message, stream, true);
}
SIM_EXPORT void mssim_mstx_domain_range_end(void *domain, uint64_t range_id)
{
    if (domain)
        marker_end(range_id);
}

#ifdef MSSIM_MSTX_ALIASES
/* Optional mstx-style aliases (exact CANN signatures unverified): a non-NULL stream is stream 0. */
SIM_EXPORT void mstxMarkA(const char *message, void *stream) { (void)mssim_mstx_mark(message, stream ? 0 : -1); }
SIM_EXPORT uint64_t mstxRangeStartA(const char *message, void *stream)
{
    return mssim_mstx_range_start(message, stream ? 0 : -1);
}
SIM_EXPORT void mstxRangeEnd(uint64_t id) { mssim_mstx_range_end(id); }
#endif

/* ---------------- benchmark producer ---------------- */

#define BENCH_NAMES 8

SIM_EXPORT int64_t mssim_bench_fill(uint32_t kind_mask, uint64_t n)
{
    static const char *const names[BENCH_NAMES] = {"MatMul", "BatchMatMul", "Softmax", "LayerNorm",
                                                   "Gelu", "Add", "Conv2D", "ApplyAdamW"};
    union tmpl {
        uint8_t bytes[SIM_DEV_REC_MAX];
        msptiActivityMarker mk;
        msptiActivityApi api;
        msptiActivityKernel kr;
        msptiActivityHccl hc;
        msptiActivityMemory mem;
        msptiActivityMemcpy mc;
        msptiActivityExternalCorrelation ec;
        msptiActivityCommunication cm;
    } t[13 * BENCH_NAMES];
    const void *ptrs[13 * BENCH_NAMES];
    size_t sizes[13 * BENCH_NAMES];
    size_t nt = 0;
    sim_core_init();
    if (!sim_subscribed())
        return -ENOTCONN;
    uint64_t now = mssim_now_ns();
    const char *type = sim_intern("KERNEL_AICORE"), *comm = sim_intern("hccl_world_group"), *alg = sim_intern("RING");
    for (int i = 0; i < BENCH_NAMES; i++) {
        const char *nm = sim_intern(names[i]);
        for (int k = 1; k <= 12; k++) {
            if (!((kind_mask >> k) & 1u) || !sim_kind_in_profile(sim_knobs(), k) || !sim_kind_produces(k))
                continue;
            union tmpl *u = &t[nt];
            memset(u, 0, sizeof(*u));
            uint64_t corr = 1000000 + nt;
            switch (k) {
            case MSPTI_ACTIVITY_KIND_MARKER:
                u->mk = (msptiActivityMarker){.kind = k, .flag = MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS,
                                              .timestamp = now, .id = corr, .name = nm, .domain = "default"};
                u->mk.objectId.pt.processId = my_pid();
                u->mk.objectId.pt.threadId = my_tid();
                break;
            case MSPTI_ACTIVITY_KIND_KERNEL:
                u->kr = (msptiActivityKernel){.kind = k, .start = now, .end = now + 1000, .correlationId = corr,
                                              .type = type, .name = nm};
                break;
            case MSPTI_ACTIVITY_KIND_HCCL:
                u->hc = (msptiActivityHccl){.kind = k, .start = now, .end = now + 1000, .bandWidth = 1.5,
                                            .name = nm, .commName = comm};
                break;
            case MSPTI_ACTIVITY_KIND_MEMORY:
                u->mem = (msptiActivityMemory){.kind = k, .memoryKind = 1, .correlationId = corr, .start = now,
                                               .end = now + 1000, .address = 0x1000, .bytes = 4096,
                                               .processId = my_pid(), .streamId = MSPTI_INVALID_STREAM_ID};
                break;
            case MSPTI_ACTIVITY_KIND_MEMSET:
            case MSPTI_ACTIVITY_KIND_MEMCPY:
                u->mc = (msptiActivityMemcpy){.kind = k, .copyKind = 2, .bytes = 4096, .start = now,
                                              .end = now + 1000, .correlationId = corr, .isAsync = 1};
                break;
            case MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
                u->ec = (msptiActivityExternalCorrelation){.kind = k, .externalKind = 2, .externalId = 7,
                                                           .correlationId = corr};
                break;
            case MSPTI_ACTIVITY_KIND_COMMUNICATION:
                u->cm = (msptiActivityCommunication){.kind = k, .dataType = 4, .count = 1024, .start = now,
                                                     .end = now + 1000, .algType = alg, .name = nm,
                                                     .commName = comm, .correlationId = corr};
                break;
            default:
                u->api = (msptiActivityApi){.kind = k, .start = now, .end = now + 1000, .correlationId = corr,
                                            .name = nm};
                u->api.pt.processId = my_pid();
                u->api.pt.threadId = my_tid();
                break;
            }
            ptrs[nt] = u;
            sizes[nt] = sim_kind_stride(k);
            nt++;
        }
    }
    if (nt == 0)
        return -EINVAL;
    return (int64_t)sim_append_bulk(ptrs, sizes, nt, n);
}
