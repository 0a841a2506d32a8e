/* cmd_steps: `dyno steps` (see cmd_steps.h): getSteps on every host, one merged view per
 * window — median/p99/max step time and the slow ranks by the median/MAD rule of
 * docs/cluster.md §4 — as text or one JSON object; --watch repeats it. */
#include "cli/cmd_steps.h"

#include <errno.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/cli_buf.h"
#include "cli/cli_gather.h"
#include "cli/cli_val.h"
#include "cli/cmd.h"
#include "cli/hosts.h"
#include "cli/rpc_client.h"
#include "common/log.h"
#include "common/strutil.h"

/* ---------- the command ---------- */

static const struct cli_flag steps_flags[] = {
    {"count", CLI_FLAG_VALUE, false, "0", "With --watch: stop after this many views (0 = until interrupted)"},
    {"interval-s", CLI_FLAG_VALUE, false, "2", "With --watch: seconds between views"},
    {"job-id", CLI_FLAG_VALUE, false, NULL, "Only this job's ranks"},
    {"json", CLI_FLAG_BOOL, false, NULL, "Print one JSON object per view"},
    {"last", CLI_FLAG_VALUE, false, "64", "Newest steps per rank to merge (1..128)"},
    {"mad-k", CLI_FLAG_VALUE, false, "3", "Slow when the excess is above K scaled MADs"},
    {"min-ranks", CLI_FLAG_VALUE, false, "3", "Judge a step only when this many ranks have it"},
    {"min-steps", CLI_FLAG_VALUE, false, "3", "Slow only after this many consecutive slow steps"},
    {"threshold", CLI_FLAG_VALUE, false, "0.1", "Slow when step time > median * (1 + THRESHOLD)"},
    {"watch", CLI_FLAG_BOOL, false, NULL, "Repeat the view every --interval-s seconds"},
};

struct steps_opts {
    struct slowrank_rule rule;
    int64_t count, interval_s, last;
    bool json, watch;
};

static int parse_opts(const struct cli_args *a, struct steps_opts *o, char *err, size_t errcap)
{
    const char *v;
    int64_t i;
    double d;

    o->rule = (struct slowrank_rule)SLOWRANK_RULE_DEFAULT;
    o->json = cli_flags_bool(a, "json");
    o->watch = cli_flags_bool(a, "watch");
    if (cli_val_i64("count", cli_flags_get(a, "count"), 0, INT32_MAX, "Must be a non-negative integer", &o->count,
                    err, errcap) < 0 ||
        cli_val_i64("interval-s", cli_flags_get(a, "interval-s"), 1, 86400, "Must be an integer in [1, 86400]",
                    &o->interval_s, err, errcap) < 0 ||
        cli_val_i64("last", cli_flags_get(a, "last"), 1, 128, "Must be an integer in [1, 128]", &o->last, err,
                    errcap) < 0 ||
        cli_val_i64("min-steps", cli_flags_get(a, "min-steps"), 1, 128, "Must be an integer in [1, 128]", &i, err,
                    errcap) < 0)
        return -EINVAL;
    o->rule.min_steps = (uint32_t)i;
    if (cli_val_i64("min-ranks", cli_flags_get(a, "min-ranks"), 1, 1 << 20, "Must be a positive integer", &i, err,
                    errcap) < 0)
        return -EINVAL;
    o->rule.min_ranks = (uint32_t)i;
    v = cli_flags_get(a, "threshold");
    if (str_to_decimal(v, &d) != 0 || !(d >= 0) || d > 100) {
        cli_val_err(err, errcap, "threshold", v, "Must be a number in [0, 100]");
        return -EINVAL;
    }
    o->rule.threshold = d;
    v = cli_flags_get(a, "mad-k");
    if (str_to_decimal(v, &d) != 0 || !(d >= 0) || d > 1000) {
        cli_val_err(err, errcap, "mad-k", v, "Must be a number in [0, 1000]");
        return -EINVAL;
    }
    o->rule.mad_k = d;
    v = cli_flags_get(a, "job-id");
    if (v && cli_val_i64("job-id", v, 0, INT64_MAX, "Must be an integer in [0, 9223372036854775807]", &i, err,
                         errcap) < 0)
        return -EINVAL;
    return 0;
}

static int steps_prepare(const struct cli_args *a, struct cmd_req *req, char *err, size_t errcap)
{
    struct steps_opts o;
    const char *job = cli_flags_get(a, "job-id");

    if (parse_opts(a, &o, err, errcap) < 0)
        return -EINVAL;
    cli_buf_printf(&req->body, "{\"fn\":\"getSteps\",\"last\":%lld", (long long)o.last);
    if (job)
        cli_buf_printf(&req->body, ",\"job_id\":%s", job);
    cli_buf_puts(&req->body, "}");
    return req->body.err;
}

