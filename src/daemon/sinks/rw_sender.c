/* rw_sender: the snapshot timer (loop thread) and the send thread (libcurl, one reused easy
 * handle). The thread keeps at most one request's batches out of the queue while it retries
 * them, so memory stays within the queue bounds plus one request. State changes of the
 * receiver are logged once each way (gone / back); refusals are rate-limited. */
#include "daemon/sinks/rw_sender.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "common/thr.h"
#include "daemon/sinks/rw_curl.h"
#include "daemon/sinks/rw_encode.h"
#include "daemon/sinks/rw_queue.h"

struct rw_sender {
    struct loop_event *timer;
    struct promfam_store *st;
    char *url;
    int timeout_s;
    char *ca_file;
    bool insecure;
    struct rw_headers hdr;
    struct rw_queue q;
    pthread_t th;
    bool th_started;
    _Atomic uint64_t sent, rejected, requests, failures, unsent;
    atomic_bool up;
    _Atomic uint64_t abort_at_ms;    /* 0 = never; set at stop: in-flight transfers end then */
    struct log_ratelimit rl_refused, rl_encode;
    size_t last_batch_len;          /* loop thread only */
};

static uint64_t mono_ms(void) { return clock_mono_ns() / 1000000u; }

int rw_global_init(char *err, size_t errcap)
{
    const struct rw_curl *cu = rw_curl_get(err, errcap);
    if (!cu)
        return -ENOENT;
    if (cu->global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(err, errcap, "curl_global_init failed");
        return -EIO;
    }
    return 0;
}

void rw_global_cleanup(void)
{
    const struct rw_curl *cu = rw_curl_get(NULL, 0);
    if (cu)
        cu->global_cleanup();
}

