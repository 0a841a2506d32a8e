/* db_rows: the DB export's row formatter (docs/design/outputs.md#tables, #string-ids): records and completed
 * marker parts become int64 rows of the incremental tables, strings become ids in first-request
 * order. Pure: no SQLite, no I/O; proc_db.c's writer commits what it builds. */
#include "plugin/outputs/db_rows.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract/names.h"
#include "plugin/outputs/outfile.h"
#include "plugin/pipeline/idmap.h"

#define DB_MAX_STRINGS (16u * 1024 * 1024)
#define DB_INVALID_U32 4294967295LL
#define DB_MARKER_CONN_OFFSET NAMES_DB_MARKER_CONN_OFFSET

const struct db_table db_rows_tables[T_INCR_COUNT] = {
#define DB_TABLE(id, ncols, real_col, cols) [T_##id] = {#id, cols, ncols, real_col},
#include "contract/dbschema.def"
#undef DB_TABLE
};

int db_rows_init(struct db_rows *p, int64_t pid)
{
    int rc;

    memset(p, 0, sizeof(*p));
    p->pid = pid;
    rc = idmap_create(DB_TASK_IDS_CAP, sizeof(int64_t), &p->task_ids);
    if (rc < 0)
        return rc;
    rc = pl_strpool_create(DB_MAX_STRINGS, &p->pool);
    if (rc < 0) {
        idmap_destroy(p->task_ids);
        p->task_ids = NULL;
    }
    return rc;
}

void db_rows_fini(struct db_rows *p)
{
    idmap_destroy(p->task_ids);
    pl_strpool_destroy(p->pool);
    for (int t = 0; t < T_INCR_COUNT; t++)
        free(p->rows[t].v);
    memset(p, 0, sizeof(*p));
}

void db_rows_clear(struct db_rows *p)
{
    for (int t = 0; t < T_INCR_COUNT; t++)
        p->rows[t].n = 0;
    p->tx_rows = 0;
}

/* Backend strings live for the process at fixed addresses (record.h): a direct-mapped cache
 * from pointer to id skips hashing the text for almost every record. */
static int64_t sid(struct db_rows *p, const char *s)
{
    size_t slot = (size_t)(((uintptr_t)s >> 3) * 0x9E3779B97F4A7C15ull >> 56); /* 8 bits */
    if (s && p->sid_cache[slot].ptr == s)
        return p->sid_cache[slot].id;
    int64_t id = pl_strpool_id(p->pool, s, NULL);
    if (s && id >= 0)
        p->sid_cache[slot] = (struct sid_slot){s, id};
    return id;
}

static int64_t *row_add(struct rows *r, int ncols)
{
    if (r->n == r->cap) {
        size_t nc = r->cap ? r->cap * 2 : 1024;
        int64_t *nv = realloc(r->v, nc * (size_t)ncols * sizeof(*nv));
        if (!nv)
            return NULL;
        r->v = nv;
        r->cap = nc;
    }
    return &r->v[r->n++ * (size_t)ncols];
}

static int64_t gtid(uint32_t pid, uint32_t tid)
{
    return (int64_t)(((uint64_t)pid << 32) | tid);
}

#define ADD_ROW(p, t, r)                                             \
    int64_t *r = row_add(&(p)->rows[t], db_rows_tables[t].ncols);      \
    if (!r)                                                          \
        return -ENOMEM

static int add_api(struct db_rows *p, const struct mon_record *rec)
{
    const struct mon_api *a = &rec->u.api;
    int64_t type = rec->kind == MON_KIND_ACL_API       ? DBSCHEMA_API_TYPE_ACL
                   : rec->kind == MON_KIND_RUNTIME_API ? DBSCHEMA_API_TYPE_RUNTIME
                                                       : DBSCHEMA_API_TYPE_NODE;
    int64_t name = sid(p, a->name);
    ADD_ROW(p, T_CANN_API, r);
    p->tx_rows++;
    r[0] = (int64_t)a->start; r[1] = (int64_t)a->end; r[2] = type;
    r[3] = gtid(a->pid, a->tid); r[4] = (int64_t)a->correlation_id; r[5] = name;
    return 0;
}

