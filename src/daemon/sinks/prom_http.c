/* prom_http: evhttp on the daemon's event_base. Connections are tracked through the
 * bufferevent we hand evhttp (one extra reference each) so that a sweep timer can cut any
 * connection older than PROM_HTTP_CONN_DEADLINE_MS (a slowloris keeps the idle timeout
 * alive byte by byte) and pause the listener at PROM_HTTP_MAX_CONNS; the fds the daemon needs
 * for RPC and IPC are never exhausted by scrapers. The sweep notices that evhttp has freed a
 * connection because bufferevent_free() clears the callbacks, and drops its reference then.
 * Every response references one shared, refcounted rendered page (no copy per connection);
 * at most PROM_HTTP_MAX_PAGES pages are alive, PROM_HTTP_MAX_SCRAPES responses are in flight
 * (beyond: 503), and a reader that takes nothing for PROM_HTTP_WRITE_STALL_MS is cut, so
 * scrapers that never read cost at most a page (docs/security.md, docs/prometheus.md).
 * Pages are rendered on a thread of their own: a scrape that needs a new page is parked until
 * the renderer hands it over through an eventfd, and the loop serves RPC and IPC meanwhile. */
#include "daemon/sinks/prom_http.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/thr.h"

#define SWEEP_MS 100
#define ACCEPT_PAUSE_MS 200

struct tracked {
    struct bufferevent *bev;
    uint64_t deadline_ms;
    uint64_t progress_ms;          /* last time its output shrank by PROM_HTTP_MIN_PROGRESS */
    size_t mark_out;               /* output bytes queued at that time */
    bool cut;
};

/* What the pages count: apart from the server because libevent may free a connection's
 * buffers (and so release a page) after prom_http_destroy, in its deferred finalizers; the
 * last page out frees an orphaned pool. */
struct page_pool {
    int npages;                    /* pages alive: the current one and those still being sent */
    int inflight;                  /* responses holding a page */
    bool orphaned;                 /* the server is gone */
};

/* One rendered /metrics page shared by every response that sends it. refs: one for the
 * server while it is the current page, one per response still holding it. */
struct page {
    struct page_pool *pool;
    char *text;
    size_t len;
    uint64_t rendered_ms;          /* monotonic */
    uint64_t version;              /* the store's version it shows */
    int refs;
};

/* The render thread and what it hands the loop; mu guards every field the two share. */
struct renderer {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t th;
    struct promfam_store *st;      /* borrowed */
    int efd;                       /* eventfd: "a page is done", read on the loop */
    bool want, quit, done;
    uint64_t now_ms;               /* wall clock the render asked for */
    char *text;                    /* the result when done (rc 0) */
    size_t len;
    int rc;
};

struct prom_http {
    struct event_base *base;
    struct evhttp *http;
    struct evconnlistener *lis;    /* owned by http once bound */
    struct loop_event *sweep;
    struct promfam_store *st;
    int port;
    struct tracked *conns;
    size_t nconns, cap;
    bool paused;
    uint64_t resume_ms;            /* accept-error pause: resume after this time */
    struct prom_http_stats stats;
    struct log_ratelimit rl_accept, rl_busy, rl_stall;
    struct page *page;             /* the current page, or NULL */
    struct page_pool *pool;
    uint64_t counters_ms;          /* monotonic: last refresh of the refused-scrapes series */
    struct renderer *r;
    bool r_started;                /* its thread runs */
    struct loop_event *r_ev;       /* watches r->efd */
    bool rendering;                /* a render was asked for and not yet handed over */
    uint64_t render_version;       /* the store's version when it was asked for */
    struct evhttp_request *parked[PROM_HTTP_MAX_SCRAPES];   /* scrapes waiting for it */
    size_t nparked;
};

static uint64_t mono_ms(void) { return clock_mono_ns() / 1000000u; }

static void pause_listener(struct prom_http *ph, uint64_t until_ms)
{
    if (!ph->paused) {
        evconnlistener_disable(ph->lis);
        ph->paused = true;
        ph->stats.paused++;
    }
    if (until_ms > ph->resume_ms)
        ph->resume_ms = until_ms;
}

