/* cmd: the dyno command table entry. Each subcommand lives in cmd_<name>.c and provides a
 * flag table, `prepare` (validate flags, build config text and request body — all before
 * any connection) and `render` (turn one host's reply into output lines). */
#ifndef MSMON_CLI_CMD_H
#define MSMON_CLI_CMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "cli/cli_buf.h"
#include "cli/cli_flags.h"
#include "cli/cli_gather.h"

struct rpc_tls;

#define CMD_TEXT_MAX (8u << 20)   /* cap for config/body/echo buffers (argv is bounded too) */

struct cmd_req {
    struct cli_buf config;   /* key=value text (empty for status/version) */
    struct cli_buf body;     /* the RPC request body */
    struct cli_buf echo;     /* printed once before contacting hosts (warnings, config echo) */
    /* Inputs to render (borrowed from argv). */
    const char *log_file;
    bool profile_memory;
    bool fail_on_no_process;
    const struct cli_args *args;   /* the subcommand's parsed flags (borrowed; for run_host) */
    const struct rpc_tls *tls;     /* mutual TLS for TCP targets, NULL = plain (borrowed) */
    /* Waiting commands (cli_outcome.h): the request's client_token ("" = none, the reply is
     * not waited for) and the wait in seconds (< 0: --no-wait). */
    char client_token[40];
    double wait_s;
    /* --pod / --namespace (borrowed from argv; NULL: any): sent as "pod"/"namespace" */
    const char *pod;
    const char *pod_namespace;
};

struct cli_cmd {
    const char *name;
    const char *about;
    const struct cli_flag *flags;   /* any order: --help sorts by name */
    size_t nflags;
    /* 0, or -EINVAL with the one-line usage error in err (exit 2). req is initialised
     * by the caller with cmd_req_init(). */
    int (*prepare)(const struct cli_args *a, struct cmd_req *req, char *err, size_t errcap);
    /* Lines for one reply (each ending in '\n'). `json` is the parsed reply. Sets
     * *ret_failed (and err) when the command counts the host as failed. */
    void (*render)(const struct cmd_req *req, const char *reply, size_t len, const cJSON *json,
                   struct cli_buf *out, bool *ret_failed, char *err, size_t errcap);
    /* Optional: does one host's whole job instead of one rpc_call + render, for commands
     * that send several requests or look at the local node (doctor). Same output contract
     * as render: lines into out, *ret_failed (and err) when the host counts as failed. */
    void (*run_host)(const struct cmd_req *req, const char *target, uint16_t port, int timeout_s,
                     struct cli_buf *out, bool *ret_failed, char *err, size_t errcap);
    /* Optional: sees every target before the per-host path (docs/cluster.md): either does
     * the whole job (merged views: prints, returns an enum cli_exit value) or adjusts req
     * (nputrace --aligned) and returns CMD_RUN_DEFAULT to continue with the per-host path. */
    int (*run_all)(struct cmd_req *req, const struct cli_targets *t, FILE *out, FILE *errf);
};
#define CMD_RUN_DEFAULT 100

extern const struct cli_cmd cmd_doctor;
extern const struct cli_cmd cmd_status;
extern const struct cli_cmd cmd_version;
extern const struct cli_cmd cmd_npu_monitor;
extern const struct cli_cmd cmd_nputrace;
extern const struct cli_cmd cmd_gputrace;
extern const struct cli_cmd cmd_steps;

/* Storage is caller-provided; release with cmd_req_fini(). */
void cmd_req_init(struct cmd_req *req);
void cmd_req_fini(struct cmd_req *req);

/* Body of docs/design/cli.md#request-bodies for setKinetOnDemandRequest from req->config, plus "client_token"
 * when req has one (ours: the daemon keeps the outcomes under it). process_limit 0 means
 * every matching process (CMD_PROCESS_LIMIT_ALL is sent). */
#define CMD_PROCESS_LIMIT_ALL 4096ull /* the daemon's registry cap */
void cmd_build_kineto_body(struct cmd_req *req, long long job_id, const char *pids,
                           unsigned long long process_limit);
/* --pod NAME and --namespace NS (docs/cli.md#selecting-processes-by-pod): the flag rows (tables are
 * sorted: place each by its name), their validation into req->pod/pod_namespace (a name by the
 * contract's rules, else a usage error), and the check that the daemon applied them: it echoes
 * them in its reply; one that does not (an older dynolog) reached every matched process, which
 * dyno says in a Note and counts as a failure. */
#define CMD_FLAG_NAMESPACE \
    {"namespace", CLI_FLAG_VALUE, false, NULL, "Only processes whose pod runs in this namespace (POD_NAMESPACE)"}
#define CMD_FLAG_POD \
    {"pod", CLI_FLAG_VALUE, false, NULL, "Only processes of this pod (POD_NAME, else the container's hostname)"}
int cmd_pod_prepare(const struct cli_args *a, struct cmd_req *req, char *err, size_t errcap);
void cmd_pod_check(const struct cmd_req *req, const cJSON *json, struct cli_buf *out, bool *ret_failed, char *err,
                   size_t errcap);
/* Render helpers shared by the commands. */
/* `render` of status/version: the reply JSON unchanged on one line (docs/design/cli.md#status, #version). */
void cmd_render_verbatim(const struct cmd_req *req, const char *reply, size_t len, const cJSON *json,
                         struct cli_buf *out, bool *ret_failed, char *err, size_t errcap);
void cmd_render_reply_line(const char *reply, struct cli_buf *out);
void cmd_render_note(const cJSON *json, struct cli_buf *out);
/* processesMatched lines; `kineto` selects gputrace's path naming. Returns the number of
 * matched pids (-1 when the key is absent). */
int cmd_render_matched(const cJSON *json, const char *log_file, bool kineto,
                       bool profile_memory, struct cli_buf *out);
/* Output path for pid (nputrace: every ".json" -> "_<pid>.json"; kineto: see docs/design/cli.md#gputrace). */
void cmd_trace_path(const char *log_file, long long pid, bool kineto, struct cli_buf *out);

#endif