static int add_kernel(struct db_rows *p, const struct mon_kernel *k)
{
    int64_t name = sid(p, k->name), type = sid(p, k->type), na = sid(p, "N/A");
    int64_t task = p->next_task_id++;
    ADD_ROW(p, T_TASK, t);
    t[0] = (int64_t)k->start; t[1] = (int64_t)k->end; t[2] = k->device_id; t[3] = (int64_t)k->correlation_id;
    t[4] = task; t[5] = p->pid; t[6] = type; t[7] = DB_INVALID_U32; t[8] = k->stream_id;
    t[9] = DB_INVALID_U32; t[10] = DB_INVALID_U32;
    ADD_ROW(p, T_COMPUTE_TASK_INFO, c);
    c[0] = name; c[1] = task; c[2] = DB_INVALID_U32; c[3] = DB_INVALID_U32; c[4] = type;
    for (int i = 5; i < 15; i++)
        c[i] = na;
    p->tx_rows += 2;
    return 0;
}

static int add_comm(struct db_rows *p, const struct mon_comm *c)
{
    int64_t group = pl_strpool_id(p->pool, c->comm_name, NULL);
    uint64_t k = group >= 0 ? (*pl_strpool_counter(p->pool, (size_t)group))++ : 0;
    const char *cname = c->comm_name ? c->comm_name : "";
    char hash[24], opname[1024];
    int hl = snprintf(hash, sizeof(hash), "%llu",
                      (unsigned long long)outfile_hash_id(cname, strlen(cname)));
    const char *g = hl > 3 ? hash + hl - 3 : hash;
    char *op = opname;
    char *heap = NULL;
    int need = snprintf(opname, sizeof(opname), "%s_%s_%llu_1", c->name ? c->name : "", g, (unsigned long long)k);
    if (need >= (int)sizeof(opname)) {
        heap = malloc((size_t)need + 1);
        if (!heap)
            return -ENOMEM;
        snprintf(heap, (size_t)need + 1, "%s_%s_%llu_1", c->name ? c->name : "", g, (unsigned long long)k);
        op = heap;
    }
    int64_t opid = pl_strpool_id(p->pool, op, NULL); /* our own buffer: not for the pointer cache */
    free(heap);
    int64_t alg = sid(p, c->alg_type), optype = sid(p, c->name);
    ADD_ROW(p, T_COMMUNICATION_OP, r);
    r[0] = opid; r[1] = (int64_t)c->start; r[2] = (int64_t)c->end; r[3] = (int64_t)c->correlation_id;
    r[4] = group; r[5] = p->next_op_id++; r[6] = 0; r[7] = 0; r[8] = c->data_type; r[9] = alg;
    r[10] = (int64_t)c->count; r[11] = optype; r[12] = c->device_id;
    p->tx_rows++;
    return 0;
}

/* Marker records only request their string ids (docs/design/outputs.md#string-ids, every flag); rows come from the
 * completed parts (add_range). */
static void marker_ids(struct db_rows *p, const struct mon_marker *m)
{
    if (m->source_kind == 0) {
        (void)sid(p, m->name);
        (void)sid(p, m->domain);
    } else {
        (void)sid(p, DBSCHEMA_MSTX_TASK_TYPE);
        /* docs/design/outputs.md#tables: a device START allocates its range's globalTaskId, so the ids follow the
         * order of the START records whatever order the parts complete in. */
        if ((m->flag & MON_MARKER_START) && !idmap_get(p->task_ids, m->id)) {
            int64_t *slot = idmap_put(p->task_ids, m->id, NULL);
            *slot = p->next_task_id++;
        }
    }
}

/* The globalTaskId of a completed device part: the one its START allocated, else a new one
 * (instants; a START evicted from the bounded map). */
static int64_t device_task_id(struct db_rows *p, const struct pl_range *m)
{
    int64_t *slot = m->instant ? NULL : idmap_get(p->task_ids, m->id);
    int64_t id;

    if (!slot)
        return p->next_task_id++;
    id = *slot;
    idmap_del(p->task_ids, m->id);
    return id;
}

/* Host part → MSTX_EVENTS (globalTid from START, endGlobalTid from END); device part → TASK
 * (deviceId/streamId from the END record, a new globalTaskId). */