static uint64_t u64_of(const cJSON *v)
{
    return (uint64_t)cli_json_i64(v, 0, INT64_MAX, 0);
}

/* The ranks of all replies as merge input. Samples are owned by *ret_samples. */
static int collect(const struct cli_reply *r, size_t nh, struct slowrank_in **ret_in, size_t *ret_n,
                   struct slowrank_sample **ret_samples)
{
    size_t nr = 0, ns = 0;
    const cJSON *rk, *row;
    for (size_t i = 0; i < nh; i++) {
        const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(r[i].json, "ranks");
        cJSON_ArrayForEach(rk, ranks) {
            nr++;
            ns += (size_t)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(rk, "steps"));
        }
    }
    struct slowrank_in *in = calloc(nr ? nr : 1, sizeof(*in));
    struct slowrank_sample *s = calloc(ns ? ns : 1, sizeof(*s));
    if (!in || !s) {
        free(in);
        free(s);
        return -ENOMEM;
    }
    size_t k = 0, q = 0;
    for (size_t i = 0; i < nh; i++) {
        const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(r[i].json, "ranks");
        cJSON_ArrayForEach(rk, ranks) {
            struct slowrank_in *x = &in[k++];
            const cJSON *f;
            x->host = r[i].host;
            f = cJSON_GetObjectItemCaseSensitive(rk, "rank");
            x->rank = (int32_t)cli_json_i64(f, INT32_MIN, INT32_MAX, -1);
            f = cJSON_GetObjectItemCaseSensitive(rk, "pid");
            x->pid = (int32_t)cli_json_i64(f, INT32_MIN, INT32_MAX, 0);
            f = cJSON_GetObjectItemCaseSensitive(rk, "job_id");
            x->job = cli_json_i64(f, INT64_MIN, INT64_MAX, 0);
            x->s = &s[q];
            cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(rk, "steps")) {
                /* columns: step, start_ns, wall_ns, compute_ns, comm_ns, memcpy_ns, host_ns
                 * [, wait_ns, transfer_ns] (an older daemon sends the first seven) */
                if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) < 7 || !cJSON_IsNumber(row->child))
                    continue;
                struct slowrank_sample *y = &s[q];
                const cJSON *c = row->child;
                y->step = cli_json_i64(c, INT64_MIN, INT64_MAX, 0);
                c = c->next->next;
                y->wall = u64_of(c);
                y->compute = u64_of(c = c->next);
                y->comm = u64_of(c = c->next);
                y->memcpy = u64_of(c = c->next);
                y->host = u64_of(c = c->next);
                y->transfer = y->comm;
                if (c->next && c->next->next) {
                    y->wait = u64_of(c->next);
                    y->transfer = u64_of(c->next->next);
                    if (y->wait > y->comm || y->transfer > y->comm) {
                        y->wait = 0; /* inconsistent: no split */
                        y->transfer = y->comm;
                    }
                }
                q++;
                x->n++;
            }
        }
    }
    *ret_in = in;
    *ret_n = nr;
    *ret_samples = s;
    return 0;
}

/* The pod a rank reported (getSteps "pod", docs/deploy.md#attribution): "" when none. Looked up
 * in its host's reply by pid and rank, so the merge input stays the contract's. */
static const char *rank_pod(const struct cli_reply *r, size_t nh, const struct slowrank_in *x)
{
    const cJSON *rk;
    for (size_t i = 0; i < nh; i++) {
        if (r[i].host != x->host)
            continue;
        cJSON_ArrayForEach(rk, cJSON_GetObjectItemCaseSensitive(r[i].json, "ranks")) {
            const cJSON *pod = cJSON_GetObjectItemCaseSensitive(rk, "pod");
            if (cli_json_i64(cJSON_GetObjectItemCaseSensitive(rk, "pid"), INT32_MIN, INT32_MAX, 0) == x->pid &&
                cli_json_i64(cJSON_GetObjectItemCaseSensitive(rk, "rank"), INT32_MIN, INT32_MAX, -1) == x->rank &&
                cJSON_IsString(pod))
                return pod->valuestring;
        }
    }
    return "";
}