/* ------------------------------------------------------------------ configuration checks */
static bool tchar(unsigned char c)
{
    return isalnum(c) || strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static const char *const reserved_headers[] = {
    "content-type", "content-encoding", "x-prometheus-remote-write-version", "content-length",
    "host", "transfer-encoding", "expect", "user-agent",
};

static int add_header(struct rw_headers *h, const char *s, size_t n, size_t item, char *err, size_t errcap)
{
    size_t i = 0, nl;
    while (i < n && s[i] != '=' && s[i] != ':')
        i++;
    nl = i;
    while (nl > 0 && (s[nl - 1] == ' ' || s[nl - 1] == '\t'))
        nl--;
    size_t b = 0;
    while (b < nl && (s[b] == ' ' || s[b] == '\t'))
        b++;
    if (i == n || nl == b) {
        snprintf(err, errcap, "--remote_write_headers: item %zu is not Name=value", item);
        return -EINVAL;
    }
    for (size_t k = b; k < nl; k++) {
        if (!tchar((unsigned char)s[k])) {
            snprintf(err, errcap, "--remote_write_headers: item %zu: header name '%.*s' has a byte that is not allowed",
                     item, (int)(nl - b), s + b);
            return -EINVAL;
        }
    }
    for (size_t r = 0; r < sizeof(reserved_headers) / sizeof(reserved_headers[0]); r++) {
        if (strlen(reserved_headers[r]) == nl - b && strncasecmp(reserved_headers[r], s + b, nl - b) == 0) {
            snprintf(err, errcap, "--remote_write_headers: header '%.*s' is set by the protocol and cannot be replaced",
                     (int)(nl - b), s + b);
            return -EINVAL;
        }
    }
    size_t v = i + 1, ve = n;
    while (v < ve && (s[v] == ' ' || s[v] == '\t'))
        v++;
    while (ve > v && (s[ve - 1] == ' ' || s[ve - 1] == '\t' || s[ve - 1] == '\r'))
        ve--;
    for (size_t k = v; k < ve; k++) {
        unsigned char c = (unsigned char)s[k];
        if ((c < 0x20 && c != '\t') || c == 0x7f) {
            snprintf(err, errcap, "--remote_write_headers: the value of header '%.*s' has a control byte",
                     (int)(nl - b), s + b);
            return -EINVAL;
        }
    }
    if (h->n >= RW_MAX_HEADERS) {
        snprintf(err, errcap, "--remote_write_headers: more than %d headers", RW_MAX_HEADERS);
        return -EINVAL;
    }
    size_t len = (nl - b) + 2 + (ve - v) + 1;
    char *line = malloc(len);
    if (!line)
        return -ENOMEM;
    snprintf(line, len, "%.*s: %.*s", (int)(nl - b), s + b, (int)(ve - v), s + v);
    h->line[h->n++] = line;
    return 0;
}

int rw_headers_parse(const char *text, struct rw_headers *ret, char *err, size_t errcap)
{
    int rc = 0;
    size_t item = 0;
    memset(ret, 0, sizeof(*ret));
    if (!text || !text[0])
        return 0;
    if (text[0] == '@') {
        FILE *fp = fopen(text + 1, "re");
        char line[8192];
        if (!fp) {
            snprintf(err, errcap, "--remote_write_headers: cannot read '%s': %s", text + 1, strerror(errno));
            return -errno;
        }
        while (rc == 0 && fgets(line, sizeof(line), fp)) {
            size_t n = strlen(line);
            item++;
            if (n == sizeof(line) - 1 && line[n - 1] != '\n') {
                snprintf(err, errcap, "--remote_write_headers: line %zu of '%s' is too long", item, text + 1);
                rc = -EINVAL;
                break;
            }
            while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
                n--;
            const char *s = line;
            while (n && (*s == ' ' || *s == '\t')) {
                s++;
                n--;
            }
            if (n == 0 || s[0] == '#')
                continue;
            rc = add_header(ret, s, n, item, err, errcap);
        }
        fclose(fp);
    } else {
        const char *s = text;
        while (rc == 0) {
            const char *c = strchr(s, ',');
            size_t n = c ? (size_t)(c - s) : strlen(s);
            item++;
            rc = add_header(ret, s, n, item, err, errcap);
            if (!c)
                break;
            s = c + 1;
        }
    }
    if (rc)
        rw_headers_fini(ret);
    return rc;
}

void rw_headers_fini(struct rw_headers *h)
{
    for (size_t i = 0; i < h->n; i++)
        free(h->line[i]);
    h->n = 0;
}

int rw_url_check(const char *url, char *err, size_t errcap)
{
    const struct rw_curl *cu = rw_curl_get(err, errcap);
    char *scheme = NULL, *host = NULL;
    int rc = -EINVAL;
    if (!cu)
        return -ENOENT;
    CURLU *u = cu->url();
    if (!u)
        return -ENOMEM;
    for (const char *p = url; *p; p++) {
        if ((unsigned char)*p <= 0x20 || *p == 0x7f) {
            snprintf(err, errcap, "--remote_write_url: '%s' has a space or control byte", url);
            goto out;
        }
    }
    if (cu->url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK || cu->url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        cu->url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !host[0]) {
        snprintf(err, errcap, "--remote_write_url: '%s' is not a valid URL", url);
        goto out;
    }
    if (strcasecmp(scheme, "http") != 0 && strcasecmp(scheme, "https") != 0) {
        snprintf(err, errcap, "--remote_write_url: '%s': the scheme must be http or https", url);
        goto out;
    }
    rc = 0;
out:
    cu->free(scheme);
    cu->free(host);
    cu->url_cleanup(u);
    return rc;
}

/* ------------------------------------------------------------------ snapshot (loop thread) */
struct snap_ctx {
    struct rw_batch *b;
    int rc;
};

static void snap_add(void *arg, const struct promfam_sample *s)
{
    struct snap_ctx *c = arg;
    if (c->rc == 0)
        c->rc = rw_batch_add(c->b, s);
}

static void publish(struct rw_sender *rw, uint64_t now_ms)
{
    size_t qs = 0, qb = 0;
    uint64_t dropped = 0;
    static const struct promfam_label full[] = { { "reason", "queue_full" } };
    static const struct promfam_label rej[] = { { "reason", "rejected" } };
    rw_queue_counts(&rw->q, &qs, &qb, NULL, &dropped);
    promfam_store_set(rw->st, "msmonitor_remote_write_dropped_samples", full, 1, (double)dropped, now_ms);
    promfam_store_set(rw->st, "msmonitor_remote_write_dropped_samples", rej, 1, (double)atomic_load(&rw->rejected),
                      now_ms);
    promfam_store_set(rw->st, "msmonitor_remote_write_sent_samples", NULL, 0, (double)atomic_load(&rw->sent), now_ms);
    promfam_store_set(rw->st, "msmonitor_remote_write_queue_samples", NULL, 0, (double)qs, now_ms);
    promfam_store_set(rw->st, "msmonitor_remote_write_queue_bytes", NULL, 0, (double)qb, now_ms);
    promfam_store_set(rw->st, "msmonitor_remote_write_up", NULL, 0, atomic_load(&rw->up) ? 1.0 : 0.0, now_ms);
    promfam_store_publish(rw->st, now_ms);
}

void rw_sender_snapshot(struct rw_sender *rw)
{
    uint64_t now_ms = clock_real_ns() / 1000000u;
    struct snap_ctx c = { NULL, 0 };
    publish(rw, now_ms);
    if (rw_batch_create((int64_t)now_ms, &c.b) != 0)
        return;
    /* this snapshot is about as large as the last: one allocation instead of a doubling series */
    rw_batch_reserve(c.b, rw->last_batch_len);
    promfam_store_each(rw->st, now_ms, snap_add, &c);
    if (c.rc != 0 || c.b->nsamples == 0) {
        if (c.rc)
            LOG_RL(&rw->rl_encode, 60000, LOG_LVL_ERROR, "remote write: cannot buffer a snapshot: %s", strerror(-c.rc));
        rw_batch_destroy(c.b);
        return;
    }
    rw->last_batch_len = c.b->len;
    rw_queue_push(&rw->q, c.b);
}

static void on_timer(struct loop_event *ev, void *arg)
{
    (void)ev;
    rw_sender_snapshot(arg);
}

/* ------------------------------------------------------------------ send thread */
struct resp {
    char text[256];
    size_t len;
};

static size_t on_body(char *p, size_t sz, size_t n, void *arg)
{
    struct resp *r = arg;
    size_t len = sz * n, room = sizeof(r->text) - 1 - r->len;
    size_t k = len < room ? len : room;
    memcpy(r->text + r->len, p, k);
    r->len += k;
    r->text[r->len] = '\0';
    return len;
}

static int on_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    struct rw_sender *rw = arg;
    uint64_t at = atomic_load(&rw->abort_at_ms);
    (void)a;
    (void)b;
    (void)c;
    (void)d;
    return at && mono_ms() >= at; /* non-zero aborts the transfer */
}