static struct bufferevent *make_bev(struct event_base *base, void *arg)
{
    struct prom_http *ph = arg;
    struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (!bev)
        return NULL;
    if (ph->nconns == ph->cap) {
        size_t nc = ph->cap ? ph->cap * 2 : 64;
        struct tracked *t = realloc(ph->conns, nc * sizeof(*t));
        if (!t)
            return bev; /* untracked: evhttp's own timeouts still apply */
        ph->conns = t;
        ph->cap = nc;
    }
    bufferevent_incref(bev);
    uint64_t now = mono_ms();
    ph->conns[ph->nconns++] = (struct tracked){ bev, now + PROM_HTTP_CONN_DEADLINE_MS, now, 0, false };
    if (ph->nconns >= PROM_HTTP_MAX_CONNS)
        pause_listener(ph, 0);
    return bev;
}

/* The scrapes this server turned away or cut, as series on the page itself (set from the
 * start, so the set of series a remote-write snapshot carries does not change). */
static void set_counters(struct prom_http *ph, uint64_t now_ms)
{
    static const char *const reasons[] = { "stalled", "deadline", "busy" };
    const uint64_t counts[] = { ph->stats.stalled, ph->stats.expired, ph->stats.busy };
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
        struct promfam_label l = { "reason", reasons[i] };
        promfam_store_set(ph->st, "msmonitor_prometheus_refused_scrapes", &l, 1, (double)counts[i], now_ms);
    }
}

static void on_sweep(struct loop_event *ev, void *arg)
{
    struct prom_http *ph = arg;
    uint64_t now = mono_ms();
    size_t j = 0;
    (void)ev;
    for (size_t i = 0; i < ph->nconns; i++) {
        struct tracked *t = &ph->conns[i];
        bufferevent_data_cb r = NULL, w = NULL;
        bufferevent_event_cb e = NULL;
        bufferevent_getcb(t->bev, &r, &w, &e, NULL);
        if (!r && !w && !e) {          /* evhttp freed it: ours is the last reference */
            bufferevent_decref(t->bev);
            continue;
        }
        size_t out = evbuffer_get_length(bufferevent_get_output(t->bev));
        /* a zero-window probe takes a byte now and then: only real reading counts */
        if (out == 0 || out + PROM_HTTP_MIN_PROGRESS <= t->mark_out || out > t->mark_out) {
            t->progress_ms = now;
            t->mark_out = out;
        }
        bool stalled = out > 0 && now - t->progress_ms >= PROM_HTTP_WRITE_STALL_MS;
        if (!t->cut && (now >= t->deadline_ms || stalled)) {
            int fd = bufferevent_getfd(t->bev);
            /* evhttp sees EOF/error and frees the connection itself (and the page reference) */
            if (fd >= 0)
                shutdown(fd, SHUT_RDWR);
            t->cut = true;
            if (stalled) {
                ph->stats.stalled++;
                LOG_RL(&ph->rl_stall, 10000, LOG_LVL_WARNING,
                       "prometheus: cut a stalled scrape: it read under %d bytes in %d ms (%zu bytes unsent; "
                       "%llu so far)", PROM_HTTP_MIN_PROGRESS, PROM_HTTP_WRITE_STALL_MS, out,
                       (unsigned long long)ph->stats.stalled);
            } else {
                ph->stats.expired++;
            }
        }
        ph->conns[j++] = *t;
    }
    ph->nconns = j;
    ph->stats.open = j;
    if (now - ph->counters_ms >= 10000) {     /* refreshed, so they never go stale */
        ph->counters_ms = now;
        set_counters(ph, clock_real_ns() / 1000000u);
    }
    if (ph->paused && ph->nconns < PROM_HTTP_MAX_CONNS * 3 / 4 && now >= ph->resume_ms) {
        evconnlistener_enable(ph->lis);
        ph->paused = false;
    }
}

static void on_accept_error(struct evconnlistener *lis, void *arg)
{
    struct prom_http *ph = arg;
    int err = EVUTIL_SOCKET_ERROR();
    (void)lis;
    /* EMFILE/ENFILE/ENOBUFS would fire again at once (level-triggered): pause instead of spin */
    LOG_RL(&ph->rl_accept, 10000, LOG_LVL_WARNING, "prometheus: accept failed: %s; pausing the listener %d ms",
           strerror(err), ACCEPT_PAUSE_MS);
    pause_listener(ph, mono_ms() + ACCEPT_PAUSE_MS);
}

static void page_unref(struct page *pg)
{
    struct page_pool *pool = pg->pool;
    if (--pg->refs > 0)
        return;
    free(pg->text);
    free(pg);
    if (--pool->npages == 0 && pool->orphaned)
        free(pool);
}

