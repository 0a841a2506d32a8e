/* stepsum: step summaries for the cluster view (see stepsum.h). The completion path only
 * appends compact (start, end, class) intervals and completed step ranges under one mutex;
 * the tick sorts them and attributes each interval to the step whose range contains its
 * start. Intervals after the last completed step are kept for the next tick. */
#include "plugin/outputs/stepsum.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/jw.h"
#include "common/log.h"
#include "common/strutil.h"
#include "contract/names.h"

#define DGRAM_MAX 4096
#define ROWS_PER_DGRAM 20 /* ~160 bytes a row: well inside one datagram */

struct sstep {
    int64_t step;
    uint64_t s, e;
};

struct stepsum {
    pthread_mutex_t mu;
    int32_t rank, pid;
    struct stepsum_iv *ivs;
    size_t niv, ivcap;
    struct sstep *steps;
    size_t nsteps, stepcap;
    uint64_t dropped;    /* intervals or steps lost to the caps (cumulative, sent along) */
    bool seen_steps;     /* a step range completed this session: no interval fallback */
    int64_t ticks;
};

int stepsum_create(int32_t rank, int32_t pid, struct stepsum **ret)
{
    struct stepsum *s;

    if (!ret)
        return -EINVAL;
    s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    pthread_mutex_init(&s->mu, NULL);
    s->rank = rank;
    s->pid = pid;
    *ret = s;
    return 0;
}

void stepsum_destroy(struct stepsum *s)
{
    if (!s)
        return;
    pthread_mutex_destroy(&s->mu);
    free(s->ivs);
    free(s->steps);
    free(s);
}

/* mu held. */
static void add_iv(struct stepsum *s, uint64_t st, uint64_t en, uint32_t cls)
{
    if (en <= st)
        return;
    if (s->niv == s->ivcap) {
        size_t nc = s->ivcap ? s->ivcap * 2 : 1024;
        struct stepsum_iv *nv;
        if (s->ivcap >= STEPSUM_IV_CAP || !(nv = realloc(s->ivs, nc * sizeof(*nv)))) {
            s->dropped++;
            return;
        }
        s->ivs = nv;
        s->ivcap = nc;
    }
    s->ivs[s->niv++] = (struct stepsum_iv){ st, en, cls };
}

/* mu held. */
static void add_step(struct stepsum *s, const struct pl_range *r)
{
    int64_t n;
    uint64_t st = r->host_start, en = r->host_end;

    if (names_step_parse(r->name, &n) != 0)
        return;
    if (r->with_device && (r->parts & PL_PART_DEVICE)) {
        /* the device part ends when the step's device work does (the host part may end at
         * launch time) */
        if (r->dev_start && r->dev_start < st)
            st = r->dev_start;
        if (r->dev_end > en)
            en = r->dev_end;
    }
    if (en <= st)
        return;
    if (s->nsteps == s->stepcap) {
        size_t nc = s->stepcap ? s->stepcap * 2 : 64;
        struct sstep *nv;
        if (s->stepcap >= STEPSUM_STEP_CAP || !(nv = realloc(s->steps, nc * sizeof(*nv)))) {
            s->dropped++;
            return;
        }
        s->steps = nv;
        s->stepcap = nc;
    }
    s->steps[s->nsteps++] = (struct sstep){ n, st, en };
    s->seen_steps = true;
}

void stepsum_feed(struct stepsum *s, const struct pl_batch *b)
{
    bool locked = false;

    for (size_t i = 0; i < b->nrecs; i++) {
        const struct mon_record *r = &b->recs[i];
        uint64_t st, en;
        uint32_t cls;
        switch (r->kind) {
        case MON_KIND_KERNEL:
            st = r->u.kernel.start, en = r->u.kernel.end, cls = 0;
            break;
        case MON_KIND_COMMUNICATION:
            st = r->u.comm.start, en = r->u.comm.end, cls = 1;
            break;
        case MON_KIND_HCCL:
            st = r->u.hccl.start, en = r->u.hccl.end, cls = 3;
            break;
        case MON_KIND_MEMCPY:
            st = r->u.memcpy.start, en = r->u.memcpy.end, cls = 2;
            break;
        case MON_KIND_MEMSET:
            st = r->u.memset.start, en = r->u.memset.end, cls = 2;
            break;
        default:
            continue;
        }
        if (!locked) {
            pthread_mutex_lock(&s->mu);
            locked = true;
        }
        add_iv(s, st, en, cls);
    }
    for (size_t i = 0; i < b->nranges; i++) {
        if (!pl_range_complete(&b->ranges[i]))
            continue;
        if (!locked) {
            pthread_mutex_lock(&s->mu);
            locked = true;
        }
        add_step(s, &b->ranges[i]);
    }
    if (locked)
        pthread_mutex_unlock(&s->mu);
}

