/* cli_outcome: the wait for per-process outcomes (cli_outcome.h). The daemon answers from its
 * registry; dyno only polls it, so a slow or dead process costs this host's worker at most
 * --wait-s and never another host's. */
#include "cli/cli_outcome.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli_exit.h"
#include "cli/cli_val.h"
#include "cli/rpc_client.h"
#include "common/log.h"
#include "common/strutil.h"

static atomic_int worst;

void cli_outcome_reset(void)
{
    atomic_store(&worst, 0);
}

int cli_outcome_exit(void)
{
    return atomic_load(&worst);
}

/* The worse of the codes seen (cli_exit.h: a refusal has a reason to read, a silence has none). */
static void note(int code)
{
    int cur = atomic_load(&worst);
    while ((int)cli_exit_worse((enum cli_exit)cur, (enum cli_exit)code) != cur &&
           !atomic_compare_exchange_weak(&worst, &cur, code))
        ;
}

int cli_outcome_prepare(const struct cli_args *a, struct cmd_req *req, char *err, size_t errcap)
{
    const char *w = cli_flags_get(a, "wait-s");
    char shown[CLI_VAL_F32_LEN];
    double v;
    uint8_t rnd[8];

    req->wait_s = -1;
    req->client_token[0] = '\0';
    if (!cli_flags_bool(a, "no-wait")) {
        if (cli_val_nonneg_f32("wait-s", w, shown, sizeof(shown), err, errcap) < 0 ||
            str_to_double(shown, &v) != 0 || v > CLI_OUTCOME_WAIT_MAX_S) {
            cli_val_err(err, errcap, "wait-s", w, "Must be a number of seconds in [0, 3600]");
            return -EINVAL;
        }
        req->wait_s = v;
    }
    /* unpredictable, so another client cannot read (or guess) this command's outcomes */
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
        uint64_t t = clock_real_ns() ^ ((uint64_t)getpid() << 32);
        memcpy(rnd, &t, sizeof(rnd));
    }
    for (size_t i = 0; i < sizeof(rnd); i++)
        snprintf(req->client_token + 2 * i, 3, "%02x", rnd[i]);
    return 0;
}

