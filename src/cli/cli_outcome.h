/* cli_outcome: dyno waits for what each targeted process made of a command (docs/cli.md
 * "Outcomes and exit codes"): a client_token in the request, then getConfigOutcomes until
 * every triggered process answered or --wait-s passed; one line per process and the exit
 * code of the worst outcome over all hosts. */
#ifndef MSMON_CLI_OUTCOME_H
#define MSMON_CLI_OUTCOME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/cmd.h"

/* The flags of every waiting command, in sorted position by name ("no-wait", "wait-s"). */
#define CLI_OUTCOME_FLAG_NO_WAIT \
    {"no-wait", CLI_FLAG_BOOL, false, NULL, "Return at once instead of waiting for each process's outcome"}
#define CLI_OUTCOME_FLAG_WAIT_S \
    {"wait-s", CLI_FLAG_VALUE, false, "5", "Most seconds to wait for the outcomes (2 poll periods + 1 s)"}
#define CLI_OUTCOME_WAIT_MAX_S 3600

/* Reads --no-wait / --wait-s into req and makes its client_token (also with --no-wait: the
 * daemon then says which processes --process-limit left out). 0, or -EINVAL with the usage
 * line in err. */
int cli_outcome_prepare(const struct cli_args *a, struct cmd_req *req, char *err, size_t errcap);

/* run_host for a waiting command: one setKinetOnDemandRequest, render() of its reply, a line
 * per process left out by --process-limit, then the wait and the outcome lines. A reply
 * whose commandStatus is not `effective` (the command reached no process) is noted as
 * CLI_EXIT_NOT_APPLIED. */
void cli_outcome_run_host(const struct cmd_req *req, const char *target, uint16_t port, int timeout_s,
                          struct cli_buf *out, bool *ret_failed, char *err, size_t errcap,
                          void (*render)(const struct cmd_req *req, const char *reply, size_t len,
                                         const cJSON *json, struct cli_buf *out, bool *ret_failed,
                                         char *err, size_t errcap));

/* Forget the outcomes of an earlier run (cli_main calls it first); the exit code of the
 * worst outcome noted since (cli_exit_worse: CLI_EXIT_OK, _REJECTED, _NOT_APPLIED or
 * _NO_ANSWER). */
void cli_outcome_reset(void);
int cli_outcome_exit(void);

#endif
