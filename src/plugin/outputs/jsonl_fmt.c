/* jsonl_fmt: the JSONL line formatter (docs/design/outputs.md#line-shapes): sorted-key lines written straight
 * into the caller's buffer, no allocation and no I/O; proc_jsonl.c writes what it produces. */
#include "plugin/outputs/jsonl_fmt.h"

#include <string.h>

#include "common/jw.h"

/* ---- line formatting (no I/O): straight into the caller's buffer, whose room the caller
 * guarantees (JSONL_FMT_FIXED + 6 bytes per string byte + 2 quotes per string) ---- */

/* A literal's bytes at o; o is evaluated once, so a field call can be nested as the argument
 * (a macro using o twice ran every nested field twice: same bytes, double the work). */
static inline char *lit(char *o, const char *s, size_t n)
{
    memcpy(o, s, n);
    return o + n;
}
#define LIT(o, s) lit((o), (s), sizeof(s) - 1)

static const char digits2[201] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                 "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                 "8081828384858687888990919293949596979899";

/* Exactly 4 / 8 digits of v (v < 10^4 / 10^8), 32-bit arithmetic only. */
static inline char *put4(char *o, uint32_t v)
{
    memcpy(o, digits2 + (v / 100) * 2, 2);
    memcpy(o + 2, digits2 + (v % 100) * 2, 2);
    return o + 4;
}

static inline char *put8(char *o, uint32_t v)
{
    return put4(put4(o, v / 10000), v % 10000);
}

/* v < 10^8, no leading zeros: the digit count first, then the digits straight into place
 * from the right (no scratch copy; inlined, so each call site's branches predict alone —
 * deviceId is always 1 digit, a correlation id 5–7). */
static inline char *put_u32_small(char *o, uint32_t v)
{
    size_t n = v < 10 ? 1 : v < 100 ? 2 : v < 1000 ? 3 : v < 10000 ? 4 : v < 100000 ? 5 : v < 1000000 ? 6 : v < 10000000 ? 7 : 8;
    char *e = o + n, *q = e;

    while (v >= 100) {
        q -= 2;
        memcpy(q, digits2 + (v % 100) * 2, 2);
        v /= 100;
    }
    if (v >= 10)
        memcpy(q - 2, digits2 + v * 2, 2);
    else
        q[-1] = (char)('0' + v);
    return e;
}

/* Decimal of v. Timestamps have 19 digits, so the number is cut into 8-digit groups once
 * (two 64-bit divisions by a constant) and each group is formatted with 32-bit arithmetic. */
static inline char *put_u64(char *o, uint64_t v)
{
    uint64_t hi;

    if (v < 100000000u)
        return put_u32_small(o, (uint32_t)v);
    hi = v / 100000000u;
    if (hi < 100000000u) {
        o = put_u32_small(o, (uint32_t)hi);
    } else {
        o = put_u32_small(o, (uint32_t)(hi / 100000000u));
        o = put8(o, (uint32_t)(hi % 100000000u));
    }
    return put8(o, (uint32_t)(v % 100000000u));
}

/* A JSON string of s[0..n) with jw's escaping (nlohmann-compatible); NULL writes "". */
static char *put_str(char *o, const char *s, size_t n)
{
    *o++ = '"';
    if (n) {
        long r = jw_escape(o, n * 6, s, n);
        if (r > 0)
            o += r;
    }
    *o++ = '"';
    return o;
}

/* String i of st: copied when already escaped. */
static char *put_st(char *o, const struct jsonl_strs *st, size_t i)
{
    if (!st->escaped[i])
        return put_str(o, st->s[i], st->n[i]);
    *o++ = '"';
    memcpy(o, st->s[i], st->n[i]);
    o += st->n[i];
    *o++ = '"';
    return o;
}

size_t jsonl_fmt_escape(char *dst, const char *s, size_t n)
{
    long r = n ? jw_escape(dst, n * 6, s, n) : 0;
    return r > 0 ? (size_t)r : 0;
}

size_t jsonl_fmt_slen(const char *s)
{
    return s ? strlen(s) : 0;
}

/* Bound of one line: fixed part plus the worst-case escaped strings. */
size_t jsonl_fmt_bound(size_t str_bytes)
{
    return JSONL_FMT_FIXED + str_bytes * 6;
}