int db_rows_add_range(struct db_rows *p, const struct pl_range *m)
{
    if (m->done == PL_PART_HOST) {
        int64_t name = sid(p, m->name), domain = sid(p, m->domain);
        ADD_ROW(p, T_MSTX_EVENTS, r);
        r[0] = (int64_t)m->host_start; r[1] = (int64_t)m->host_end; r[2] = m->instant ? 0 : DBSCHEMA_MSTX_RANGE;
        r[3] = r[4] = DB_INVALID_U32; r[5] = name; r[6] = gtid(m->pid, m->tid);
        r[7] = gtid(m->end_pid, m->end_tid); r[8] = domain; r[9] = (int64_t)(m->id + DB_MARKER_CONN_OFFSET);
    } else {
        int64_t type = sid(p, DBSCHEMA_MSTX_TASK_TYPE);
        ADD_ROW(p, T_TASK, t);
        t[0] = (int64_t)m->dev_start; t[1] = (int64_t)m->dev_end; t[2] = m->device_id;
        t[3] = (int64_t)(m->id + DB_MARKER_CONN_OFFSET); t[4] = device_task_id(p, m); t[5] = p->pid; t[6] = type;
        t[7] = DB_INVALID_U32; t[8] = m->stream_id; t[9] = DB_INVALID_U32; t[10] = DB_INVALID_U32;
    }
    p->tx_rows++;
    return 0;
}

static int add_extra(struct db_rows *p, const struct mon_record *rec)
{
    switch (rec->kind) {
    case MON_KIND_HCCL: {
        const struct mon_hccl *h = &rec->u.hccl;
        int64_t name = sid(p, h->name), comm = sid(p, h->comm_name);
        ADD_ROW(p, T_MSMONITOR_HCCL, r);
        r[0] = (int64_t)h->start; r[1] = (int64_t)h->end; r[2] = h->device_id; r[3] = h->stream_id;
        memcpy(&r[4], &h->bandwidth, sizeof(double));
        r[5] = name; r[6] = comm; r[7] = p->pid;
        break;
    }
    case MON_KIND_MEMORY: {
        const struct mon_memory *m = &rec->u.memory;
        ADD_ROW(p, T_MSMONITOR_MEMORY, r);
        r[0] = (int64_t)m->start; r[1] = (int64_t)m->end; r[2] = m->device_id; r[3] = m->stream_id;
        r[4] = (int64_t)m->correlation_id; r[5] = m->op_type; r[6] = m->memory_kind;
        r[7] = (int64_t)m->address; r[8] = (int64_t)m->bytes; r[9] = m->pid;
        break;
    }
    case MON_KIND_MEMSET: {
        const struct mon_memset *m = &rec->u.memset;
        ADD_ROW(p, T_MSMONITOR_MEMSET, r);
        r[0] = (int64_t)m->start; r[1] = (int64_t)m->end; r[2] = m->device_id; r[3] = m->stream_id;
        r[4] = (int64_t)m->correlation_id; r[5] = m->value; r[6] = (int64_t)m->bytes; r[7] = m->is_async;
        break;
    }
    case MON_KIND_MEMCPY: {
        const struct mon_memcpy *m = &rec->u.memcpy;
        ADD_ROW(p, T_MSMONITOR_MEMCPY, r);
        r[0] = (int64_t)m->start; r[1] = (int64_t)m->end; r[2] = m->device_id; r[3] = m->stream_id;
        r[4] = (int64_t)m->correlation_id; r[5] = m->copy_kind; r[6] = (int64_t)m->bytes; r[7] = m->is_async;
        break;
    }
    default:
        return 0;
    }
    p->extra_rows = true;
    p->tx_rows++;
    return 0;
}


int db_rows_add_record(struct db_rows *p, const struct mon_record *rec)
{
    if (mon_kind_is_api(rec->kind))
        return add_api(p, rec);
    switch (rec->kind) {
    case MON_KIND_KERNEL: return add_kernel(p, &rec->u.kernel);
    case MON_KIND_COMMUNICATION: return add_comm(p, &rec->u.comm);
    case MON_KIND_MARKER:
        marker_ids(p, &rec->u.marker);
        return 0;
    default: return add_extra(p, rec);
    }
}
