/* cmd_common: pieces shared by the subcommands — the setKinetOnDemandRequest body layout
 * kept from upstream, the Note line and the processesMatched block (docs/design/cli.md#request-bodies, #subcommands). */
#include "cli/cmd.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli_val.h"
#include "contract/podid.h"

void cmd_req_init(struct cmd_req *req)
{
    memset(req, 0, sizeof(*req));
    cli_buf_init(&req->config, CMD_TEXT_MAX);
    cli_buf_init(&req->body, CMD_TEXT_MAX);
    cli_buf_init(&req->echo, CMD_TEXT_MAX);
}

void cmd_req_fini(struct cmd_req *req)
{
    cli_buf_fini(&req->config);
    cli_buf_fini(&req->body);
    cli_buf_fini(&req->echo);
}

void cmd_build_kineto_body(struct cmd_req *req, long long job_id, const char *pids,
                           unsigned long long process_limit)
{
    struct cli_buf *b = &req->body;
    cli_buf_puts(b, "\n{\n    \"fn\": \"setKinetOnDemandRequest\",\n    \"config\": \"");
    cli_buf_json_str(b, cli_buf_str(&req->config), req->config.len);
    cli_buf_printf(b, "\",\n    \"job_id\": %lld,\n    \"pids\": [%s],\n    \"process_limit\": %llu",
                   job_id, pids, process_limit ? process_limit : CMD_PROCESS_LIMIT_ALL);
    if (req->client_token[0])
        cli_buf_printf(b, ",\n    \"client_token\": \"%s\"", req->client_token);
    /* validated names ([A-Za-z0-9._-]): nothing to escape */
    if (req->pod)
        cli_buf_printf(b, ",\n    \"pod\": \"%s\"", req->pod);
    if (req->pod_namespace)
        cli_buf_printf(b, ",\n    \"namespace\": \"%s\"", req->pod_namespace);
    cli_buf_puts(b, "\n}");
}

int cmd_pod_prepare(const struct cli_args *a, struct cmd_req *req, char *err, size_t errcap)
{
    static const struct {
        const char *flag;
        enum podid_field f;
    } sel[] = { { "pod", PODID_POD }, { "namespace", PODID_NAMESPACE } };

    for (size_t i = 0; i < sizeof(sel) / sizeof(sel[0]); i++) {
        const char *v = cli_flags_given(a, sel[i].flag) ? cli_flags_get(a, sel[i].flag) : NULL;
        char why[96];
        if (!v)
            continue;
        if (!podid_valid(sel[i].f, v, strlen(v))) {
            snprintf(why, sizeof(why), "Must be a name of 1-%zu characters [A-Za-z0-9._-], starting and ending "
                     "with a letter or digit", podid_cap(sel[i].f));
            cli_val_err(err, errcap, sel[i].flag, v, why);
            return -EINVAL;
        }
        if (sel[i].f == PODID_POD)
            req->pod = v;
        else
            req->pod_namespace = v;
    }
    return 0;
}

static bool echoed(const cJSON *json, const char *key, const char *want)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(json, key);
    return !want || (cJSON_IsString(v) && strcmp(v->valuestring, want) == 0);
}

void cmd_pod_check(const struct cmd_req *req, const cJSON *json, struct cli_buf *out, bool *ret_failed, char *err,
                   size_t errcap)
{
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(json, "commandStatus");
    /* only a reply to the command itself says whether the selection was applied */
    if ((!req->pod && !req->pod_namespace) || !cJSON_IsObject(json) || !cJSON_IsString(st) ||
        strcmp(st->valuestring, "refused") == 0 ||
        (echoed(json, "pod", req->pod) && echoed(json, "namespace", req->pod_namespace)))
        return;
    cli_buf_puts(out, "Note: this dynolog does not select processes by pod (an older release?): the command "
                      "reached every process it matched - upgrade dynolog to this dyno's release\n");
    *ret_failed = true;
    snprintf(err, errcap, "the daemon ignored --pod/--namespace");
}

