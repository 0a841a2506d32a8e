/* rw_sender: remote-write push (Prometheus remote write 1.0). A loop timer snapshots the
 * promfam store every interval into the bounded rw_queue; one thread drains it over libcurl
 * (http or https), retrying 5xx/429/network errors with capped exponential back-off and
 * dropping batches refused with another 4xx. The loop never waits on the network. */
#ifndef MSMON_DAEMON_RW_SENDER_H
#define MSMON_DAEMON_RW_SENDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/loop.h"
#include "daemon/sinks/promfam.h"

#define RW_MAX_HEADERS 32
#define RW_BACKOFF_MIN_MS 100
#define RW_BACKOFF_MAX_MS 5000
#define RW_MAX_SAMPLES_PER_SEND 50000
#define RW_EXIT_FLUSH_MS 1000     /* at stop, queued samples get this long if the receiver is up */

struct rw_cfg {
    const char *url;           /* http:// or https:// */
    int interval_s;            /* snapshot cadence, >= 1 */
    int timeout_s;             /* per request */
    const char *headers;       /* "Name=value,Name=value" or "@FILE" ("Name: value" lines); may be "" */
    size_t queue_samples;
    size_t queue_bytes;
    const char *ca_file;       /* "" = the system store */
    bool insecure;             /* skip TLS certificate and host name checks */
};

struct rw_sender;

struct rw_stats {
    uint64_t produced;         /* samples offered to the queue */
    uint64_t sent;             /* samples the receiver accepted (2xx) */
    uint64_t dropped_full;     /* oldest dropped from a full queue */
    uint64_t rejected;         /* refused with a 4xx other than 429: dropped, never retried */
    uint64_t queued;           /* in the queue now */
    uint64_t queued_bytes;
    uint64_t requests, failures;
    bool up;
};

/* Parsed extra headers: "Name: value" strings. */
struct rw_headers {
    char *line[RW_MAX_HEADERS];
    size_t n;
};
/* Parse cfg->headers. Names must be HTTP tokens, values printable (no CR/LF); the headers
 * the protocol sets (Content-Type, Content-Encoding, X-Prometheus-Remote-Write-Version,
 * Content-Length, Host, Transfer-Encoding, Expect, User-Agent) are refused. The error names
 * the bad header (never its value: it may be a secret). */
int rw_headers_parse(const char *text, struct rw_headers *ret, char *err, size_t errcap);
void rw_headers_fini(struct rw_headers *h);
/* A URL the sender accepts: http(s) scheme, a host, no spaces or control bytes. */
int rw_url_check(const char *url, char *err, size_t errcap);

/* Validates cfg (copied), starts the thread and the loop timer. st is borrowed and must
 * outlive the sender. Caller owns *ret; free with rw_sender_destroy(). Call curl_global_init
 * (rw_global_init) before any thread exists. */
int rw_sender_create(struct loop *loop, struct promfam_store *st, const struct rw_cfg *cfg,
                     struct rw_sender **ret, char *err, size_t errcap);
/* Take one snapshot now (also what the timer does); for tests and the benchmark. */
void rw_sender_snapshot(struct rw_sender *rw);
void rw_sender_stats(struct rw_sender *rw, struct rw_stats *ret);
/* Stops the timer and the thread (a request in flight is aborted), flushes for at most
 * RW_EXIT_FLUSH_MS when the receiver is up, logs one summary line. NULL is a no-op. */
void rw_sender_destroy(struct rw_sender *rw);

/* Load libcurl (rw_curl.h) and curl_global_init; -ENOENT with the reason in err when libcurl
 * is not installed. */
int rw_global_init(char *err, size_t errcap);
void rw_global_cleanup(void);

#endif
