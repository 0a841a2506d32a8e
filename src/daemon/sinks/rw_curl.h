/* rw_curl: libcurl for remote write, loaded at run time (dlopen of libcurl.so.4) through a
 * table of function pointers. The packaged dynolog links only glibc dynamically (docs/design/contract.md#packaging) and a
 * static libcurl would pull in a dozen more libraries; without libcurl on the host, remote
 * write is refused at start-up with one clear line and everything else runs. */
#ifndef MSMON_DAEMON_RW_CURL_H
#define MSMON_DAEMON_RW_CURL_H

#include <curl/curl.h>
#include <stddef.h>

struct rw_curl {
    CURLcode (*global_init)(long flags);
    void (*global_cleanup)(void);
    CURL *(*easy_init)(void);
    CURLcode (*easy_setopt)(CURL *c, CURLoption opt, ...);
    CURLcode (*easy_perform)(CURL *c);
    CURLcode (*easy_getinfo)(CURL *c, CURLINFO info, ...);
    void (*easy_cleanup)(CURL *c);
    const char *(*easy_strerror)(CURLcode rc);
    struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
    void (*slist_free_all)(struct curl_slist *l);
    CURLU *(*url)(void);
    CURLUcode (*url_set)(CURLU *u, CURLUPart part, const char *content, unsigned int flags);
    CURLUcode (*url_get)(const CURLU *u, CURLUPart part, char **ret, unsigned int flags);
    void (*url_cleanup)(CURLU *u);
    void (*free)(void *p);
};

/* The table, loading libcurl.so.4 on first use (thread-safe, once). NULL when it cannot be
 * loaded; err (may be NULL) then holds the reason. Borrowed for the process lifetime. */
const struct rw_curl *rw_curl_get(char *err, size_t errcap);

#endif