static void print_view(const struct steps_opts *o, const struct cli_targets *t, const struct cli_reply *r,
                       const struct slowrank_in *in, const struct slowrank_result *res, FILE *out)
{
    size_t nfail = 0;
    for (size_t i = 0; i < t->hosts->n; i++)
        nfail += r[i].failed;
    if (o->json) {
        cJSON *root = cJSON_CreateObject(), *fh = cJSON_AddArrayToObject(root, "failed_hosts");
        for (size_t i = 0; i < t->hosts->n; i++) {
            if (!r[i].failed)
                continue;
            cJSON *h = cJSON_CreateObject();
            cJSON_AddStringToObject(h, "host", r[i].host ? r[i].host : t->hosts->v[i]);
            cJSON_AddStringToObject(h, "error", r[i].err);
            cJSON_AddItemToArray(fh, h);
        }
        cJSON_AddNumberToObject(root, "hosts", (double)t->hosts->n);
        cJSON_AddNumberToObject(root, "ranks", (double)res->ranks);
        cJSON *rule = cJSON_AddObjectToObject(root, "rule");
        cJSON_AddNumberToObject(rule, "mad_k", o->rule.mad_k);
        cJSON_AddNumberToObject(rule, "min_ranks", o->rule.min_ranks);
        cJSON_AddNumberToObject(rule, "min_steps", o->rule.min_steps);
        cJSON_AddNumberToObject(rule, "threshold", o->rule.threshold);
        cJSON *sr = cJSON_AddArrayToObject(root, "slow_ranks");
        for (size_t i = 0; i < res->nslow; i++) {
            const struct slowrank_slow *s = &res->slow[i];
            const struct slowrank_in *x = &in[s->rank_index];
            cJSON *e = cJSON_CreateObject(), *ex;
            cJSON_AddStringToObject(e, "cause", slowrank_cause_name(s->cause));
            cJSON_AddNumberToObject(e, "cost_ms", round(s->cost_ms * 1000) / 1000);
            cJSON_AddNumberToObject(e, "cost_to_step", (double)s->cost_last_step);
            ex = cJSON_AddObjectToObject(e, "excess_ms");
            cJSON_AddNumberToObject(ex, "communication", s->excess_ms[1]);
            cJSON_AddNumberToObject(ex, "compute", s->excess_ms[0]);
            cJSON_AddNumberToObject(ex, "host", s->excess_ms[2]);
            cJSON_AddStringToObject(e, "host", x->host);
            cJSON_AddNumberToObject(e, "job_id", (double)x->job);
            cJSON_AddNumberToObject(e, "last_step", (double)s->last_step);
            cJSON_AddNumberToObject(e, "pid", x->pid);
            if (rank_pod(r, t->hosts->n, x)[0])
                cJSON_AddStringToObject(e, "pod", rank_pod(r, t->hosts->n, x));
            cJSON_AddNumberToObject(e, "rank", x->rank);
            cJSON_AddNumberToObject(e, "ratio", round(s->ratio * 1000) / 1000);
            cJSON_AddNumberToObject(e, "since_step", (double)s->since_step);
            cJSON_AddNumberToObject(e, "slow_steps", s->run);
            cJSON_AddItemToArray(sr, e);
        }
        cJSON *st = cJSON_AddObjectToObject(root, "step_time_ms");
        cJSON_AddNumberToObject(st, "max", res->max_ms);
        cJSON_AddNumberToObject(st, "median", res->median_ms);
        cJSON_AddNumberToObject(st, "p99", res->p99_ms);
        cJSON *w = cJSON_AddObjectToObject(root, "window");
        cJSON_AddNumberToObject(w, "first_step", (double)res->first_step);
        cJSON_AddNumberToObject(w, "last_step", (double)res->last_step);
        cJSON_AddNumberToObject(w, "steps", (double)res->judged_steps);
        char *text = cJSON_PrintUnformatted(root);
        if (text)
            fprintf(out, "%s\n", text);
        free(text);
        cJSON_Delete(root);
        fflush(out);
        return;
    }
    if (o->watch) {
        char when[32];
        time_t now = time(NULL);
        struct tm tm;
        strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime_r(&now, &tm));
        fprintf(out, "--- %s\n", when);
    }
    char esc[sizeof(r[0].err)];
    for (size_t i = 0; i < t->hosts->n; i++)
        if (r[i].failed)
            fprintf(out, "[%s] ERROR: %s\n", t->hosts->v[i], cli_term_str(r[i].err, esc, sizeof(esc)));
    if (res->judged_steps == 0) {
        fprintf(out, "steps: no step judged yet (%zu ranks on %zu hosts; a step needs %u ranks)\n", res->ranks,
                t->hosts->n - nfail, o->rule.min_ranks);
    } else {
        fprintf(out, "steps %lld-%lld (%zu judged, %zu ranks, %zu hosts): step time median %.2f ms, p99 %.2f ms, "
                "max %.2f ms\n", (long long)res->first_step, (long long)res->last_step, res->judged_steps,
                res->ranks, t->hosts->n - nfail, res->median_ms, res->p99_ms, res->max_ms);
    }
    fprintf(out, "slow ranks: %zu\n", res->nslow);
    if (res->nslow)
        fprintf(out, "%-24s %6s %8s %8s %6s %-13s %9s %-33s %s\n", "HOST", "RANK", "PID", "SINCE", "RATIO", "CAUSE",
                "COST_MS", "EXCESS (compute/transfer/host ms)", "POD");
    for (size_t i = 0; i < res->nslow; i++) {
        const struct slowrank_slow *s = &res->slow[i];
        const struct slowrank_in *x = &in[s->rank_index];
        char excess[96], pe[256 * 4 + 1];
        const char *pod = rank_pod(r, t->hosts->n, x);
        snprintf(excess, sizeof(excess), "%+.2f/%+.2f/%+.2f", s->excess_ms[0], s->excess_ms[1], s->excess_ms[2]);
        fprintf(out, "%-24s %6d %8d %8lld %6.2f %-13s %9.2f %-33s %s\n", x->host, x->rank, x->pid,
                (long long)s->since_step, s->ratio, slowrank_cause_name(s->cause), s->cost_ms, excess,
                pod[0] ? cli_term_str(pod, pe, sizeof(pe)) : "-");
    }
    fflush(out);
}

