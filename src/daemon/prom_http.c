/* prom_http: evhttp on the daemon's event_base. Connections are tracked through the
 * bufferevent we hand evhttp (one extra reference each) so that a sweep timer can cut any
 * connection older than PROM_HTTP_CONN_DEADLINE_MS (a slowloris keeps the idle timeout
 * alive byte by byte) and pause the listener at PROM_HTTP_MAX_CONNS; the fds the daemon needs
 * for RPC and IPC are never exhausted by scrapers. The sweep notices that evhttp has freed a
 * connection because bufferevent_free() clears the callbacks, and drops its reference then. */
#include "daemon/prom_http.h"

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
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"

#define SWEEP_MS 100
#define ACCEPT_PAUSE_MS 200

struct tracked {
    struct bufferevent *bev;
    uint64_t deadline_ms;
    bool cut;
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
    struct log_ratelimit rl_accept;
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
    ph->conns[ph->nconns++] = (struct tracked){ bev, mono_ms() + PROM_HTTP_CONN_DEADLINE_MS, false };
    if (ph->nconns >= PROM_HTTP_MAX_CONNS)
        pause_listener(ph, 0);
    return bev;
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
        if (!t->cut && now >= t->deadline_ms) {
            int fd = bufferevent_getfd(t->bev);
            /* evhttp sees EOF/error and frees the connection itself */
            if (fd >= 0)
                shutdown(fd, SHUT_RDWR);
            t->cut = true;
            ph->stats.expired++;
        }
        ph->conns[j++] = *t;
    }
    ph->nconns = j;
    ph->stats.open = j;
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

static void free_text(const void *data, size_t len, void *arg)
{
    (void)len;
    (void)arg;
    free((void *)data);
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
    char *text = NULL;
    size_t len = 0;
    uint64_t now_ms = clock_real_ns() / 1000000u;
    promfam_store_publish(ph->st, now_ms);
    int rc = promfam_store_render(ph->st, now_ms, &text, &len);
    if (rc != 0) {
        LOG_RL(&ph->rl_accept, 10000, LOG_LVL_ERROR, "prometheus: cannot render /metrics: %s", strerror(-rc));
        evhttp_send_error(req, HTTP_INTERNAL, NULL);
        return;
    }
    evhttp_add_header(oh, "Content-Type", "text/plain; version=0.0.4");
    if (len == 0 || evbuffer_add_reference(body, text, len, free_text, NULL) != 0)
        free(text);
    evhttp_send_reply(req, HTTP_OK, "OK", NULL);
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
    *ret = ph;
    return 0;
out_http:
    evhttp_free(ph->http);
out_fd:
    if (fd >= 0)
        close(fd);
    snprintf(err, errcap, "cannot start the Prometheus HTTP server: %s", strerror(-rc));
out_free:
    free(ph);
    return rc;
}

int prom_http_port(const struct prom_http *ph) { return ph->port; }

void prom_http_stats(const struct prom_http *ph, struct prom_http_stats *ret) { *ret = ph->stats; }

void prom_http_destroy(struct prom_http *ph)
{
    if (!ph)
        return;
    loop_event_free(ph->sweep);
    evhttp_free(ph->http);     /* frees the listener and every connection (bufferevent_free) */
    for (size_t i = 0; i < ph->nconns; i++)
        bufferevent_decref(ph->conns[i].bev);
    free(ph->conns);
    free(ph);
}
