/* cmd_status: `dyno status` — one host: sends {"fn":"getStatus"} and prints the reply
 * unchanged (docs/design/cli.md#status). Several hosts or --json: one merged view (docs/cluster.md §3):
 * a table (host, pid, rank, npu-monitor and nputrace state, current step, last poll age) or
 * one JSON object whose `processes` carry `host`. Ranks come from the step windows. Each
 * process's health marks follow it, one line each (docs/cli.md "Status marks"). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_buf.h"
#include "cli/cli_gather.h"
#include "cli/cmd.h"
#include "cli/hosts.h"

static const struct cli_flag status_flags[] = {
    {"json", CLI_FLAG_BOOL, false, NULL, "Print the merged status of all hosts as one JSON object"},
    CMD_FLAG_NAMESPACE,
    CMD_FLAG_POD,
};

static int status_prepare(const struct cli_args *a, struct cmd_req *req, char *err, size_t errcap)
{
    if (cmd_pod_prepare(a, req, err, errcap) < 0)
        return -EINVAL;
    cli_buf_puts(&req->body, "{\"fn\":\"getStatus\"}");
    return req->body.err;
}

/* The "pod" object's name and namespace of a process ("" when not reported). */
static const char *pod_field(const cJSON *p, const char *key)
{
    const cJSON *pod = cJSON_GetObjectItemCaseSensitive(p, "pod");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(pod, key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* --pod / --namespace: the process reported that pod (and namespace). */
static bool pod_selected(const struct cmd_req *req, const cJSON *p)
{
    return (!req->pod || strcmp(pod_field(p, "name"), req->pod) == 0) &&
           (!req->pod_namespace || strcmp(pod_field(p, "namespace"), req->pod_namespace) == 0);
}

static int num(const cJSON *o, const char *key, int def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    /* a hostile 1e300 must not reach a double-to-int conversion (undefined behaviour) */
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= INT32_MIN && v->valuedouble <= INT32_MAX))
        return def;
    return (int)v->valuedouble;
}

static const char *str(const cJSON *o, const char *key, const char *def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : def;
}

/* A count from a possibly hostile host: a whole number in [0, 2^53], else 0. */
static uint64_t count(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= 9007199254740992.0))
        return 0;
    return (uint64_t)v->valuedouble;
}

/* What the host's Prometheus bounds folded into <other> series (docs/prometheus.md#bounds):
 * a line under the host's rows when anything was (host NULL: the one-host form, no column),
 * the counts in the host's JSON object. */
static void prom_folded(const char *host, const cJSON *r, cJSON *h, FILE *out)
{
    static const char *const keys[] = { "series", "folded_process", "folded_daemon", "processes_folded" };
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(r, "prometheus");
    uint64_t v[4];

    if (!cJSON_IsObject(p))
        return;
    for (size_t i = 0; i < 4; i++)
        v[i] = count(p, keys[i]);
    if (h) {
        cJSON *o = cJSON_AddObjectToObject(h, "prometheus");
        for (size_t i = 0; o && i < 4; i++)
            cJSON_AddNumberToObject(o, keys[i], (double)v[i]);
        return;
    }
    if (v[1] == 0 && v[2] == 0)
        return;
    fprintf(out, "%-*s%s! prometheus: %llu samples folded into <other> series: %llu at "
            "--prometheus_max_series_per_process (%llu processes at it), %llu at --prometheus_max_series "
            "(docs/prometheus.md#bounds)\n", host ? 24 : 0, host ? host : "", host ? " " : "",
            (unsigned long long)(v[1] + v[2]), (unsigned long long)v[1], (unsigned long long)v[3],
            (unsigned long long)v[2]);
}

/* Text from the daemon to a terminal: control bytes (escape sequences, newlines) as '?'. */
static void put_printable(struct cli_buf *out, const char *s)
{
    for (; *s; s++) {
        char c = (unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s;
        cli_buf_append(out, &c, 1);
    }
}

/* The marks of one process (getStatus "health"."marks", docs/cli.md "Status marks"): one line
 * each, "! pid <pid> rank <rank>: <code>: <text>", prefixed by indent. Returns how many. */
static int status_marks(const cJSON *p, const char *indent, struct cli_buf *out)
{
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(p, "health"), *m;
    int n = 0, rank = num(h, "rank", -1), pid = num(p, "pid", 0);
    const char *pod = pod_field(p, "name");
    char rk[24] = "";

    if (rank >= 0)
        snprintf(rk, sizeof(rk), " rank %d", rank);
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(h, "marks")) {
        const char *code = str(m, "code", NULL), *text = str(m, "text", NULL);
        if (!code || !text)
            continue;
        cli_buf_printf(out, "%s! pid %d", indent, pid);
        if (pod[0]) { /* which pod, as it reported it (docs/deploy.md#attribution) */
            cli_buf_puts(out, " (pod ");
            put_printable(out, pod);
            cli_buf_puts(out, ")");
        }
        cli_buf_printf(out, "%s: ", rk);
        put_printable(out, code);
        cli_buf_puts(out, ": ");
        put_printable(out, text);
        cli_buf_puts(out, "\n");
        n++;
    }
    return n;
}

