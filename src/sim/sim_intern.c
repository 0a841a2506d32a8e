/* sim_intern: an open-addressing hash set of immortal strings under one mutex, and a linked
 * list of marker domains. Both are small and off the raw-append hot path. */
#include "sim/sim_intern.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static const char **g_tab;      /* guarded by g_lock */
static size_t g_cap, g_used;
static struct sim_domain *g_domains;
static struct sim_domain g_default = {.name = "default"};

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int grow(void)
{
    size_t ncap = g_cap ? g_cap * 2 : 256;
    const char **nt = calloc(ncap, sizeof(*nt));
    if (!nt)
        return -1;
    for (size_t i = 0; i < g_cap; i++) {
        if (!g_tab[i])
            continue;
        size_t j = hash_str(g_tab[i]) & (ncap - 1);
        while (nt[j])
            j = (j + 1) & (ncap - 1);
        nt[j] = g_tab[i];
    }
    free(g_tab);
    g_tab = nt;
    g_cap = ncap;
    return 0;
}

const char *sim_intern(const char *s)
{
    const char *ret = NULL;
    if (!s)
        return NULL;
    uint64_t h = hash_str(s);
    pthread_mutex_lock(&g_lock);
    if ((g_used + 1) * 2 > g_cap && grow() != 0)
        goto out;
    size_t j = h & (g_cap - 1);
    while (g_tab[j]) {
        if (strcmp(g_tab[j], s) == 0) {
            ret = g_tab[j];
            goto out;
        }
        j = (j + 1) & (g_cap - 1);
    }
    char *copy = strdup(s);
    if (!copy)
        goto out;
    g_tab[j] = copy;
    g_used++;
    ret = copy;
out:
    pthread_mutex_unlock(&g_lock);
    return ret;
}

struct sim_domain *sim_domain_default(void) { return &g_default; }

struct sim_domain *sim_domain_get(const char *name)
{
    struct sim_domain *d;
    if (strcmp(name, "default") == 0)
        return &g_default;
    const char *in = sim_intern(name);
    if (!in)
        return NULL;
    pthread_mutex_lock(&g_lock);
    for (d = g_domains; d; d = d->next) {
        if (d->name == in)
            goto out;
    }
    d = calloc(1, sizeof(*d));
    if (!d)
        goto out;
    d->name = in;
    d->next = g_domains;
    g_domains = d;
out:
    pthread_mutex_unlock(&g_lock);
    return d;
}

void sim_domain_enable_all(void)
{
    pthread_mutex_lock(&g_lock);
    atomic_store(&g_default.disabled, false);
    for (struct sim_domain *d = g_domains; d; d = d->next)
        atomic_store(&d->disabled, false);
    pthread_mutex_unlock(&g_lock);
}
