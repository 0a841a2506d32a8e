/* cli_gather: one request body to every target, the parsed replies kept for a merged view
 * (docs/cluster.md): `dyno status` over many hosts, `dyno steps`, `nputrace --aligned`. */
#ifndef MSMON_CLI_GATHER_H
#define MSMON_CLI_GATHER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

struct hosts;

/* Most rows one host contributes to a merged view (status table, steps): a node has tens of
 * processes; a hostile host answering 200,000 gets this many and a "not shown" count. */
#define CLI_HOST_ROWS_MAX 4096

struct rpc_tls;

struct cli_targets {
    const struct hosts *hosts; /* borrowed */
    uint16_t port;
    int timeout_s;
    int parallel;              /* most hosts contacted at once */
    const struct rpc_tls *tls; /* mutual TLS for TCP hosts, NULL = plain (borrowed) */
};

struct cli_reply {
    const char *host;   /* borrowed from the targets */
    cJSON *json;        /* parsed reply (an object), NULL when failed */
    char err[512];      /* why it failed */
    bool failed;
};

/* Send body to every target with up to t->parallel threads; ret has t->hosts->n slots
 * (caller-provided), filled in target order. 0, or -errno when no thread could start.
 * Free the replies with cli_gather_fini(). */
int cli_gather(const struct cli_targets *t, const char *body, size_t len, struct cli_reply *ret);
void cli_gather_fini(struct cli_reply *r, size_t n);

/* A number from a reply as an integer: def unless v is a number within [lo, hi] (a hostile
 * 1e300 must never reach a double-to-integer conversion, which is undefined behaviour). */
int64_t cli_json_i64(const cJSON *v, int64_t lo, int64_t hi, int64_t def);

#endif