void cmd_render_verbatim(const struct cmd_req *req, const char *reply, size_t len, const cJSON *json,
                         struct cli_buf *out, bool *ret_failed, char *err, size_t errcap)
{
    (void)req;
    (void)json;
    (void)ret_failed;
    (void)err;
    (void)errcap;
    cli_buf_term_json(out, reply, len);
    cli_buf_puts(out, "\n");
}

void cmd_render_reply_line(const char *reply, struct cli_buf *out)
{
    cli_buf_puts(out, "response = ");
    cli_buf_term(out, reply, strlen(reply));
    cli_buf_puts(out, "\n");
}

void cmd_render_note(const cJSON *json, struct cli_buf *out)
{
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(json, "commandStatus");
    if (!cJSON_IsString(st))
        return;
    const cJSON *why = cJSON_GetObjectItemCaseSensitive(json, "reason");
    if (cJSON_IsString(why) && (strcmp(st->valuestring, "ineffective") == 0 ||
                                strcmp(st->valuestring, "refused") == 0))
    {
        /* the daemon said why (busy trace, --allowed_log_dirs); a remote daemon's text, so
         * one line with no terminal control bytes */
        cli_buf_printf(out, "Note: command not applied (%s): ", st->valuestring);
        cli_buf_term(out, why->valuestring, strlen(why->valuestring));
        cli_buf_puts(out, "\n");
    }
    else if (strcmp(st->valuestring, "ineffective") == 0 || strcmp(st->valuestring, "unknown") == 0)
        cli_buf_printf(out, "Note: command not applied (%s); npu-monitor and nputrace cannot run "
                       "at the same time and a training process must be registered - see "
                       "'dyno status'\n", st->valuestring);
}

void cmd_trace_path(const char *log_file, long long pid, bool kineto, struct cli_buf *out)
{
    static const char pt[] = ".pt.trace.json";
    size_t n = strlen(log_file);
    if (kineto) {
        if (n >= sizeof(pt) - 1 && strcmp(log_file + n - (sizeof(pt) - 1), pt) == 0) {
            cli_buf_append(out, log_file, n - (sizeof(pt) - 1));
            cli_buf_printf(out, "_%lld%s", pid, pt);
            return;
        }
        const char *j = strstr(log_file, ".json");
        if (!j) {
            cli_buf_append(out, log_file, n);
            return;
        }
        cli_buf_append(out, log_file, (size_t)(j - log_file));
        cli_buf_printf(out, "_%lld.json%s", pid, j + 5);
        return;
    }
    const char *p = log_file;
    for (const char *j; (j = strstr(p, ".json")) != NULL; p = j + 5) {
        cli_buf_append(out, p, (size_t)(j - p));
        cli_buf_printf(out, "_%lld.json", pid);
    }
    cli_buf_puts(out, p);
}

int cmd_render_matched(const cJSON *json, const char *log_file, bool kineto,
                       bool profile_memory, struct cli_buf *out)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(json, "processesMatched");
    if (!cJSON_IsArray(m))
        return -1;
    int n = cJSON_GetArraySize(m);
    if (n == 0) {
        cli_buf_puts(out, "No processes were matched, please check --job-id or --pids flags\n");
        return 0;
    }
    cli_buf_printf(out, "Matched %d processes\n", n);
    cli_buf_puts(out, "Trace output files will be written to:\n");
    const cJSON *e;
    cJSON_ArrayForEach(e, m)
    {
        /* valueint is cJSON's saturated int: a hostile 1e300 must not reach a
         * double-to-integer conversion that overflows (undefined behaviour). */
        long long pid = cJSON_IsNumber(e) ? (long long)e->valueint : 0;
        cli_buf_puts(out, "    ");
        cmd_trace_path(log_file, pid, kineto, out);
        cli_buf_puts(out, "\n");
        if (profile_memory)
            cli_buf_printf(out, "      Or /tmp/memory_snapshot_%lld.pickle\n", pid);
    }
    return n;
}
