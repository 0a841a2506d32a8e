/* trace_fmt: the nputrace file's JSON pieces (trace_fmt.h). Categories follow Kineto's names
 * (kernel, cuda_runtime, gpu_memcpy, ...: contract/names.h NAMES_CAT_*, which the analysis reads too)
 * so HTA's kernel/communication/memcpy breakdowns work on our traces; args.kind keeps the
 * exact activity kind for our own analysis. */
#include "plugin/outputs/trace_fmt.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "contract/names.h"

/* Hand-rolled: this runs twice per event and snprintf was a tenth of the write time. */
size_t trace_fmt_us(char *buf, size_t cap, uint64_t t_ns, uint64_t base_ns)
{
    uint64_t d = t_ns >= base_ns ? t_ns - base_ns : base_ns - t_ns, us = d / 1000u;
    unsigned frac = (unsigned)(d % 1000u);
    char tmp[32];
    size_t n = 0, k = 0;

    if (t_ns < base_ns)
        tmp[n++] = '-';
    char digits[24];
    do {
        digits[k++] = (char)('0' + us % 10u);
        us /= 10u;
    } while (us);
    while (k)
        tmp[n++] = digits[--k];
    tmp[n++] = '.';
    tmp[n++] = (char)('0' + frac / 100u);
    tmp[n++] = (char)('0' + frac / 10u % 10u);
    tmp[n++] = (char)('0' + frac % 10u);
    if (cap == 0)
        return 0;
    if (n >= cap)
        n = cap - 1;
    memcpy(buf, tmp, n);
    buf[n] = '\0';
    return n;
}

static void tf_ts(struct jw *w, const char *key, uint64_t t_ns, uint64_t base_ns)
{
    char b[48];
    size_t n = trace_fmt_us(b, sizeof(b), t_ns, base_ns);

    jw_key(w, key);
    jw_raw(w, b, n);
}

static void tf_dur(struct jw *w, uint64_t start, uint64_t end)
{
    tf_ts(w, "dur", end > start ? end : start, start);
}

void trace_fmt_header(struct jw *w, const struct trace_fmt_header *h)
{
    bool cupti = h->backend && strcmp(h->backend, "cupti") == 0;

    jw_obj_begin(w);
    jw_key(w, "schemaVersion");
    jw_int(w, 1);
    jw_key(w, "distributedInfo");
    jw_obj_begin(w);
    jw_key(w, "backend");
    jw_str(w, cupti ? "nccl" : "hccl");
    jw_key(w, "rank");
    jw_int(w, h->rank >= 0 ? h->rank : 0);
    jw_key(w, "rankKnown");
    jw_bool(w, h->rank >= 0);
    jw_key(w, "world_size");
    jw_int(w, h->world_size > 0 ? h->world_size : 1);
    jw_obj_end(w);
    jw_key(w, "deviceProperties");
    jw_arr_begin(w);
    for (size_t i = 0; i < h->ndevices; i++) {
        char name[32];
        snprintf(name, sizeof(name), "%s %u", cupti ? "CUDA device" : "NPU", (unsigned)h->devices[i]);
        jw_obj_begin(w);
        jw_key(w, "id");
        jw_uint(w, h->devices[i]);
        jw_key(w, "name");
        jw_str(w, name);
        jw_obj_end(w);
    }
    jw_arr_end(w);
    jw_key(w, "baseTimeNanoseconds");
    jw_uint(w, h->base_ns);
    jw_key(w, "msmonitor");
    jw_obj_begin(w);
    jw_key(w, "activityBackend");
    jw_str(w, h->backend ? h->backend : "");
    jw_key(w, "afterWindow");
    jw_uint(w, h->after_window);
    jw_key(w, "pid");
    jw_uint(w, h->pid);
    jw_key(w, "startStep");
    jw_int(w, h->start_step);
    jw_key(w, "stopStep");
    jw_int(w, h->stop_step);
    jw_key(w, "windowEndNanoseconds");
    jw_uint(w, h->window_end_ns);
    jw_obj_end(w);
    jw_key(w, "traceEvents");
    jw_arr_begin(w);
}

const char *trace_fmt_footer(void)
{
    return "],\"displayTimeUnit\":\"ms\"}";
}

bool trace_fmt_track(const struct mon_record *r, uint32_t *ret_pid, uint32_t *ret_tid)
{
    switch (r->kind) {
    case MON_KIND_KERNEL: *ret_pid = r->u.kernel.device_id; *ret_tid = r->u.kernel.stream_id; return true;
    case MON_KIND_HCCL: *ret_pid = r->u.hccl.device_id; *ret_tid = r->u.hccl.stream_id; return true;
    case MON_KIND_MEMORY: *ret_pid = r->u.memory.device_id; *ret_tid = r->u.memory.stream_id; return true;
    case MON_KIND_MEMSET: *ret_pid = r->u.memset.device_id; *ret_tid = r->u.memset.stream_id; return true;
    case MON_KIND_MEMCPY: *ret_pid = r->u.memcpy.device_id; *ret_tid = r->u.memcpy.stream_id; return true;
    case MON_KIND_COMMUNICATION: *ret_pid = r->u.comm.device_id; *ret_tid = r->u.comm.stream_id; return true;
    case MON_KIND_MARKER:
        *ret_pid = r->u.marker.obj0;
        *ret_tid = r->u.marker.obj1;
        return r->u.marker.source_kind == 1;
    default:
        *ret_pid = mon_kind_is_api(r->kind) ? r->u.api.pid : 0;
        *ret_tid = mon_kind_is_api(r->kind) ? r->u.api.tid : 0;
        return false;
    }
}