static int one_view(const struct steps_opts *o, struct cmd_req *req, const struct cli_targets *t, FILE *out,
                    FILE *errf, bool *ret_failed)
{
    size_t nh = t->hosts->n, nr = 0;
    struct cli_reply *r = calloc(nh, sizeof(*r));
    struct slowrank_in *in = NULL;
    struct slowrank_sample *samples = NULL;
    struct slowrank_result res = { 0 };
    int rc = -ENOMEM;

    /* each view of --watch gets the whole --timeout-s (docs/cli.md) */
    rpc_set_overall_deadline(clock_mono_ns() + (uint64_t)t->timeout_s * 1000000000ull);
    if (!r || cli_gather(t, cli_buf_str(&req->body), req->body.len, r) < 0)
        goto out;
    for (size_t i = 0; i < nh; i++) {
        if (!r[i].failed && !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(r[i].json, "ranks"))) {
            const cJSON *s = cJSON_GetObjectItemCaseSensitive(r[i].json, "status");
            char esc[128]; /* the reply's own text: escaped before it joins ours (docs/security.md) */
            r[i].failed = true;
            snprintf(r[i].err, sizeof(r[i].err), "no step data in the reply (%s); is the daemon older than getSteps?",
                     cJSON_IsString(s) ? cli_term_str(s->valuestring, esc, sizeof(esc)) : "no 'ranks'");
        }
        *ret_failed |= r[i].failed;
    }
    if (collect(r, nh, &in, &nr, &samples) < 0 || slowrank_merge(in, nr, &o->rule, &res) < 0)
        goto out;
    print_view(o, t, r, in, &res, out);
    rc = 0;
out:
    if (rc < 0)
        fprintf(errf, "error: out of memory merging the step windows\n");
    slowrank_result_fini(&res);
    free(in);
    free(samples);
    if (r)
        cli_gather_fini(r, nh);
    free(r);
    return rc;
}

static int steps_run_all(struct cmd_req *req, const struct cli_targets *t, FILE *out, FILE *errf)
{
    struct steps_opts o;
    char err[256];
    bool failed = false;

    if (parse_opts(req->args, &o, err, sizeof(err)) < 0) {
        fprintf(errf, "%s\n", err);
        return CLI_EXIT_USAGE;
    }
    for (int64_t k = 0;; k++) {
        if (one_view(&o, req, t, out, errf, &failed) < 0)
            return CLI_EXIT_RUNTIME;
        if (!o.watch || (o.count > 0 && k + 1 >= o.count))
            break;
        struct timespec ts = { (time_t)o.interval_s, 0 };
        while (nanosleep(&ts, &ts) != 0)
            ;
    }
    return failed ? CLI_EXIT_RUNTIME : CLI_EXIT_OK;
}

static void steps_render(const struct cmd_req *req, const char *reply, size_t len, const cJSON *json,
                         struct cli_buf *out, bool *ret_failed, char *err, size_t errcap)
{
    cmd_render_verbatim(req, reply, len, json, out, ret_failed, err, errcap);
}

const struct cli_cmd cmd_steps = {
    .name = "steps",
    .about = "Merge the ranks' step summaries of all hosts: step time and slow ranks",
    .flags = steps_flags,
    .nflags = sizeof(steps_flags) / sizeof(steps_flags[0]),
    .prepare = steps_prepare,
    .render = steps_render,
    .run_all = steps_run_all,
};