/* evbuffer cleanup: a response is done with its page (sent, cut or freed with evhttp) */
static void page_release(const void *data, size_t len, void *arg)
{
    struct page *pg = arg;
    (void)data;
    (void)len;
    pg->pool->inflight--;
    page_unref(pg);
}

/* The page a scrape may have now without a render: the current one while it is younger than
 * PROM_HTTP_PAGE_TTL_MS or shows the store's current version, or while no other page fits
 * (never more than PROM_HTTP_MAX_PAGES alive). NULL: a render is due. */
static struct page *usable_page(struct prom_http *ph)
{
    uint64_t mono = mono_ms();
    struct page *pg = ph->page;
    if (!pg)
        return NULL;
    if (mono - pg->rendered_ms < PROM_HTTP_PAGE_TTL_MS || ph->pool->npages >= PROM_HTTP_MAX_PAGES)
        return pg;
    uint64_t now_ms = clock_real_ns() / 1000000u;
    set_counters(ph, now_ms);
    promfam_store_publish(ph->st, now_ms);
    if (promfam_store_version(ph->st) == pg->version) {
        pg->rendered_ms = mono;    /* nothing changed: the same text, valid for another TTL */
        return pg;
    }
    return NULL;
}

/* Ask the render thread for a page (the counters were refreshed by usable_page). */
static void start_render(struct prom_http *ph)
{
    struct renderer *r = ph->r;
    if (ph->rendering)
        return;
    if (!ph->page) {               /* the first page: usable_page did not refresh them */
        uint64_t now_ms = clock_real_ns() / 1000000u;
        set_counters(ph, now_ms);
        promfam_store_publish(ph->st, now_ms);
    }
    ph->rendering = true;
    ph->render_version = promfam_store_version(ph->st);
    pthread_mutex_lock(&r->mu);
    r->now_ms = clock_real_ns() / 1000000u;
    r->want = true;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static void *render_main(void *arg)
{
    struct renderer *r = arg;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (!r->want && !r->quit)
            pthread_cond_wait(&r->cv, &r->mu);
        if (r->quit)
            break;
        r->want = false;
        uint64_t now_ms = r->now_ms;
        pthread_mutex_unlock(&r->mu);
        char *text = NULL;
        size_t len = 0;
        int rc = promfam_store_render(r->st, now_ms, &text, &len);
        pthread_mutex_lock(&r->mu);
        r->text = text;
        r->len = len;
        r->rc = rc;
        r->done = true;
        uint64_t one = 1;
        (void)!write(r->efd, &one, sizeof(one));
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* Headers and the shared page's bytes (a reference, never a copy), then the reply. */
static void send_page(struct prom_http *ph, struct evhttp_request *req, struct page *pg)
{
    struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
    struct evbuffer *body = evhttp_request_get_output_buffer(req);
    evhttp_add_header(oh, "Content-Type", "text/plain; version=0.0.4");
    if (pg->len > 0) {
        pg->refs++;
        ph->pool->inflight++;
        if (evbuffer_add_reference(body, pg->text, pg->len, page_release, pg) != 0) {
            ph->pool->inflight--;
            page_unref(pg);
            evhttp_send_error(req, HTTP_INTERNAL, NULL);
            return;
        }
    }
    evhttp_send_reply(req, HTTP_OK, "OK", NULL);
}

/* The renderer is done: its text becomes the current page and the parked scrapes get it (or,
 * when the render failed, the previous page, or a 500 without one). A parked scrape whose
 * connection has gone meanwhile is freed by the reply (evhttp keeps it until then). */
static void on_rendered(struct loop_event *ev, int fd, unsigned events, void *arg)
{
    struct prom_http *ph = arg;
    struct renderer *r = ph->r;
    uint64_t cnt;
    (void)ev;
    (void)events;
    (void)!read(fd, &cnt, sizeof(cnt));
    pthread_mutex_lock(&r->mu);
    bool done = r->done;
    char *text = r->text;
    size_t len = r->len;
    int rc = r->rc;
    r->done = false;
    r->text = NULL;
    pthread_mutex_unlock(&r->mu);
    if (!done)
        return;
    ph->rendering = false;
    struct page *pg = rc == 0 ? calloc(1, sizeof(*pg)) : NULL;
    if (pg) {
        pg->pool = ph->pool;
        pg->text = text;
        pg->len = len;
        pg->rendered_ms = mono_ms();
        pg->version = ph->render_version;
        pg->refs = 1;
        ph->pool->npages++;
        ph->stats.renders++;
        if (ph->page)
            page_unref(ph->page);
        ph->page = pg;
    } else {
        free(text);
        LOG_RL(&ph->rl_accept, 10000, LOG_LVL_ERROR, "prometheus: cannot render /metrics: %s",
               strerror(rc ? -rc : ENOMEM));
    }
    size_t n = ph->nparked;
    ph->nparked = 0;
    for (size_t i = 0; i < n; i++) {
        if (ph->page)
            send_page(ph, ph->parked[i], ph->page);
        else
            evhttp_send_error(ph->parked[i], HTTP_INTERNAL, NULL);
    }
}

static void on_request(struct evhttp_request *req, void *arg)
{
    struct prom_http *ph = arg;
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
    struct evbuffer *body = evhttp_request_get_output_buffer(req);

    ph->stats.requests++;
    /* The request is in: from here the sweep watches the write side (a reader taking under
     * PROM_HTTP_MIN_PROGRESS in PROM_HTTP_WRITE_STALL_MS is cut and counted). evhttp's own write
     * timeout, re-armed at each write, would otherwise race it: on a loaded machine the sweep
     * sees the last write up to a delayed loop iteration late, and evhttp closed the stalled
     * scrape first, uncounted. The whole-connection deadline still bounds it. */
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    if (evcon) {
        struct timeval tv = { PROM_HTTP_CONN_DEADLINE_MS / 1000, 0 };
        evhttp_connection_set_timeout_tv(evcon, &tv);
    }
    evhttp_add_header(oh, "Connection", "close");
    if (!path || strcmp(path, "/metrics") != 0) {
        evhttp_add_header(oh, "Content-Type", "text/plain; charset=utf-8");
        evbuffer_add_printf(body, "404 page not found\n");
        evhttp_send_reply(req, HTTP_NOTFOUND, "Not Found", NULL);
        return;
    }
    if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
        evhttp_add_header(oh, "Allow", "GET, HEAD");
        evhttp_add_header(oh, "Content-Type", "text/plain; charset=utf-8");
        evbuffer_add_printf(body, "405 method not allowed\n");
        evhttp_send_reply(req, 405, "Method Not Allowed", NULL);
        return;
    }
    if ((size_t)ph->pool->inflight + ph->nparked >= PROM_HTTP_MAX_SCRAPES) {
        ph->stats.busy++;
        LOG_RL(&ph->rl_busy, 10000, LOG_LVL_WARNING,
               "prometheus: %d scrapes in flight, answering 503 (%llu so far)",
               ph->pool->inflight + (int)ph->nparked, (unsigned long long)ph->stats.busy);
        evhttp_add_header(oh, "Retry-After", "1");
        evhttp_add_header(oh, "Content-Type", "text/plain; charset=utf-8");
        evbuffer_add_printf(body, "503 too many concurrent scrapes\n");
        evhttp_send_reply(req, 503, "Service Unavailable", NULL);
        return;
    }
    struct page *pg = usable_page(ph);
    if (pg) {
        send_page(ph, req, pg);
        return;
    }
    /* wait for a fresh page, rendered off the loop */
    ph->parked[ph->nparked++] = req;
    start_render(ph);
}

/* The render thread with its eventfd on the loop; stopped and freed by renderer_stop. */
static int renderer_start(struct prom_http *ph, struct loop *loop)
{
    struct renderer *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->st = ph->st;
    r->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (r->efd < 0) {
        int rc = -errno;
        free(r);
        return rc;
    }
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    ph->r = r;
    int rc = loop_fd_add(loop, r->efd, LOOP_READ, on_rendered, ph, &ph->r_ev);
    if (rc == 0)
        rc = thr_start(&r->th, "dynologPromPage", render_main, r, THR_JOINABLE);
    if (rc == 0)
        ph->r_started = true;
    return rc;
}

static void renderer_stop(struct prom_http *ph)
{
    struct renderer *r = ph->r;
    if (!r)
        return;
    if (ph->r_started) {
        pthread_mutex_lock(&r->mu);
        r->quit = true;
        pthread_cond_signal(&r->cv);
        pthread_mutex_unlock(&r->mu);
        pthread_join(r->th, NULL);
    }
    loop_event_free(ph->r_ev);
    close(r->efd);
    free(r->text);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    free(r);
    ph->r = NULL;
}

static int listen_on(const char *address, int port, int *ret_fd, char *err, size_t errcap)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE };
    struct addrinfo *res = NULL;
    char svc[16];
    int rc, fd = -1, one = 1, e = 0;
    snprintf(svc, sizeof(svc), "%d", port);
    rc = getaddrinfo(address[0] ? address : NULL, svc, &hints, &res);
    if (rc != 0) {
        snprintf(err, errcap, "cannot resolve --prometheus_address '%s': %s", address, gai_strerror(rc));
        return -EINVAL;
    }
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            e = errno;
            continue;
        }
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 128) == 0)
            break;
        e = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        snprintf(err, errcap, "cannot listen on %s:%d for Prometheus: %s", address, port, strerror(e));
        return -(e ? e : EADDRNOTAVAIL);
    }
    *ret_fd = fd;
    return 0;
}