/* One host, no --json: upstream's line unchanged on stdout (scripts parse all of it as JSON),
 * the marks and the Prometheus overflow on stderr, where a person at the terminal sees them
 * below it. */
static void status_render(const struct cmd_req *req, const char *reply, size_t len, const cJSON *json,
                          struct cli_buf *out, bool *ret_failed, char *err, size_t errcap)
{
    struct cli_buf marks;
    const cJSON *p;
    int n = 0;

    cmd_render_verbatim(req, reply, len, json, out, ret_failed, err, errcap);
    cli_buf_init(&marks, 1u << 20);
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(json, "processes"))
        n += status_marks(p, "", &marks);
    if (n > 0 && !marks.err)
        fputs(cli_buf_str(&marks), stderr);
    cli_buf_fini(&marks);
    prom_folded(NULL, json, NULL, stderr);
}

/* From a getSteps reply: rank and newest step of pid (-1 when unknown). */
static void rank_of(const cJSON *steps, int pid, int *ret_rank, int *ret_step)
{
    const cJSON *ranks = steps ? cJSON_GetObjectItemCaseSensitive(steps, "ranks") : NULL, *r;
    size_t seen = 0;
    *ret_rank = -1;
    *ret_step = -1;
    cJSON_ArrayForEach(r, ranks) {
        if (seen++ == CLI_HOST_ROWS_MAX)
            break; /* rows x ranks stays bounded whatever a host sends */
        if (num(r, "pid", 0) != pid)
            continue;
        *ret_rank = num(r, "rank", -1);
        const cJSON *rows = cJSON_GetObjectItemCaseSensitive(r, "steps");
        int n = cJSON_GetArraySize(rows);
        const cJSON *last = n > 0 ? cJSON_GetArrayItem(rows, n - 1) : NULL;
        if (cJSON_IsArray(last) && cJSON_IsNumber(last->child) &&
            last->child->valuedouble >= INT32_MIN && last->child->valuedouble <= INT32_MAX)
            *ret_step = (int)last->child->valuedouble;
    }
}

