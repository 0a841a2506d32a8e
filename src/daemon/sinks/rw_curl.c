/* rw_curl: dlopen("libcurl.so.4") once and fill the table; every symbol is mandatory (all
 * exist since libcurl 7.62, CURLU). The library name is fixed, never taken from the
 * environment. */
#include "daemon/sinks/rw_curl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static struct rw_curl table;
static const struct rw_curl *loaded;
static char load_err[256];
static pthread_once_t once = PTHREAD_ONCE_INIT;

#define SYM(field, name)                                                                       \
    do {                                                                                       \
        *(void **)&table.field = dlsym(h, name);                                               \
        if (!table.field) {                                                                    \
            snprintf(load_err, sizeof(load_err), "libcurl.so.4 has no %s", name);             \
            return;                                                                            \
        }                                                                                      \
    } while (0)

static void load(void)
{
    void *h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(load_err, sizeof(load_err), "cannot load libcurl.so.4 (%s)", e ? e : "not found");
        return;
    }
    SYM(global_init, "curl_global_init");
    SYM(global_cleanup, "curl_global_cleanup");
    SYM(easy_init, "curl_easy_init");
    SYM(easy_setopt, "curl_easy_setopt");
    SYM(easy_perform, "curl_easy_perform");
    SYM(easy_getinfo, "curl_easy_getinfo");
    SYM(easy_cleanup, "curl_easy_cleanup");
    SYM(easy_strerror, "curl_easy_strerror");
    SYM(slist_append, "curl_slist_append");
    SYM(slist_free_all, "curl_slist_free_all");
    SYM(url, "curl_url");
    SYM(url_set, "curl_url_set");
    SYM(url_get, "curl_url_get");
    SYM(url_cleanup, "curl_url_cleanup");
    SYM(free, "curl_free");
    loaded = &table;   /* the handle stays open for the process lifetime */
}

const struct rw_curl *rw_curl_get(char *err, size_t errcap)
{
    pthread_once(&once, load);
    if (!loaded && err && errcap)
        snprintf(err, errcap, "%s", load_err);
    return loaded;
}
