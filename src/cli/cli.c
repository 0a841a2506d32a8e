/* cli: global flag handling, start-up output and the per-host fan-out of dyno. The request
 * is built and validated once; up to --parallel worker threads each run one rpc_call per
 * host; results are printed in list order after all hosts are done. */
#include "cli/cli.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli_fanout.h"
#include "cli/cli_outcome.h"
#include "contract/names.h"
#include "cli/cli_val.h"
#include "cli/hosts.h"
#include "cli/rpc_client.h"
#include "common/log.h"
#include "common/strutil.h"

#define ERR_MAX 2048
#define NO_CERTS "NO_CERTS"
#define PARALLEL_MAX 1024

static const struct cli_cmd *const commands[] = {
    &cmd_doctor, &cmd_gputrace, &cmd_npu_monitor, &cmd_nputrace, &cmd_status, &cmd_steps, &cmd_version,
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static const struct cli_flag global_flags[] = {
    {"certs-dir", CLI_FLAG_VALUE, false, NO_CERTS, "NO_CERTS = plain TCP, else a mutual-TLS directory"},
    {"certs-passphrase-file", CLI_FLAG_VALUE, false, NULL, "Passphrase of an encrypted client.key (mode 0600; default: prompt)"},
    {"hostfile", CLI_FLAG_VALUE, false, NULL, "File with more targets, one entry per line ('#' comments)"},
    {"hostname", CLI_FLAG_VALUE, false, "localhost", "Targets: comma list, SLURM ranges node[01-04], unix:[path]"},
    {"parallel", CLI_FLAG_VALUE, false, "32", "Max hosts contacted concurrently"},
    {"port", CLI_FLAG_VALUE, false, NAMES_STR(NAMES_RPC_PORT), "Daemon RPC port"},
    {"timeout-s", CLI_FLAG_VALUE, false, "30", "Per-host limit for connect + request + reply, seconds"},
    {"version", CLI_FLAG_BOOL, false, NULL, "Print dyno's own version"},
};
#define NGLOBAL (sizeof(global_flags) / sizeof(global_flags[0]))

const struct cli_cmd *cli_find_cmd(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++) {
        if (strcmp(commands[i]->name, name) == 0)
            return commands[i];
    }
    return NULL;
}

/* "doctor, gputrace, ...": the command table's names, so a new command is listed by itself. */
static const char *command_names(char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < NCOMMANDS && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", commands[i]->name);
    return buf;
}