static CURL *make_handle(const struct rw_curl *cu, struct rw_sender *rw, struct curl_slist **ret_hl,
                         struct resp *resp, char *errbuf)
{
    CURL *c = cu->easy_init();
    struct curl_slist *hl = NULL;
    if (!c)
        return NULL;
    hl = cu->slist_append(hl, "Content-Encoding: snappy");
    hl = cu->slist_append(hl, "Content-Type: application/x-protobuf");
    hl = cu->slist_append(hl, "X-Prometheus-Remote-Write-Version: 0.1.0");
    hl = cu->slist_append(hl, "User-Agent: msmonitor-dynolog/" MSMON_VERSION);
    hl = cu->slist_append(hl, "Expect:");
    for (size_t i = 0; i < rw->hdr.n; i++)
        hl = cu->slist_append(hl, rw->hdr.line[i]);
    cu->easy_setopt(c, CURLOPT_URL, rw->url);
    cu->easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    cu->easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    cu->easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    cu->easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)rw->timeout_s * 1000L);
    cu->easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    cu->easy_setopt(c, CURLOPT_WRITEDATA, resp);
    cu->easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    cu->easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    cu->easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    cu->easy_setopt(c, CURLOPT_XFERINFODATA, rw);
    cu->easy_setopt(c, CURLOPT_POST, 1L);
    if (rw->ca_file[0])
        cu->easy_setopt(c, CURLOPT_CAINFO, rw->ca_file);
    if (rw->insecure) {
        cu->easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
        cu->easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    *ret_hl = hl;
    return c;
}

enum post_result { POST_OK, POST_REFUSED, POST_RETRY };

