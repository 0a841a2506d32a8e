/* rpc_steps: getSteps (see rpc_steps.h). Rows are arrays in a fixed column order (named in
 * the reply's "columns") so that a host with many ranks answers in a compact reply. */
#include "daemon/rpc/rpc_steps.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/log.h"
#include "contract/cjx.h"

/* Replies are capped at 1 MiB (rpc_methods.c): with many ranks the newest rows per rank are
 * cut so that every rank still appears. A row is at most ~150 bytes, each rank ~130 more. */
#define REPLY_BUDGET (900u << 10)
#define ROW_BYTES_MAX 192u
#define RANK_BYTES_MAX 160u

static void failed(struct jw *w, const char *why)
{
    char msg[128];
    snprintf(msg, sizeof(msg), "failed: %s", why);
    jw_obj_begin(w);
    jw_kv_str(w, "status", msg);
    jw_obj_end(w);
}

int rpc_steps_get(struct steps_store *steps, const cJSON *req, struct jw *w)
{
    const cJSON *lastv = cjx_get(req, "last"), *jobv = cjx_get(req, "job_id");
    int64_t last = RPC_STEPS_LAST_DEFAULT, job = 0;
    struct steps_rank *rs = NULL;
    size_t n = 0, nranks = 0;
    uint64_t refused = 0, evicted = 0;
    uint64_t now = clock_mono_ns();

    if (lastv && cjx_to_i64(lastv, 1, STEPS_WINDOW, &last) != 0) {
        failed(w, "'last' must be an integer in [1, 128]");
        return 0;
    }
    if (jobv && cjx_to_i64(jobv, INT64_MIN, INT64_MAX, &job) != 0) {
        failed(w, "'job_id' must be an integer");
        return 0;
    }
    if (!steps) {
        n = 0;
    } else if (steps_snapshot(steps, &rs, &n) != 0) {
        return -ENOMEM;
    }
    if (steps)
        steps_counters(steps, &nranks, &refused, &evicted);
    if (n > 0) {
        size_t per = REPLY_BUDGET > n * RANK_BYTES_MAX ? (REPLY_BUDGET - n * RANK_BYTES_MAX) / n / ROW_BYTES_MAX : 0;
        if (per < 1)
            per = 1;
        if ((size_t)last > per)
            last = (int64_t)per; /* told to the caller as "last" */
    }
    jw_obj_begin(w);
    jw_key(w, "columns");
    jw_arr_begin(w);
    /* new columns go at the end: an older dyno reads the first seven by position */
    static const char *const cols[] = { "step", "start_ns", "wall_ns", "compute_ns", "comm_ns", "memcpy_ns", "host_ns",
                                        "wait_ns", "transfer_ns" };
    for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++)
        jw_str(w, cols[i]);
    jw_arr_end(w);
    jw_kv_uint(w, "evicted", evicted);
    jw_kv_int(w, "last", last);
    jw_key(w, "ranks");
    jw_arr_begin(w);
    for (size_t i = 0; i < n; i++) {
        const struct steps_rank *r = &rs[i];
        if (jobv && r->job != job)
            continue;
        jw_obj_begin(w);
        jw_kv_uint(w, "age_ms", now > r->updated_ns ? (now - r->updated_ns) / 1000000u : 0);
        jw_kv_int(w, "job_id", r->job);
        jw_kv_int(w, "pid", r->pid);
        jw_kv_uint(w, "plugin_dropped", r->plugin_dropped);
        if (r->pod[0]) { /* ours: the pod the rank reported (docs/deploy.md#attribution) */
            jw_kv_str(w, "pod", r->pod);
        }
        jw_kv_int(w, "rank", r->rank);
        jw_kv_str(w, "src", r->src);
        jw_key(w, "steps");
        jw_arr_begin(w);
        size_t from = r->n > (size_t)last ? r->n - (size_t)last : 0;
        for (size_t k = from; k < r->n; k++) {
            const struct datamsg_step *x = &r->rows[k];
            jw_arr_begin(w);
            jw_int(w, x->step);
            jw_uint(w, x->start_ns);
            jw_uint(w, x->wall_ns);
            jw_uint(w, x->compute_ns);
            jw_uint(w, x->comm_ns);
            jw_uint(w, x->memcpy_ns);
            jw_uint(w, x->host_ns);
            jw_uint(w, x->wait_ns);
            jw_uint(w, x->transfer_ns);
            jw_arr_end(w);
        }
        jw_arr_end(w);
        jw_obj_end(w);
    }
    jw_arr_end(w);
    jw_kv_uint(w, "refused", refused);
    jw_kv_int(w, "window", STEPS_WINDOW);
    jw_obj_end(w);
    free(rs);
    return 0;
}