uint64_t trace_fmt_correlation(const struct mon_record *r)
{
    switch (r->kind) {
    case MON_KIND_KERNEL: return r->u.kernel.correlation_id;
    case MON_KIND_MEMSET: return r->u.memset.correlation_id;
    case MON_KIND_MEMCPY: return r->u.memcpy.correlation_id;
    case MON_KIND_COMMUNICATION: return r->u.comm.correlation_id;
    default: return mon_kind_is_api(r->kind) ? r->u.api.correlation_id : 0;
    }
}

uint64_t trace_fmt_start(const struct mon_record *r)
{
    return mon_record_start(r); /* the window's rule (record.h) */
}

/* ph, cat, name, pid, tid, ts, dur — then the caller opens "args". */
static void tf_x(struct jw *w, const char *cat, const char *name, uint32_t pid, uint32_t tid, uint64_t start,
                 uint64_t end, uint64_t base_ns)
{
    jw_obj_begin(w);
    jw_key(w, "ph");
    jw_str(w, "X");
    jw_key(w, "cat");
    jw_str(w, cat);
    jw_key(w, "name");
    jw_str(w, name ? name : "");
    jw_key(w, "pid");
    jw_uint(w, pid);
    jw_key(w, "tid");
    jw_uint(w, tid);
    tf_ts(w, "ts", start, base_ns);
    tf_dur(w, start, end);
    jw_key(w, "args");
    jw_obj_begin(w);
    jw_key(w, "kind");
}

static void tf_kv_u(struct jw *w, const char *k, uint64_t v)
{
    jw_key(w, k);
    jw_uint(w, v);
}

static void tf_kv_s(struct jw *w, const char *k, const char *v)
{
    jw_key(w, k);
    jw_str(w, v ? v : "");
}

static void tf_end(struct jw *w)
{
    jw_obj_end(w); /* args */
    jw_obj_end(w);
}

int trace_fmt_record(struct jw *w, const struct mon_record *r, uint64_t base_ns)
{
    const char *kn = mon_kind_name(r->kind);
    char name[64];

    switch (r->kind) {
    case MON_KIND_KERNEL: {
        const struct mon_kernel *k = &r->u.kernel;
        tf_x(w, NAMES_CAT_KERNEL, k->name, k->device_id, k->stream_id, k->start, k->end, base_ns);
        jw_str(w, kn);
        tf_kv_u(w, "correlation", k->correlation_id);
        tf_kv_u(w, "device", k->device_id);
        tf_kv_u(w, "stream", k->stream_id);
        tf_kv_s(w, "type", k->type);
        break;
    }
    case MON_KIND_HCCL: {
        const struct mon_hccl *h = &r->u.hccl;
        tf_x(w, NAMES_CAT_KERNEL, h->name, h->device_id, h->stream_id, h->start, h->end, base_ns);
        jw_str(w, kn);
        jw_key(w, "bandwidth");
        jw_double(w, h->bandwidth);
        tf_kv_s(w, "commName", h->comm_name);
        tf_kv_u(w, "device", h->device_id);
        tf_kv_u(w, "stream", h->stream_id);
        break;
    }
    case MON_KIND_COMMUNICATION: {
        const struct mon_comm *c = &r->u.comm;
        tf_x(w, NAMES_CAT_KERNEL, c->name, c->device_id, c->stream_id, c->start, c->end, base_ns);
        jw_str(w, kn);
        tf_kv_s(w, "algType", c->alg_type);
        tf_kv_s(w, "commName", c->comm_name);
        tf_kv_u(w, "correlation", c->correlation_id);
        tf_kv_u(w, "count", c->count);
        tf_kv_s(w, "dataType", mon_comm_dtype_name(c->data_type));
        tf_kv_u(w, "device", c->device_id);
        tf_kv_u(w, "stream", c->stream_id);
        break;
    }
    case MON_KIND_MEMCPY: {
        const struct mon_memcpy *m = &r->u.memcpy;
        snprintf(name, sizeof(name), "Memcpy %s", mon_memcpy_kind_name(m->copy_kind));
        tf_x(w, NAMES_CAT_MEMCPY, name, m->device_id, m->stream_id, m->start, m->end, base_ns);
        jw_str(w, kn);
        tf_kv_u(w, "async", m->is_async);
        tf_kv_u(w, "bytes", m->bytes);
        tf_kv_s(w, "copyKind", mon_memcpy_kind_name(m->copy_kind));
        tf_kv_u(w, "correlation", m->correlation_id);
        tf_kv_u(w, "device", m->device_id);
        tf_kv_u(w, "stream", m->stream_id);
        break;
    }
    case MON_KIND_MEMSET: {
        const struct mon_memset *m = &r->u.memset;
        tf_x(w, NAMES_CAT_MEMSET, "Memset", m->device_id, m->stream_id, m->start, m->end, base_ns);
        jw_str(w, kn);
        tf_kv_u(w, "async", m->is_async);
        tf_kv_u(w, "bytes", m->bytes);
        tf_kv_u(w, "correlation", m->correlation_id);
        tf_kv_u(w, "device", m->device_id);
        tf_kv_u(w, "stream", m->stream_id);
        tf_kv_u(w, "value", m->value);
        break;
    }
    case MON_KIND_MEMORY: {
        const struct mon_memory *m = &r->u.memory;
        snprintf(name, sizeof(name), "Memory op %d", (int)m->op_type);
        tf_x(w, NAMES_CAT_MEMORY, name, m->device_id, m->stream_id, m->start, m->end, base_ns);
        jw_str(w, kn);
        tf_kv_u(w, "address", m->address);
        tf_kv_u(w, "bytes", m->bytes);
        tf_kv_u(w, "correlation", m->correlation_id);
        tf_kv_u(w, "device", m->device_id);
        jw_key(w, "memoryKind");
        jw_int(w, m->memory_kind);
        jw_key(w, "opType");
        jw_int(w, m->op_type);
        tf_kv_u(w, "processId", m->pid);
        tf_kv_u(w, "stream", m->stream_id);
        break;
    }
    default:
        if (!mon_kind_is_api(r->kind))
            return -ENOENT;
        tf_x(w, NAMES_CAT_RUNTIME, r->u.api.name, r->u.api.pid, r->u.api.tid, r->u.api.start, r->u.api.end, base_ns);
        jw_str(w, kn);
        tf_kv_u(w, "correlation", r->u.api.correlation_id);
        break;
    }
    tf_end(w);
    return 0;
}

