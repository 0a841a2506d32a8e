/* prom_http: the Prometheus pull endpoint (docs/design/daemon.md#prometheus-endpoint) on libevent's HTTP server (evhttp), run on
 * the daemon's one loop: GET/HEAD /metrics renders the promfam store, other paths 404,
 * other methods 405, Connection: close, bounded connections and per-connection deadlines. */
#ifndef MSMON_DAEMON_PROM_HTTP_H
#define MSMON_DAEMON_PROM_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/loop.h"
#include "daemon/sinks/promfam.h"

#define PROM_HTTP_READ_TIMEOUT_S 2     /* docs/design/daemon.md#prometheus-endpoint: idle read timeout per connection */
#define PROM_HTTP_CONN_DEADLINE_MS 10000 /* whole-connection cap (slowloris) */
#define PROM_HTTP_MAX_CONNS 256        /* beyond this the listener pauses (fds stay for RPC/IPC) */
#define PROM_HTTP_PAGE_TTL_MS 1000     /* a rendered page is reused by scrapes within this time */
#define PROM_HTTP_MAX_PAGES 2          /* rendered pages alive at once (current + one being sent) */
#define PROM_HTTP_MAX_SCRAPES 64       /* responses in flight; beyond: 503 with Retry-After: 1 */
/* A response whose reader takes fewer than PROM_HTTP_MIN_PROGRESS bytes in
 * PROM_HTTP_WRITE_STALL_MS is cut and counted (once a request is read, evhttp's own timeout is
 * lifted to the connection deadline so that it never closes a stalled scrape first; a
 * zero-window probe's byte does not count as reading). */
#define PROM_HTTP_WRITE_STALL_MS 1500
#define PROM_HTTP_MIN_PROGRESS 4096

struct prom_http;

struct prom_http_stats {
    uint64_t requests;     /* answered requests, any status */
    uint64_t expired;      /* connections cut at the deadline */
    uint64_t paused;       /* times the listener paused (connection cap or accept errors) */
    uint64_t open;         /* connections open now */
    uint64_t stalled;      /* connections cut for reading nothing for PROM_HTTP_WRITE_STALL_MS */
    uint64_t busy;         /* scrapes answered 503 at PROM_HTTP_MAX_SCRAPES */
    uint64_t renders;      /* pages rendered */
    uint64_t pages;        /* rendered pages alive now */
    uint64_t inflight;     /* responses holding a page now */
};

/* Listen on address:port (a host name or numeric address) and serve st (borrowed; outlives
 * the server). On failure returns a negative errno with the reason in err. Caller owns *ret;
 * free with prom_http_destroy(). */
int prom_http_create(struct loop *loop, const char *address, int port, struct promfam_store *st,
                     struct prom_http **ret, char *err, size_t errcap);
/* Port actually bound (useful with port 0 in tests). */
int prom_http_port(const struct prom_http *ph);
void prom_http_stats(const struct prom_http *ph, struct prom_http_stats *ret);
/* Closes the listener and every connection. NULL is a no-op. */
void prom_http_destroy(struct prom_http *ph);

#endif