static void global_help(FILE *out)
{
    fprintf(out, "Usage: dyno [GLOBAL FLAGS] <SUBCOMMAND> [FLAGS]\n\nSubcommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(out, "  %-12s %s\n", commands[i]->name, commands[i]->about);
    fprintf(out, "\nGlobal flags:\n");
    cli_flags_help(out, global_flags, NGLOBAL);
    fprintf(out, "  %-34s %s\n", "-h, --help", "Print help (also after a subcommand)");
}

static void cmd_help(FILE *out, const struct cli_cmd *c)
{
    fprintf(out, "%s\n\nUsage: dyno [GLOBAL FLAGS] %s [FLAGS]\n\nFlags:\n", c->about, c->name);
    cli_flags_help(out, c->flags, c->nflags);
    fprintf(out, "  %-34s %s\n", "-h, --help", "Print help");
}

/* Everything the workers share; results[i] belongs to hosts.v[i]. */
struct host_result {
    struct cli_buf out;   /* rendered lines */
    char err[ERR_MAX];    /* non-empty when the host failed */
    bool failed;
};

struct fanout {
    const struct cli_cmd *cmd;
    const struct cmd_req *req;
    const struct hosts *hosts;
    uint16_t port;
    int timeout_s;
    struct host_result *results;
};

/* The whole reply must be one JSON value: cJSON alone stops after the first value, so
 * trailing bytes (or an embedded NUL that would cut the printed line short) are refused. */
static cJSON *parse_reply(const char *reply, size_t len)
{
    const char *end = NULL;
    if (memchr(reply, '\0', len))
        return NULL;
    cJSON *json = cJSON_ParseWithLengthOpts(reply, len, &end, false);
    if (!json)
        return NULL;
    while (end && end < reply + len && strchr(" \t\r\n", *end))
        end++;
    if (end != reply + len) {
        cJSON_Delete(json);
        return NULL;
    }
    return json;
}

#define REPLY_SHOWN 200   /* reply bytes quoted in the unparsable-reply message */

/* One-line error for a reply that is not JSON: its first REPLY_SHOWN bytes, control bytes
 * and non-ASCII shown as \xNN so the message never spans lines. */
static void unparsable_msg(const char *reply, size_t len, char *err, size_t errcap)
{
    static const char hex[] = "0123456789abcdef";
    char shown[REPLY_SHOWN * 4 + 1];
    size_t o = 0, k = 0;
    for (; k < len && k < REPLY_SHOWN; k++) {
        unsigned char c = (unsigned char)reply[k];
        if (c >= 0x20 && c < 0x7f) {
            shown[o++] = (char)c;
        } else {
            shown[o++] = '\\';
            shown[o++] = 'x';
            shown[o++] = hex[c >> 4];
            shown[o++] = hex[c & 15];
        }
    }
    shown[o] = '\0';
    snprintf(err, errcap, "Unparsable reply from the server (%zu bytes): %s%s", len, shown,
             k < len ? "..." : "");
}

static void run_one(struct fanout *f, size_t i)
{
    struct host_result *res = &f->results[i];
    char *reply = NULL;
    size_t len = 0;
    enum rpc_fail fail;
    cJSON *json = NULL;
    if (f->cmd->run_host) {
        f->cmd->run_host(f->req, f->hosts->v[i], f->port, f->timeout_s, &res->out, &res->failed,
                         res->err, sizeof(res->err));
        return;
    }
    int r = rpc_call_tls(f->req->tls, f->hosts->v[i], f->port, NULL, f->timeout_s,
                         cli_buf_str(&f->req->body), f->req->body.len, &reply, &len, &fail,
                         res->err, sizeof(res->err));
    if (r < 0) {
        res->failed = true;
        return;
    }
    json = parse_reply(reply, len);
    if (!json) {
        res->failed = true;
        unparsable_msg(reply, len, res->err, sizeof(res->err));
        goto out;
    }
    f->cmd->render(f->req, reply, len, json, &res->out, &res->failed, res->err,
                   sizeof(res->err));
    if (res->out.err) {
        res->failed = true;
        snprintf(res->err, sizeof(res->err), "reply output too large (%zu bytes)", len);
    }
out:
    cJSON_Delete(json);
    free(reply);
}

static void run_one_cb(void *ctx, size_t i)
{
    run_one(ctx, i);
}

/* Print each line of text with `prefix`. */
static void print_prefixed(FILE *out, const char *prefix, const char *text, size_t len)
{
    size_t off = 0;
    while (off < len) {
        const char *nl = memchr(text + off, '\n', len - off);
        size_t n = nl ? (size_t)(nl - (text + off)) : len - off;
        fputs(prefix, out);
        cli_term_write(out, text + off, n);
        fputc('\n', out);
        off += n + 1;
    }
}

static int parse_globals(const struct cli_args *g, uint16_t *ret_port, int *ret_parallel,
                         int *ret_timeout, char *err, size_t errcap)
{
    int64_t v;
    if (cli_val_i64("port", cli_flags_get(g, "port"), 1, 65535, "Must be an integer in [1, 65535]",
                    &v, err, errcap) < 0)
        return -EINVAL;
    *ret_port = (uint16_t)v;
    if (cli_val_i64("parallel", cli_flags_get(g, "parallel"), 1, INT32_MAX,
                    "Must be an integer >= 1", &v, err, errcap) < 0)
        return -EINVAL;
    *ret_parallel = v > PARALLEL_MAX ? PARALLEL_MAX : (int)v;
    if (cli_val_i64("timeout-s", cli_flags_get(g, "timeout-s"), 1, INT32_MAX,
                    "Must be an integer >= 1", &v, err, errcap) < 0)
        return -EINVAL;
    *ret_timeout = (int)v;
    return 0;
}

static int build_hosts(const struct cli_args *g, struct hosts *h, char *err, size_t errcap)
{
    const char *hostfile = cli_flags_get(g, "hostfile");
    const char *hostname = cli_flags_get(g, "hostname");
    char reason[1024];
    /* The default localhost is only used when neither flag was given. */
    if (cli_flags_given(g, "hostname") || !hostfile) {
        if (hosts_add_list(h, hostname, strlen(hostname), reason, sizeof(reason)) < 0) {
            cli_val_err(err, errcap, "hostname", hostname, reason);
            return -EINVAL;
        }
    }
    if (hostfile && hosts_add_file(h, hostfile, err, errcap) < 0)
        return -EINVAL;
    if (h->n == 0) {
        snprintf(err, errcap, "error: invalid value '%s' for '--hostfile': no hosts in the file",
                 hostfile);
        return -EINVAL;
    }
    return 0;
}

int cli_main(int argc, char **argv, FILE *out, FILE *errf)
{
    struct cli_args g, s;
    struct hosts hosts;
    struct cmd_req req;
    struct fanout f;
    char err[ERR_MAX] = "";
    int next = argc, rc = CLI_EXIT_USAGE, r;
    uint16_t port = 0;
    int parallel = 0, timeout_s = 0;
    const struct cli_cmd *cmd;
    const char *certs;
    struct rpc_tls *tls = NULL;

    cli_outcome_reset();
    bool any_unix = false, any_tcp = false;
    size_t nfail = 0;

    hosts_init(&hosts);
    cmd_req_init(&req);
    memset(&f, 0, sizeof(f));

    r = cli_flags_parse(global_flags, NGLOBAL, argc, argv, 1, true, &g, &next, err, sizeof(err));
    if (r == CLI_FLAGS_HELP) {
        global_help(out);
        rc = CLI_EXIT_OK;
        goto out;
    }
    if (r < 0)
        goto usage;
    if (cli_flags_bool(&g, "version")) {
        fprintf(out, "dyno %s\n", MSMON_VERSION);
        rc = CLI_EXIT_OK;
        goto out;
    }
    if (next >= argc) {
        char names[256];
        snprintf(err, sizeof(err), "error: a subcommand is required (%s); see 'dyno --help'",
                 command_names(names, sizeof(names)));
        goto usage;
    }
    cmd = cli_find_cmd(argv[next]);
    if (!cmd) {
        char names[256], shown[256];
        snprintf(err, sizeof(err), "error: unknown subcommand '%s' (%s)",
                 cli_term_str(argv[next], shown, sizeof(shown)), command_names(names, sizeof(names)));
        goto usage;
    }
    r = cli_flags_parse(cmd->flags, cmd->nflags, argc, argv, next + 1, false, &s, NULL, err,
                        sizeof(err));
    if (r == CLI_FLAGS_HELP) {
        cmd_help(out, cmd);
        rc = CLI_EXIT_OK;
        goto out;
    }
    if (r < 0 || parse_globals(&g, &port, &parallel, &timeout_s, err, sizeof(err)) < 0 ||
        build_hosts(&g, &hosts, err, sizeof(err)) < 0)
        goto usage;
    for (size_t i = 0; i < hosts.n; i++) {
        if (strncmp(hosts.v[i], HOSTS_UNIX_PREFIX, 5) == 0)
            any_unix = true;
        else
            any_tcp = true;
    }

    /* Start-up lines (docs/design/cli.md#invocation). */
    certs = cli_flags_get(&g, "certs-dir");
    if (geteuid() == 0)
        fprintf(out, "Security Warning: Do not run this tool as root. Running with elevated "
                "privileges may compromise system security. Use a regular user account.\n");
    if (strcmp(certs, NO_CERTS) == 0) {
        fprintf(out, "Running in no-certificate mode\n");
    } else {
        struct stat st;
        fprintf(out, "Running in certificate mode\n");
        if (stat(certs, &st) != 0 || !S_ISDIR(st.st_mode)) {
            snprintf(err, sizeof(err), "--certs-dir must be a valid directory!");
            goto usage;
        }
        if (any_unix)
            fprintf(out, "Note: TLS is not used for local socket targets\n");
    }

    req.args = &s;
    if (cmd->prepare(&s, &req, err, sizeof(err)) < 0) {
        if (!err[0])
            snprintf(err, sizeof(err), "error: request too large");
        goto usage;
    }
    if (req.body.err || req.body.len > RPC_REQ_MAX) {
        snprintf(err, sizeof(err), "error: request too large (%zu bytes, limit %d)",
                 req.body.err ? (size_t)CMD_TEXT_MAX : req.body.len, RPC_REQ_MAX);
        goto usage;
    }
    fputs(cli_buf_str(&req.echo), out);
    if (strcmp(certs, NO_CERTS) != 0 && any_tcp) {
        /* docs/design/rpc.md#cli-certificates: certificates checked and the key decrypted once, before any
         * connection, whatever the number of hosts; a failure is exit 1 with the reason. */
        r = rpc_tls_create(certs, cli_flags_get(&g, "certs-passphrase-file"), out, &tls, err,
                           sizeof(err));
        if (r < 0) {
            fflush(out);
            fprintf(errf, "%s\n", err);
            rc = CLI_EXIT_RUNTIME;
            goto out;
        }
        req.tls = tls;
    }
    fflush(out);
    /* one deadline for the whole command from the first connection on (docs/cli.md): hosts
     * that answer slowly or hugely cannot stretch a cluster command past --timeout-s */
    rpc_set_overall_deadline(clock_mono_ns() + (uint64_t)timeout_s * 1000000000ull);
    if (cmd->run_all) {
        struct cli_targets t = { &hosts, port, timeout_s, parallel, tls };
        r = cmd->run_all(&req, &t, out, errf);
        if (r != CMD_RUN_DEFAULT) {
            rc = r;
            goto out;
        }
    }

    f.cmd = cmd;
    f.req = &req;
    f.hosts = &hosts;
    f.port = port;
    f.timeout_s = timeout_s;
    f.results = calloc(hosts.n, sizeof(*f.results));
    if (!f.results) {
        fprintf(errf, "error: out of memory\n");
        rc = CLI_EXIT_RUNTIME;
        goto out;
    }
    for (size_t i = 0; i < hosts.n; i++)
        cli_buf_init(&f.results[i].out, CMD_TEXT_MAX);
    r = cli_fanout(hosts.n, parallel, run_one_cb, &f);
    if (r < 0) {
        fprintf(errf, "error: cannot start worker threads: %s\n", errno_name(-r));
        rc = CLI_EXIT_RUNTIME;
        goto out_results;
    }
    for (size_t i = 0; i < hosts.n; i++) {
        struct host_result *res = &f.results[i];
        nfail += res->failed;
        if (hosts.n == 1) {
            cli_term_write(out, cli_buf_str(&res->out), res->out.len);
            fflush(out);
            /* a command that printed its own verdict (doctor's total) leaves err empty */
            if (res->failed && res->err[0]) {
                cli_term_write(errf, res->err, strlen(res->err));
                fputc('\n', errf);
            }
            continue;
        }
        char prefix[1100];
        snprintf(prefix, sizeof(prefix), "[%s] ", hosts.v[i]);
        print_prefixed(out, prefix, cli_buf_str(&res->out), res->out.len);
        if (res->failed && res->err[0]) {
            fprintf(out, "%sERROR: ", prefix);
            cli_term_write(out, res->err, strlen(res->err));
            fputc('\n', out);
        }
    }
    if (hosts.n > 1)
        fprintf(out, "Summary: %zu hosts, %zu succeeded, %zu failed\n", hosts.n,
                hosts.n - nfail, nfail);
    /* every host replied: the worst per-process outcome decides (cli_outcome.h) */
    rc = nfail ? CLI_EXIT_RUNTIME : cli_outcome_exit();
out_results:
    for (size_t i = 0; i < hosts.n; i++)
        cli_buf_fini(&f.results[i].out);
    free(f.results);
    goto out;
usage:
    fflush(out);
    fprintf(errf, "%s\n", err);
    rc = CLI_EXIT_USAGE;
out:
    rpc_set_overall_deadline(0); /* a later call in this process (tests) starts afresh */
    fflush(out);
    fflush(errf);
    cmd_req_fini(&req);
    rpc_tls_destroy(tls);
    hosts_fini(&hosts);
    return rc;
}