/* "correlationId":c,"deviceId":d,"endNs":e — the run of sorted keys most device kinds share. */
static inline char *put_corr_dev_end(char *o, uint64_t corr, uint64_t dev, uint64_t end)
{
    o = LIT(o, "\"correlationId\":");
    o = put_u64(o, corr);
    o = LIT(o, ",\"deviceId\":");
    o = put_u64(o, dev);
    o = LIT(o, ",\"endNs\":");
    return put_u64(o, end);
}

/* ,"startNs":s,"streamId":t — every device kind has both, next to each other. */
static inline char *put_start_stream(char *o, uint64_t start, uint64_t stream)
{
    o = LIT(o, ",\"startNs\":");
    o = put_u64(o, start);
    o = LIT(o, ",\"streamId\":");
    return put_u64(o, stream);
}

/* "domain":..,"endNs":..,"id":..,"kind":"Marker","name":.. — the middle both parts share. */
static inline char *put_marker_mid(char *o, const struct pl_range *l, uint64_t end, size_t nlen, size_t dlen)
{
    o = LIT(o, "\"domain\":");
    o = put_str(o, l->domain, dlen);
    o = LIT(o, ",\"endNs\":");
    o = put_u64(o, end);
    o = LIT(o, ",\"id\":");
    o = put_u64(o, l->id);
    o = LIT(o, ",\"kind\":\"Marker\",\"name\":");
    return put_str(o, l->name, nlen);
}

/* The line of the part r completes: host lines take processId/threadId from the END record
 * (the record itself for instants), device lines deviceId/streamId likewise (docs/design/outputs.md#line-shapes). */
char *jsonl_fmt_marker(char *o, const struct pl_range *l, size_t nlen, size_t dlen)
{
    if (l->done == PL_PART_HOST) {
        o = put_marker_mid(LIT(o, "{"), l, l->host_end, nlen, dlen);
        o = LIT(o, ",\"processId\":");
        o = put_u64(o, l->end_pid);
        o = LIT(o, ",\"sourceKind\":\"Host\",\"startNs\":");
        o = put_u64(o, l->host_start);
        o = LIT(o, ",\"threadId\":");
        o = put_u64(o, l->end_tid);
    } else {
        o = LIT(o, "{\"deviceId\":");
        o = put_u64(o, l->device_id);
        o = put_marker_mid(LIT(o, ","), l, l->dev_end, nlen, dlen);
        o = put_start_stream(LIT(o, ",\"sourceKind\":\"Device\""), l->dev_start, l->stream_id);
    }
    *o++ = '}';
    return o;
}


size_t jsonl_fmt_string_ptrs(const struct mon_record *r, const char **s)
{
    size_t k = 0;
    if (mon_kind_is_api(r->kind)) {
        s[k++] = mon_kind_name(r->kind);
        s[k++] = r->u.api.name;
    } else if (r->kind == MON_KIND_KERNEL) {
        s[k++] = r->u.kernel.name;
        s[k++] = r->u.kernel.type;
    } else if (r->kind == MON_KIND_COMMUNICATION) {
        s[k++] = r->u.comm.alg_type;
        s[k++] = r->u.comm.comm_name;
        s[k++] = r->u.comm.name;
    } else if (r->kind == MON_KIND_HCCL) {
        s[k++] = r->u.hccl.comm_name;
        s[k++] = r->u.hccl.name;
    }
    return k;
}

size_t jsonl_fmt_strings(const struct mon_record *r, struct jsonl_strs *ret)
{
    size_t k = jsonl_fmt_string_ptrs(r, ret->s);

    ret->total = 0;
    for (size_t i = 0; i < k; i++) {
        ret->n[i] = jsonl_fmt_slen(ret->s[i]);
        ret->escaped[i] = false;
        ret->total += ret->n[i];
    }
    return k;
}

/* A key (the literal with its leading '{' or ',') and its value: one field of a line. */
#define PUT_KU(o, key, v) put_u64(LIT(o, key), (v))
#define PUT_KS(o, key, st, i) put_st(LIT(o, key), (st), (i))