int trace_fmt_range(struct jw *w, const struct pl_range *g, uint64_t base_ns)
{
    bool dev = g->done == PL_PART_DEVICE;
    uint32_t pid = dev ? g->device_id : g->pid, tid = dev ? g->stream_id : g->tid;
    uint64_t start = dev ? g->dev_start : g->host_start, end = dev ? g->dev_end : g->host_end;
    const char *cat = dev ? NAMES_CAT_DEVICE_ANNOTATION : NAMES_CAT_HOST_ANNOTATION;

    if (g->done != PL_PART_DEVICE && g->done != PL_PART_HOST)
        return -ENOENT;
    if (g->instant) {
        jw_obj_begin(w);
        jw_key(w, "ph");
        jw_str(w, "i");
        jw_key(w, "s");
        jw_str(w, "t");
        jw_key(w, "cat");
        jw_str(w, cat);
        jw_key(w, "name");
        jw_str(w, g->name);
        jw_key(w, "pid");
        jw_uint(w, pid);
        jw_key(w, "tid");
        jw_uint(w, tid);
        tf_ts(w, "ts", start ? start : end, base_ns);
        jw_key(w, "args");
        jw_obj_begin(w);
        jw_key(w, "kind");
    } else {
        tf_x(w, cat, g->name, pid, tid, start, end, base_ns);
    }
    jw_str(w, "Marker");
    tf_kv_s(w, "domain", g->domain);
    tf_kv_u(w, "id", g->id);
    if (dev) {
        tf_kv_u(w, "device", g->device_id);
        tf_kv_u(w, "stream", g->stream_id);
    }
    tf_end(w);
    return 0;
}

void trace_fmt_flow(struct jw *w, bool start, uint64_t id, uint32_t pid, uint32_t tid, uint64_t ts_ns,
                    uint64_t base_ns)
{
    jw_obj_begin(w);
    jw_key(w, "ph");
    jw_str(w, start ? "s" : "f");
    jw_key(w, "cat");
    jw_str(w, NAMES_CAT_FLOW);
    jw_key(w, "name");
    jw_str(w, NAMES_CAT_FLOW);
    jw_key(w, "id");
    jw_uint(w, id);
    jw_key(w, "pid");
    jw_uint(w, pid);
    jw_key(w, "tid");
    jw_uint(w, tid);
    tf_ts(w, "ts", ts_ns, base_ns);
    if (!start) {
        jw_key(w, "bp");
        jw_str(w, "e");
    }
    jw_obj_end(w);
}

void trace_fmt_meta(struct jw *w, const char *what, uint32_t pid, uint32_t tid, const char *text, int64_t sort)
{
    jw_obj_begin(w);
    jw_key(w, "ph");
    jw_str(w, "M");
    jw_key(w, "name");
    jw_str(w, what);
    jw_key(w, "pid");
    jw_uint(w, pid);
    jw_key(w, "tid");
    jw_uint(w, tid);
    jw_key(w, "ts");
    jw_int(w, 0);
    jw_key(w, "args");
    jw_obj_begin(w);
    if (text) {
        jw_key(w, "name");
        jw_str(w, text);
    } else {
        jw_key(w, "sort_index");
        jw_int(w, sort);
    }
    jw_obj_end(w);
    jw_obj_end(w);
}