static cJSON *parse_strict(const char *reply, size_t len)
{
    const char *end = NULL;
    cJSON *j;

    if (memchr(reply, '\0', len))
        return NULL;
    j = cJSON_ParseWithLengthOpts(reply, len, &end, false);
    if (j && !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

static const char *str_of(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static long long int_of(const cJSON *o, const char *key, long long dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? (long long)v->valuedouble : dflt;
}

/* A remote daemon's text on one line with no terminal control bytes. */
static void put_clean(struct cli_buf *out, const char *s)
{
    for (; *s; s++)
        cli_buf_printf(out, "%c", (unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s);
}

static bool final(const char *o)
{
    return strcmp(o, "applied") == 0 || strcmp(o, "rejected") == 0 || strcmp(o, "superseded") == 0 ||
           strcmp(o, "delivered (unacknowledged)") == 0;
}

/* One getConfigOutcomes; NULL (and err) when the daemon could not be asked. */
static cJSON *ask(const struct cmd_req *req, const char *target, uint16_t port, int timeout_s, char *err,
                  size_t errcap)
{
    char body[160], *reply = NULL;
    size_t len = 0;
    enum rpc_fail fail;
    cJSON *j;

    snprintf(body, sizeof(body), "{\"fn\":\"getConfigOutcomes\",\"client_token\":\"%s\"}", req->client_token);
    if (rpc_call_tls(req->tls, target, port, NULL, timeout_s, body, strlen(body), &reply, &len, &fail, err,
                     errcap) < 0)
        return NULL;
    j = parse_strict(reply, len);
    if (!j || !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(j, "outcomes"))) {
        snprintf(err, errcap, "the daemon does not report outcomes (an older dynolog?): %.80s", reply);
        cJSON_Delete(j);
        j = NULL;
    }
    free(reply);
    return j;
}

static bool all_final(const cJSON *outs, size_t want)
{
    const cJSON *e;
    size_t n = 0;

    cJSON_ArrayForEach(e, outs) {
        if (!final(str_of(e, "outcome")))
            return false;
        n++;
    }
    return n >= want;
}

/* The lines for one host; returns the worst exit code among its processes. */
static int render_outcomes(const char *target, const cJSON *outs, const cJSON *triggered, double wait_s,
                           struct cli_buf *out)
{
    size_t n[6] = { 0 }; /* applied, rejected, superseded, unacknowledged, no answer */
    const cJSON *t, *e;
    int code = 0;
    bool first = true;
    struct cli_buf js;

    cli_buf_init(&js, CMD_TEXT_MAX);
    cli_buf_puts(&js, "outcomes = [");
    cJSON_ArrayForEach(t, triggered) {
        long long pid = cJSON_IsNumber(t) ? (long long)t->valuedouble : -1;
        const cJSON *found = NULL;
        const char *o, *why, *state, *shown, *pod;
        long long rank;
        char txt[96];

        cJSON_ArrayForEach(e, outs)
            if (int_of(e, "pid", -2) == pid)
                found = e; /* the newest delivery of this token to pid */
        o = found ? str_of(found, "outcome") : "";
        pod = found ? str_of(found, "pod") : "";
        why = found ? str_of(found, "reason") : "";
        state = found ? str_of(found, "state") : "";
        rank = found ? int_of(found, "rank", -1) : -1;
        shown = o;
        if (strcmp(o, "applied") == 0) {
            n[0]++;
        } else if (strcmp(o, "rejected") == 0) {
            n[1]++;
            code = CLI_EXIT_REJECTED;
        } else if (strcmp(o, "superseded") == 0) {
            n[2]++;
            code = CLI_EXIT_REJECTED;
        } else if (strcmp(o, "delivered (unacknowledged)") == 0) {
            n[3]++;
        } else {
            n[4]++;
            if (code != CLI_EXIT_REJECTED)
                code = CLI_EXIT_NO_ANSWER;
            shown = "no answer";
            snprintf(txt, sizeof(txt), strcmp(o, "delivered") == 0
                     ? "delivered, no acknowledgement within %g s"
                     : found ? "not delivered: the process did not poll within %g s"
                             : "the daemon no longer tracks this process (gone?) after %g s", wait_s);
            why = txt;
        }
        cli_buf_printf(out, "Outcome: %s pid %lld ", target, pid);
        if (pod[0]) { /* the pod it reported (docs/deploy.md#attribution) */
            cli_buf_puts(out, "(pod ");
            put_clean(out, pod);
            cli_buf_puts(out, ") ");
        }
        cli_buf_puts(out, "rank ");
        if (rank >= 0)
            cli_buf_printf(out, "%lld", rank);
        else
            cli_buf_puts(out, "-");
        cli_buf_printf(out, ": %s", shown);
        if (state[0] && strcmp(shown, "no answer") != 0) {
            cli_buf_puts(out, " (");
            put_clean(out, state);
            cli_buf_puts(out, ")");
        }
        if (why[0]) {
            cli_buf_puts(out, ": ");
            put_clean(out, why);
        }
        cli_buf_puts(out, "\n");
        cli_buf_printf(&js, "%s{\"host\":\"", first ? "" : ",");
        cli_buf_json_str(&js, target, strlen(target));
        cli_buf_printf(&js, "\",\"outcome\":\"");
        cli_buf_json_str(&js, shown, strlen(shown));
        cli_buf_printf(&js, "\",\"pid\":%lld,", pid);
        if (pod[0]) {
            cli_buf_puts(&js, "\"pod\":\"");
            cli_buf_json_str(&js, pod, strlen(pod));
            cli_buf_puts(&js, "\",");
        }
        cli_buf_printf(&js, "\"rank\":%lld,\"reason\":\"", rank);
        cli_buf_json_str(&js, why, strlen(why));
        cli_buf_puts(&js, "\",\"state\":\"");
        cli_buf_json_str(&js, state, strlen(state));
        cli_buf_puts(&js, "\"}");
        first = false;
    }
    cli_buf_puts(&js, "]\n");
    cli_buf_printf(out, "Outcomes: %zu applied, %zu rejected, %zu superseded, %zu delivered (unacknowledged), "
                        "%zu no answer\n", n[0], n[1], n[2], n[3], n[4]);
    cli_buf_append(out, cli_buf_str(&js), js.len);
    cli_buf_fini(&js);
    return code;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void wait_outcomes(const struct cmd_req *req, const char *target, uint16_t port, int timeout_s,
                          const cJSON *reply, struct cli_buf *out)
{
    const cJSON *trig = cJSON_GetObjectItemCaseSensitive(reply, "activityProfilersTriggered");
    const cJSON *skipped = cJSON_GetObjectItemCaseSensitive(reply, "processesSkipped");
    uint64_t deadline = clock_mono_ns() + (uint64_t)(req->wait_s * 1e9);
    /* --timeout-s bounds the whole command, the wait included (docs/cli.md) */
    if (rpc_overall_deadline() && rpc_overall_deadline() < deadline)
        deadline = rpc_overall_deadline();
    size_t ntrig = (size_t)cJSON_GetArraySize(trig);
    cJSON *got = NULL;
    char err[512] = "";
    unsigned pause = 20, nfail = 0;

    /* our daemon answers a client_token with processesSkipped: without it the daemon predates
     * outcomes (upstream dynolog), and its output stays exactly as before */
    if (!cJSON_IsNumber(skipped) || !cJSON_IsArray(trig) || ntrig == 0)
        return;
    for (;;) {
        cJSON *j = ask(req, target, port, timeout_s, err, sizeof(err));
        if (j) {
            cJSON_Delete(got);
            got = j;
            err[0] = '\0';
            if (all_final(cJSON_GetObjectItemCaseSensitive(got, "outcomes"), ntrig))
                break;
        } else {
            nfail++;
        }
        if (clock_mono_ns() >= deadline)
            break;
        sleep_ms(pause);
        pause = pause < 100 ? pause * 2 : 100;
    }
    if (!got) {
        cli_buf_printf(out, "Outcome: %s: could not read the outcomes: ", target);
        put_clean(out, err);
        cli_buf_puts(out, "\n");
        note(CLI_EXIT_NO_ANSWER);
        return;
    }
    note(render_outcomes(target, cJSON_GetObjectItemCaseSensitive(got, "outcomes"), trig, req->wait_s, out));
    if (err[0]) {
        /* the lines above are the last outcomes read; later reads failed, so they may be old */
        cli_buf_printf(out, "Note: %u reads of the outcomes from %s failed, the last one: ", nfail, target);
        put_clean(out, err);
        cli_buf_puts(out, "\n");
    }
    cJSON_Delete(got);
}

static int i64_cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

#define SKIPPED_SHOWN 4096 /* lines per host, like the merged views' rows */

/* The processes --process-limit left out: matched, not triggered (our daemon's reply has
 * processesSkipped), one line each, so no script has to read them out of the JSON. A reply's
 * arrays are a remote daemon's: looked up sorted, and at most SKIPPED_SHOWN lines. */
static void render_skipped(const char *target, const cJSON *reply, struct cli_buf *out)
{
    const cJSON *trig = cJSON_GetObjectItemCaseSensitive(reply, "activityProfilersTriggered");
    const cJSON *matched = cJSON_GetObjectItemCaseSensitive(reply, "processesMatched");
    const cJSON *skipped = cJSON_GetObjectItemCaseSensitive(reply, "processesSkipped");
    const cJSON *m, *t;
    int64_t *tv = NULL;
    size_t nt = 0, shown = 0, more = 0;

    if (!cJSON_IsNumber(skipped) || !(skipped->valuedouble > 0))
        return;
    cli_buf_printf(out, "Matched %d processes; %lld skipped by --process-limit (not triggered)\n",
                   cJSON_GetArraySize(matched), (long long)cli_json_i64(skipped, 0, INT32_MAX, 0));
    if (cJSON_IsArray(trig) && cJSON_GetArraySize(trig) > 0 &&
        !(tv = calloc((size_t)cJSON_GetArraySize(trig), sizeof(*tv))))
        return;
    cJSON_ArrayForEach(t, trig)
        tv[nt++] = cli_json_i64(t, INT32_MIN, INT32_MAX, -2);
    if (nt)
        qsort(tv, nt, sizeof(*tv), i64_cmp);
    cJSON_ArrayForEach(m, matched) {
        int64_t pid = cli_json_i64(m, INT32_MIN, INT32_MAX, -1);
        if (nt && bsearch(&pid, tv, nt, sizeof(*tv), i64_cmp))
            continue;
        if (shown++ < SKIPPED_SHOWN)
            cli_buf_printf(out, "Skipped: %s pid %lld: not triggered (--process-limit)\n", target, (long long)pid);
        else
            more++;
    }
    if (more)
        cli_buf_printf(out, "Skipped: %s ... %zu more processes not shown\n", target, more);
    free(tv);
}

void cli_outcome_run_host(const struct cmd_req *req, const char *target, uint16_t port, int timeout_s,
                          struct cli_buf *out, bool *ret_failed, char *err, size_t errcap,
                          void (*render)(const struct cmd_req *req, const char *reply, size_t len,
                                         const cJSON *json, struct cli_buf *out, bool *ret_failed,
                                         char *err, size_t errcap))
{
    char *reply = NULL;
    size_t len = 0;
    enum rpc_fail fail;
    cJSON *json;
    const cJSON *st;

    if (rpc_call_tls(req->tls, target, port, NULL, timeout_s, cli_buf_str(&req->body), req->body.len, &reply,
                     &len, &fail, err, errcap) < 0) {
        *ret_failed = true;
        return;
    }
    json = parse_strict(reply, len);
    if (!json) {
        *ret_failed = true;
        snprintf(err, errcap, "Unparsable reply from the server (%zu bytes)", len);
        free(reply);
        return;
    }
    render(req, reply, len, json, out, ret_failed, err, errcap);
    st = cJSON_GetObjectItemCaseSensitive(json, "commandStatus");
    if (!*ret_failed && !(cJSON_IsString(st) && strcmp(st->valuestring, "effective") == 0))
        note(CLI_EXIT_NOT_APPLIED); /* ineffective, refused, unknown: no process took it */
    if (!*ret_failed)
        render_skipped(target, json, out);
    if (!*ret_failed && req->wait_s >= 0 && req->client_token[0] && cJSON_IsString(st) &&
        strcmp(st->valuestring, "effective") == 0)
        wait_outcomes(req, target, port, timeout_s, json, out);
    cJSON_Delete(json);
    free(reply);
}
