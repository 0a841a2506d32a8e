/* podenv: the pod fields, read once. A refused value (not a name) is logged once at WARNING
 * with the variable, so a typo in a manifest shows in the job's log rather than as a silently
 * unnamed pod. */
#include "plugin/podenv.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "common/jw.h"
#include "common/log.h"
#include "plugin/penv.h"

static struct podid_self pod;
static pthread_once_t pod_once = PTHREAD_ONCE_INIT;

static const char *pod_getenv(const char *name)
{
    for (int f = 0; f < PODID_NFIELDS; f++)
        if (strcmp(name, podid_env((enum podid_field)f)) == 0)
            return penv_get((enum penv_id)(PENV_POD_POD + f));
    return NULL;
}

static void pod_read(void)
{
    char host[256];
    if (gethostname(host, sizeof(host) - 1) != 0)
        host[0] = '\0';
    host[sizeof(host) - 1] = '\0';
    if (podid_self_from(&pod, pod_getenv, host) > 0) {
        for (int f = 0; f < PODID_NFIELDS; f++) {
            const char *v = pod_getenv(podid_env((enum podid_field)f));
            if (v && v[0] && !pod.v[f][0])
                LOG_WARN("%s is not a valid name ([A-Za-z0-9._-], at most %zu bytes): left out of what this "
                         "process reports (docs/deploy.md#attribution)", podid_env((enum podid_field)f),
                         podid_cap((enum podid_field)f));
        }
    }
}

const struct podid_self *podenv_get(void)
{
    pthread_once(&pod_once, pod_read);
    return &pod;
}

size_t podenv_fields(const struct podid_self *p, struct datamsg_field *out, size_t cap)
{
    size_t n = 0;
    for (int f = 0; f < PODID_NFIELDS && n < cap; f++) {
        if (!p->v[f][0])
            continue;
        /* a hostname is not a pod name by itself: the daemon, which sees whether the process
         * runs in a container, decides (docs/deploy.md#attribution) */
        out[n++] = (struct datamsg_field){ .key = f == PODID_POD && p->pod_from_hostname ? PODID_HOSTNAME_KEY
                                                                                         : podid_key((enum podid_field)f),
                                           .type = DATAMSG_STR, .s = p->v[f], .slen = SIZE_MAX };
    }
    return n;
}

size_t podenv_json(char *buf, size_t cap)
{
    const struct podid_self *p = podenv_get();
    /* getStatus's keys, in sorted order */
    static const enum podid_field order[] = { PODID_CONTAINER, PODID_POD, PODID_NAMESPACE, PODID_NODE };
    struct jw w;
    bool any = false;

    jw_init(&w, buf, cap);
    jw_obj_begin(&w);
    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
        if (!p->v[order[i]][0] || (order[i] == PODID_POD && p->pod_from_hostname))
            continue; /* the hostname is in the output's host information already */
        jw_kv_str(&w, podid_status_key(order[i]), p->v[order[i]]);
        any = true;
    }
    jw_obj_end(&w);
    return any && !w.err ? w.len : 0;
}