static int status_run_all(struct cmd_req *req, const struct cli_targets *t, FILE *out, FILE *errf)
{
    bool json = cli_flags_bool(req->args, "json");
    size_t n = t->hosts->n, nfail = 0;
    struct cli_reply *st, *sp;
    static const char steps_body[] = "{\"fn\":\"getSteps\",\"last\":1}";
    int rc = CLI_EXIT_RUNTIME;

    if (n == 1 && !json && !req->pod && !req->pod_namespace)
        return CMD_RUN_DEFAULT; /* the upstream output */
    st = calloc(n, sizeof(*st));
    sp = calloc(n, sizeof(*sp));
    if (!st || !sp || cli_gather(t, cli_buf_str(&req->body), req->body.len, st) < 0 ||
        cli_gather(t, steps_body, sizeof(steps_body) - 1, sp) < 0) {
        fprintf(errf, "error: cannot contact the hosts (out of memory or threads)\n");
        goto out;
    }
    cJSON *root = json ? cJSON_CreateObject() : NULL, *procs = NULL, *hosts = NULL;
    if (json) {
        hosts = cJSON_AddArrayToObject(root, "hosts");
        procs = cJSON_AddArrayToObject(root, "processes");
    } else {
        /* the container's pid and the pod last, so that the columns before keep their places */
        fprintf(out, "%-24s %8s %5s %-13s %-13s %8s %9s %8s %s\n", "HOST", "PID", "RANK", "NPUMONITOR", "NPUTRACE",
                "STEP", "POLL_AGE", "NS_PID", "POD");
    }
    for (size_t i = 0; i < n; i++) {
        const char *host = t->hosts->v[i];
        char esc[sizeof(st[i].err)];
        if (st[i].failed) {
            nfail++;
            if (json) {
                cJSON *h = cJSON_CreateObject();
                cJSON_AddStringToObject(h, "host", host);
                cJSON_AddStringToObject(h, "error", st[i].err);
                cJSON_AddItemToArray(hosts, h);
            } else {
                fprintf(out, "%-24s ERROR: %s\n", host, cli_term_str(st[i].err, esc, sizeof(esc)));
            }
            continue;
        }
        const cJSON *r = st[i].json, *p;
        size_t rows = 0, more = 0;
        if (json) {
            cJSON *h = cJSON_CreateObject();
            cJSON_AddStringToObject(h, "host", host);
            cJSON_AddNumberToObject(h, "current_step", num(r, "current_step", -1));
            cJSON_AddStringToObject(h, "npumonitor", str(r, "npumonitor", "unknown"));
            cJSON_AddStringToObject(h, "nputrace", str(r, "nputrace", "unknown"));
            cJSON_AddItemToArray(hosts, h);
        }
        cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(r, "processes")) {
            if (!pod_selected(req, p))
                continue;
            if (rows++ == CLI_HOST_ROWS_MAX) {
                /* a hostile host cannot flood the table (docs/security.md) */
                more = (size_t)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "processes")) - CLI_HOST_ROWS_MAX;
                break;
            }
            int pid = num(p, "pid", 0), rank, wstep, step = num(p, "current_step", -1);
            rank_of(sp[i].json, pid, &rank, &wstep);
            if (step < 0)
                step = wstep;
            if (rank < 0) /* a rank that reported no step window yet: its own word */
                rank = num(cJSON_GetObjectItemCaseSensitive(p, "health"), "rank", -1);
            if (json) {
                cJSON *c = cJSON_Duplicate(p, true);
                cJSON_AddStringToObject(c, "host", host);
                cJSON_AddNumberToObject(c, "rank", rank);
                if (!cJSON_GetObjectItemCaseSensitive(c, "step"))
                    cJSON_AddNumberToObject(c, "step", step);
                cJSON_AddItemToArray(procs, c);
                continue;
            }
            char age[24] = "-", rk[16] = "-", stp[16] = "-";
            if (cJSON_GetObjectItemCaseSensitive(p, "last_poll_age_ms"))
                snprintf(age, sizeof(age), "%dms", num(p, "last_poll_age_ms", 0));
            if (rank >= 0)
                snprintf(rk, sizeof(rk), "%d", rank);
            if (step >= 0)
                snprintf(stp, sizeof(stp), "%d", step);
            char m[64], t[64], nsp[16] = "-", podtxt[2 * 256 + 2], pe[sizeof(podtxt) * 4 + 1];
            int ns_pid = num(p, "ns_pid", 0);
            const char *pname = pod_field(p, "name"), *pns = pod_field(p, "namespace");
            if (ns_pid > 0 && ns_pid != pid)
                snprintf(nsp, sizeof(nsp), "%d", ns_pid);
            snprintf(podtxt, sizeof(podtxt), "%s%s%s", pns, pns[0] && pname[0] ? "/" : "", pname[0] ? pname : pns[0] ? "" : "-");
            fprintf(out, "%-24s %8d %5s %-13s %-13s %8s %9s %8s %s\n", host, pid, rk,
                    cli_term_str(str(p, "npumonitor", "-"), m, sizeof(m)),
                    cli_term_str(str(p, "nputrace", "-"), t, sizeof(t)), stp, age, nsp,
                    cli_term_str(podtxt, pe, sizeof(pe)));
            struct cli_buf mb;
            cli_buf_init(&mb, 1u << 20);
            if (status_marks(p, "    ", &mb) > 0 && !mb.err)
                fputs(cli_buf_str(&mb), out);
            cli_buf_fini(&mb);
        }
        prom_folded(host, r, json ? cJSON_GetArrayItem(hosts, cJSON_GetArraySize(hosts) - 1) : NULL, out);
        if (more && json) {
            cJSON *h = cJSON_GetArrayItem(hosts, cJSON_GetArraySize(hosts) - 1);
            cJSON_AddNumberToObject(h, "processes_not_shown", (double)more);
        } else if (more) {
            fprintf(out, "%-24s ... %zu more processes not shown (at most %d rows per host)\n", host,
                    more, CLI_HOST_ROWS_MAX);
        }
    }
    if (json) {
        cJSON_AddNumberToObject(root, "hosts_failed", (double)nfail);
        char *text = cJSON_PrintUnformatted(root);
        if (text) {
            cli_term_write(out, text, strlen(text)); /* cJSON leaves DEL and C1 raw */
            fputc('\n', out);
        }
        free(text);
        cJSON_Delete(root);
    } else {
        fprintf(out, "Summary: %zu hosts, %zu succeeded, %zu failed\n", n, n - nfail, nfail);
    }
    rc = nfail ? CLI_EXIT_RUNTIME : CLI_EXIT_OK;
out:
    if (st)
        cli_gather_fini(st, n);
    if (sp)
        cli_gather_fini(sp, n);
    free(st);
    free(sp);
    return rc;
}

const struct cli_cmd cmd_status = {
    .name = "status",
    .about = "Print the daemon's npu-monitor/nputrace status and registered processes",
    .flags = status_flags,
    .nflags = sizeof(status_flags) / sizeof(status_flags[0]),
    .prepare = status_prepare,
    .render = status_render,
    .run_all = status_run_all,
};