static int iv_cmp(const void *x, const void *y)
{
    const struct stepsum_iv *a = x, *b = y;
    return a->s < b->s ? -1 : a->s > b->s;
}

static int step_cmp(const void *x, const void *y)
{
    const struct sstep *a = x, *b = y;
    return a->s < b->s ? -1 : a->s > b->s;
}

/* First index whose start is >= t (ivs start-sorted). */
static size_t lower_bound(const struct stepsum_iv *ivs, size_t n, uint64_t t)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ivs[mid].s < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void stepsum_compute(const struct stepsum_iv *ivs, size_t n, uint64_t s, uint64_t e, struct datamsg_step *ret)
{
    uint64_t sums[4] = { 0, 0, 0, 0 }, covered = 0, cur_s = 0, cur_e = 0;
    bool open = false;

    ret->start_ns = s;
    ret->wall_ns = e > s ? e - s : 0;
    /* ivs are start-sorted, so the union is one sweep */
    for (size_t i = lower_bound(ivs, n, s); i < n && ivs[i].s < e; i++) {
        uint64_t a = ivs[i].s, b = ivs[i].e < e ? ivs[i].e : e;
        if (b <= a)
            continue;
        sums[ivs[i].cls < 4 ? ivs[i].cls : 0] += b - a;
        if (open && a <= cur_e) {
            if (b > cur_e)
                cur_e = b;
            continue;
        }
        if (open)
            covered += cur_e - cur_s;
        cur_s = a;
        cur_e = b;
        open = true;
    }
    if (open)
        covered += cur_e - cur_s;
    ret->compute_ns = sums[0];
    /* The Communication record spans the whole op (arrival to end), the Hccl record the
     * data movement: the difference is the wait for the other members. With only one of the
     * two kinds there is no split (all transfer). */
    ret->comm_ns = sums[1] ? sums[1] : sums[3];
    ret->transfer_ns = sums[1] && sums[3] && sums[3] < sums[1] ? sums[3] : ret->comm_ns;
    ret->wait_ns = ret->comm_ns - ret->transfer_ns;
    ret->memcpy_ns = sums[2];
    ret->host_ns = ret->wall_ns > covered ? ret->wall_ns - covered : 0;
}

struct step_rows {
    const struct datamsg_step *rows;
    size_t n;
};

static void step_rows_write(struct jw *w, const void *ctx)
{
    const struct step_rows *sr = ctx;

    jw_arr_begin(w);
    for (size_t i = 0; i < sr->n; i++)
        datamsg_step_write(w, &sr->rows[i]);
    jw_arr_end(w);
}

size_t stepsum_json(const struct datamsg_step *rows, size_t n, int32_t rank, int32_t pid, const char *src,
                    uint64_t dropped, uint64_t now_ns, char *buf, size_t cap)
{
    struct jw w;
    uint64_t total = 0;

    for (size_t i = 0; i < n; i++)
        total += rows[i].wall_ns;
    const struct datamsg m = { .kind = STEPSUM_KIND, .device_id = -1, .duration = total, .timestamp = now_ns };
    const struct step_rows sr = { rows, n };
    const struct datamsg_field extra[] = {
        { .key = "dropped", .type = DATAMSG_UINT, .u = dropped },
        { .key = "pid", .type = DATAMSG_INT, .i = pid },
        { .key = "rank", .type = DATAMSG_INT, .i = rank },
        { .key = "src", .type = DATAMSG_STR, .s = src, .slen = SIZE_MAX },
        { .key = "steps", .type = DATAMSG_FN, .fn = step_rows_write, .ctx = &sr },
    };

    jw_init(&w, buf, cap);
    if (datamsg_write(&w, &m, extra, sizeof(extra) / sizeof(extra[0])) != 0)
        return 0;
    if (w.err || w.len >= cap)
        return 0;
    return w.len;
}