/* Serialise a non-marker record whose strings st holds; NULL if the kind has no line. */
char *jsonl_fmt_record(char *o, const struct mon_record *r, const struct jsonl_strs *st)
{
    if (mon_kind_is_api(r->kind)) {
        const struct mon_api *a = &r->u.api;
        o = PUT_KU(o, "{\"correlationId\":", a->correlation_id);
        o = PUT_KU(o, ",\"endNs\":", a->end);
        o = PUT_KS(PUT_KS(o, ",\"kind\":", st, 0), ",\"name\":", st, 1);
        o = PUT_KU(o, ",\"processId\":", a->pid);
        o = PUT_KU(PUT_KU(o, ",\"startNs\":", a->start), ",\"threadId\":", a->tid);
    } else if (r->kind == MON_KIND_KERNEL) {
        const struct mon_kernel *k = &r->u.kernel;
        o = put_corr_dev_end(LIT(o, "{"), k->correlation_id, k->device_id, k->end);
        o = PUT_KS(o, ",\"kind\":\"Kernel\",\"name\":", st, 0);
        o = PUT_KS(put_start_stream(o, k->start, k->stream_id), ",\"type\":", st, 1);
    } else if (r->kind == MON_KIND_COMMUNICATION) {
        const struct mon_comm *c = &r->u.comm;
        const char *dt = mon_comm_dtype_name(c->data_type);
        o = PUT_KS(PUT_KS(o, "{\"algType\":", st, 0), ",\"commName\":", st, 1);
        o = PUT_KU(PUT_KU(o, ",\"correlationId\":", c->correlation_id), ",\"count\":", c->count);
        o = put_str(LIT(o, ",\"dataType\":"), dt, jsonl_fmt_slen(dt));
        o = PUT_KU(PUT_KU(o, ",\"deviceId\":", c->device_id), ",\"endNs\":", c->end);
        o = PUT_KS(o, ",\"kind\":\"Communication\",\"name\":", st, 2);
        o = put_start_stream(o, c->start, c->stream_id);
    } else if (r->kind == MON_KIND_HCCL) {
        const struct mon_hccl *h = &r->u.hccl;
        o = LIT(o, "{\"bandWidth\":");
        int n = jw_fmt_double(o, 40, h->bandwidth);
        if (n > 0)
            o += n;
        o = PUT_KS(o, ",\"commName\":", st, 0);
        o = PUT_KU(PUT_KU(o, ",\"deviceId\":", h->device_id), ",\"endNs\":", h->end);
        o = PUT_KS(o, ",\"kind\":\"Hccl\",\"name\":", st, 1);
        o = put_start_stream(o, h->start, h->stream_id);
    } else if (r->kind == MON_KIND_MEMORY) {
        const struct mon_memory *m = &r->u.memory;
        o = PUT_KU(PUT_KU(o, "{\"address\":", m->address), ",\"bytes\":", m->bytes);
        o = put_corr_dev_end(LIT(o, ","), m->correlation_id, m->device_id, m->end);
        o = LIT(o, ",\"kind\":\"Memory\",\"memoryKind\":");
        o = m->memory_kind == 1 ? LIT(o, "\"DEVICE\"") : LIT(o, "\"UNKNOWN\"");
        o = LIT(o, ",\"operationType\":");
        o = m->op_type == 1 ? LIT(o, "\"RELEASE\"") : LIT(o, "\"ALLOCATION\"");
        o = PUT_KU(o, ",\"processId\":", m->pid);
        o = put_start_stream(o, m->start, m->stream_id);
    } else if (r->kind == MON_KIND_MEMSET) {
        const struct mon_memset *m = &r->u.memset;
        o = PUT_KU(o, "{\"bytes\":", m->bytes);
        o = put_corr_dev_end(LIT(o, ","), m->correlation_id, m->device_id, m->end);
        o = m->is_async ? LIT(o, ",\"isAsync\":true") : LIT(o, ",\"isAsync\":false");
        o = put_start_stream(LIT(o, ",\"kind\":\"MemSet\""), m->start, m->stream_id);
        o = PUT_KU(o, ",\"value\":", m->value);
    } else if (r->kind == MON_KIND_MEMCPY) {
        const struct mon_memcpy *m = &r->u.memcpy;
        const char *ck = mon_memcpy_kind_name(m->copy_kind);
        o = PUT_KU(o, "{\"bytes\":", m->bytes);
        o = put_str(LIT(o, ",\"copyKind\":"), ck, jsonl_fmt_slen(ck));
        o = put_corr_dev_end(LIT(o, ","), m->correlation_id, m->device_id, m->end);
        o = m->is_async ? LIT(o, ",\"isAsync\":true") : LIT(o, ",\"isAsync\":false");
        o = put_start_stream(LIT(o, ",\"kind\":\"MemCpy\""), m->start, m->stream_id);
    } else {
        return NULL;
    }
    *o++ = '}';
    return o;
}