int prom_http_create(struct loop *loop, const char *address, int port, struct promfam_store *st,
                     struct prom_http **ret, char *err, size_t errcap)
{
    struct prom_http *ph = calloc(1, sizeof(*ph));
    int fd = -1, rc;
    *ret = NULL;
    if (!ph)
        return -ENOMEM;
    ph->base = loop_backend(loop);
    ph->st = st;
    ph->pool = calloc(1, sizeof(*ph->pool));
    if (!ph->pool) {
        free(ph);
        return -ENOMEM;
    }
    rc = listen_on(address, port, &fd, err, errcap);
    if (rc)
        goto out_free;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        ph->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                  : ((struct sockaddr_in *)&ss)->sin_port);
    rc = -ENOMEM;
    ph->http = evhttp_new(ph->base);
    if (!ph->http)
        goto out_fd;
    /* backlog 0: the socket is already listening */
    ph->lis = evconnlistener_new(ph->base, NULL, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd);
    if (!ph->lis)
        goto out_http;
    fd = -1;
    if (!evhttp_bind_listener(ph->http, ph->lis)) {
        evconnlistener_free(ph->lis);
        goto out_http;
    }
    evconnlistener_set_error_cb(ph->lis, on_accept_error);
    evhttp_set_timeout(ph->http, PROM_HTTP_READ_TIMEOUT_S);
    evhttp_set_max_headers_size(ph->http, 8192);
    evhttp_set_max_body_size(ph->http, 4096);
    /* every method reaches on_request so that it can answer 405 (evhttp would say 501) */
    evhttp_set_allowed_methods(ph->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT |
                                             EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
                                             EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
    evhttp_set_bevcb(ph->http, make_bev, ph);
    evhttp_set_gencb(ph->http, on_request, ph);
    if (loop_timer_add(loop, SWEEP_MS, true, on_sweep, ph, &ph->sweep) != 0)
        goto out_http;
    rc = renderer_start(ph, loop);
    if (rc)
        goto out_render;
    set_counters(ph, clock_real_ns() / 1000000u);
    *ret = ph;
    return 0;
out_render:
    renderer_stop(ph);
    loop_event_free(ph->sweep);
out_http:
    evhttp_free(ph->http);
out_fd:
    if (fd >= 0)
        close(fd);
    snprintf(err, errcap, "cannot start the Prometheus HTTP server: %s", strerror(-rc));
out_free:
    free(ph->pool);
    free(ph);
    return rc;
}

int prom_http_port(const struct prom_http *ph) { return ph->port; }

void prom_http_stats(const struct prom_http *ph, struct prom_http_stats *ret)
{
    *ret = ph->stats;
    ret->pages = (uint64_t)ph->pool->npages;
    ret->inflight = (uint64_t)ph->pool->inflight;
}

void prom_http_destroy(struct prom_http *ph)
{
    if (!ph)
        return;
    renderer_stop(ph);         /* a render in progress finishes first */
    for (size_t i = 0; i < ph->nparked; i++)   /* a reply also frees one whose peer left */
        evhttp_send_error(ph->parked[i], HTTP_SERVUNAVAIL, NULL);
    ph->nparked = 0;
    loop_event_free(ph->sweep);
    evhttp_free(ph->http);     /* frees the listener and every connection (bufferevent_free) */
    for (size_t i = 0; i < ph->nconns; i++)
        bufferevent_decref(ph->conns[i].bev);
    /* responses may still hold pages until libevent runs its finalizers: they free the pool */
    ph->pool->orphaned = true;
    if (ph->page)
        page_unref(ph->page);
    else if (ph->pool->npages == 0)
        free(ph->pool);
    free(ph->conns);
    free(ph);
}