static int send_rows(struct stepsum *s, const struct datamsg_step *rows, size_t n, const char *src,
                     uint64_t dropped, output_send_fn send, void *ctx, uint64_t now_ns)
{
    char buf[DGRAM_MAX + 1];
    int first_err = 0;

    for (size_t i = 0; i < n;) {
        size_t k = n - i < ROWS_PER_DGRAM ? n - i : ROWS_PER_DGRAM;
        size_t len = 0;
        while (k > 0 && (len = stepsum_json(rows + i, k, s->rank, s->pid, src, dropped, now_ns, buf,
                                            sizeof(buf))) == 0)
            k /= 2;
        if (k == 0)
            return -ENOSPC; /* cannot happen: one row is ~140 bytes */
        if (send) {
            int rc = send(ctx, buf, len);
            if (rc < 0 && !first_err)
                first_err = rc;
        }
        i += k;
    }
    return first_err;
}

int stepsum_tick(struct stepsum *s, output_send_fn send, void *ctx, uint64_t now_ns, uint64_t interval_ns)
{
    struct stepsum_iv *ivs;
    struct sstep *steps;
    struct datamsg_step *rows = NULL;
    size_t niv, nsteps, nrows = 0, keep_from;
    uint64_t dropped;
    bool seen;
    int rc = 0;

    pthread_mutex_lock(&s->mu);
    ivs = s->ivs;
    niv = s->niv;
    steps = s->steps;
    nsteps = s->nsteps;
    s->ivs = NULL;
    s->niv = s->ivcap = 0;
    s->steps = NULL;
    s->nsteps = s->stepcap = 0;
    dropped = s->dropped;
    seen = s->seen_steps;
    s->ticks++;
    pthread_mutex_unlock(&s->mu);

    if (niv)
        qsort(ivs, niv, sizeof(*ivs), iv_cmp);
    keep_from = niv; /* intervals from here on are carried to the next tick */
    if (nsteps) {
        uint64_t last_end = 0;
        qsort(steps, nsteps, sizeof(*steps), step_cmp);
        rows = calloc(nsteps, sizeof(*rows));
        if (!rows) {
            rc = -ENOMEM;
            goto out;
        }
        for (size_t i = 0; i < nsteps; i++) {
            rows[nrows].step = steps[i].step;
            stepsum_compute(ivs, niv, steps[i].s, steps[i].e, &rows[nrows]);
            nrows++;
            if (steps[i].e > last_end)
                last_end = steps[i].e;
        }
        keep_from = lower_bound(ivs, niv, last_end);
        rc = send_rows(s, rows, nrows, "step", dropped, send, ctx, now_ns);
    } else if (seen) {
        keep_from = 0; /* a step is still running: its activity waits for its range */
    } else if (niv) {
        /* no step ranges in this session (yet): one summary for the interval */
        struct datamsg_step r = { 0 };
        uint64_t e = ivs[0].e;
        for (size_t i = 0; i < niv; i++)
            if (ivs[i].e > e)
                e = ivs[i].e;
        uint64_t st = e > interval_ns && e - interval_ns < ivs[0].s ? e - interval_ns : ivs[0].s;
        stepsum_compute(ivs, niv, st, e, &r);
        r.step = s->ticks;
        rc = send_rows(s, &r, 1, "interval", dropped, send, ctx, now_ns);
    }

    /* Carry what belongs to steps not completed yet (in front of what arrived meanwhile). */
    if (keep_from < niv) {
        size_t carry = niv - keep_from;
        pthread_mutex_lock(&s->mu);
        if (carry + s->niv <= STEPSUM_IV_CAP) {
            struct stepsum_iv *nv = malloc((carry + s->niv) * sizeof(*nv));
            if (nv) {
                memcpy(nv, ivs + keep_from, carry * sizeof(*nv));
                if (s->niv)
                    memcpy(nv + carry, s->ivs, s->niv * sizeof(*nv));
                free(s->ivs);
                s->ivs = nv;
                s->niv += carry;
                s->ivcap = s->niv;
            } else {
                s->dropped += carry;
            }
        } else {
            s->dropped += carry;
        }
        pthread_mutex_unlock(&s->mu);
    }
out:
    free(rows);
    free(ivs);
    free(steps);
    return rc;
}