static enum post_result post(const struct rw_curl *cu, struct rw_sender *rw, CURL *c, struct resp *resp, char *errbuf, const uint8_t *body,
                             size_t len, char *why, size_t whycap)
{
    long code = 0;
    resp->len = 0;
    resp->text[0] = '\0';
    errbuf[0] = '\0';
    cu->easy_setopt(c, CURLOPT_POSTFIELDS, body);
    cu->easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    atomic_fetch_add(&rw->requests, 1);
    CURLcode res = cu->easy_perform(c);
    if (res != CURLE_OK) {
        atomic_fetch_add(&rw->failures, 1);
        snprintf(why, whycap, "%s", errbuf[0] ? errbuf : cu->easy_strerror(res));
        return POST_RETRY;
    }
    cu->easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    if (code >= 200 && code < 300)
        return POST_OK;
    atomic_fetch_add(&rw->failures, 1);
    /* first line of the answer, control bytes masked: it goes into one log line */
    char *nl = strpbrk(resp->text, "\r\n");
    if (nl)
        *nl = '\0';
    for (char *p = resp->text; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    snprintf(why, whycap, "HTTP %ld%s%s", code, resp->text[0] ? ": " : "", resp->text);
    if (code == 429 || code >= 500)
        return POST_RETRY;
    return POST_REFUSED;
}

static void *run(void *arg)
{
    struct rw_sender *rw = arg;
    struct resp resp;
    char errbuf[CURL_ERROR_SIZE], why[512];
    struct curl_slist *hl = NULL;
    const struct rw_curl *cu = rw_curl_get(NULL, 0);
    CURL *c = cu ? make_handle(cu, rw, &hl, &resp, errbuf) : NULL;
    bool down = false, stopping = false;
    uint64_t down_since = 0, dropped_at_down = 0;
    uint64_t backoff = RW_BACKOFF_MIN_MS, flush_deadline = 0;
    struct rw_encoder enc = { 0 };

    if (!c) {
        LOG_ERROR("remote write: cannot create a libcurl handle; remote write is off");
        return NULL;
    }
    for (;;) {
        bool drain = stopping;
        struct rw_batch *chain = rw_queue_take(&rw->q, RW_MAX_SAMPLES_PER_SEND, drain);
        if (!chain) {
            if (stopping || !atomic_load(&rw->up) || down)
                break;
            /* stopped: one more pass drains what is queued while the receiver is up */
            stopping = true;
            flush_deadline = mono_ms() + RW_EXIT_FLUSH_MS;
            continue;
        }
        const uint8_t *body = NULL;
        size_t len = 0, n = 0;
        int rc = rw_encode(&enc, chain, &body, &len, &n);
        if (rc != 0) {
            size_t lost = 0;
            for (struct rw_batch *b = chain; b; b = b->next)
                lost += b->nsamples;
            LOG_RL(&rw->rl_encode, 60000, LOG_LVL_ERROR, "remote write: cannot encode %zu samples: %s; dropped", lost,
                   strerror(-rc));
            atomic_fetch_add(&rw->rejected, lost);
            rw_batch_destroy(chain);
            continue;
        }
        for (;;) {
            enum post_result pr = post(cu, rw, c, &resp, errbuf, body, len, why, sizeof(why));
            if (pr != POST_RETRY) {
                if (down) {
                    uint64_t d = 0;
                    rw_queue_counts(&rw->q, NULL, NULL, NULL, &d);
                    LOG_INFO("remote write: receiver %s is back after %.1f s (%" PRIu64
                             " samples dropped from the full queue meanwhile)",
                             rw->url, (double)(mono_ms() - down_since) / 1000.0, d - dropped_at_down);
                }
                down = false;
                backoff = RW_BACKOFF_MIN_MS;
                atomic_store(&rw->up, true);
                if (pr == POST_OK) {
                    atomic_fetch_add(&rw->sent, n);
                } else {
                    atomic_fetch_add(&rw->rejected, n);
                    LOG_RL(&rw->rl_refused, 60000, LOG_LVL_ERROR,
                           "remote write: receiver %s refused %zu samples (%s); dropped, not retried", rw->url, n, why);
                }
                break;
            }
            atomic_store(&rw->up, false);
            if (!down) {
                down = true;
                down_since = mono_ms();
                rw_queue_counts(&rw->q, NULL, NULL, NULL, &dropped_at_down);
                LOG_WARN("remote write: receiver %s unreachable (%s); retrying with back-off up to %d ms, "
                         "buffering up to %zu samples / %zu bytes (oldest dropped beyond)",
                         rw->url, why, RW_BACKOFF_MAX_MS, rw->q.max_samples, rw->q.max_bytes);
            }
            if (stopping || rw_queue_wait_stop(&rw->q, backoff)) {
                atomic_fetch_add(&rw->unsent, n);
                break;
            }
            backoff = backoff * 2 > RW_BACKOFF_MAX_MS ? RW_BACKOFF_MAX_MS : backoff * 2;
        }
        rw_batch_destroy(chain);
        if (stopping && (down || mono_ms() >= flush_deadline))
            break;
    }
    rw_encoder_fini(&enc);
    cu->slist_free_all(hl);
    cu->easy_cleanup(c);
    return NULL;
}

/* ------------------------------------------------------------------ lifecycle */
int rw_sender_create(struct loop *loop, struct promfam_store *st, const struct rw_cfg *cfg,
                     struct rw_sender **ret, char *err, size_t errcap)
{
    struct rw_sender *rw;
    int rc;
    *ret = NULL;
    rc = rw_url_check(cfg->url, err, errcap);
    if (rc)
        return rc;
    rw = calloc(1, sizeof(*rw));
    if (!rw)
        return -ENOMEM;
    rc = rw_headers_parse(cfg->headers, &rw->hdr, err, errcap);
    if (rc) {
        free(rw);
        return rc;
    }
    rw->st = st;
    rw->timeout_s = cfg->timeout_s > 0 ? cfg->timeout_s : 10;
    rw->insecure = cfg->insecure;
    rw->url = strdup(cfg->url);
    rw->ca_file = strdup(cfg->ca_file ? cfg->ca_file : "");
    rw_queue_init(&rw->q, cfg->queue_samples, cfg->queue_bytes);
    rc = -ENOMEM;
    if (!rw->url || !rw->ca_file)
        goto fail;
    if (loop_timer_add(loop, (uint64_t)(cfg->interval_s > 0 ? cfg->interval_s : 1) * 1000u, true, on_timer, rw,
                       &rw->timer) != 0)
        goto fail;
    rc = thr_start(&rw->th, "dynologRemoteW", run, rw, THR_JOINABLE); /* signals stay with the loop */
    if (rc)
        goto fail;
    rw->th_started = true;
    LOG_INFO("remote write: pushing to %s every %d s (%zu extra headers, queue %zu samples / %zu bytes)", rw->url,
             cfg->interval_s, rw->hdr.n, cfg->queue_samples, cfg->queue_bytes);
    *ret = rw;
    return 0;
fail:
    snprintf(err, errcap, "cannot start remote write: %s", strerror(-rc));
    rw_sender_destroy(rw);
    return rc;
}

void rw_sender_stats(struct rw_sender *rw, struct rw_stats *ret)
{
    size_t qs = 0, qb = 0;
    uint64_t pushed = 0, dropped = 0;
    rw_queue_counts(&rw->q, &qs, &qb, &pushed, &dropped);
    ret->produced = pushed;
    ret->sent = atomic_load(&rw->sent);
    ret->dropped_full = dropped;
    ret->rejected = atomic_load(&rw->rejected);
    ret->queued = qs;
    ret->queued_bytes = qb;
    ret->requests = atomic_load(&rw->requests);
    ret->failures = atomic_load(&rw->failures);
    ret->up = atomic_load(&rw->up);
}

void rw_sender_destroy(struct rw_sender *rw)
{
    if (!rw)
        return;
    loop_event_free(rw->timer);
    atomic_store(&rw->abort_at_ms, mono_ms() + RW_EXIT_FLUSH_MS);
    rw_queue_stop(&rw->q);
    if (rw->th_started) {
        pthread_join(rw->th, NULL);
        struct rw_stats s;
        rw_sender_stats(rw, &s);
        LOG_INFO("remote write: stopped; produced %" PRIu64 " samples, sent %" PRIu64 ", dropped %" PRIu64
                 " (queue full), rejected %" PRIu64 ", unsent %" PRIu64,
                 s.produced, s.sent, s.dropped_full, s.rejected, atomic_load(&rw->unsent) + s.queued);
    }
    rw_queue_fini(&rw->q);
    rw_headers_fini(&rw->hdr);
    free(rw->url);
    free(rw->ca_file);
    free(rw);
}
