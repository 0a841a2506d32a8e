/* thr: start a thread with all signals blocked, named, returning 0/-errno; it replaces the
 * hand-rolled copies that each masked, created and restored in their own way
 * (docs/design/session.md#threads). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>

#include "common/thr.h"

struct thr_boot {
    void *(*fn)(void *);
    void *arg;
    char name[16]; /* pthread_setname_np refuses names over 15 bytes: the prefix is kept */
};

/* The thread names itself: a detached one may be gone before its creator could name it. */
static void *thr_main(void *p)
{
    struct thr_boot b = *(struct thr_boot *)p;

    free(p);
    if (b.name[0])
        (void)pthread_setname_np(pthread_self(), b.name);
    return b.fn(b.arg);
}

int thr_start(pthread_t *ret_thread, const char *name, void *(*fn)(void *), void *arg, int flags)
{
    struct thr_boot *b = NULL;
    pthread_attr_t attr;
    sigset_t all, old;
    pthread_t t;
    size_t i = 0;
    int rc;

    if (!fn || (!ret_thread && !(flags & THR_DETACHED)))
        return -EINVAL;
    b = malloc(sizeof(*b));
    if (!b)
        return -ENOMEM;
    b->fn = fn;
    b->arg = arg;
    for (; name && name[i] && i < sizeof(b->name) - 1; i++)
        b->name[i] = name[i];
    b->name[i] = '\0';
    rc = -pthread_attr_init(&attr);
    if (rc != 0)
        goto out_free;
    if (flags & THR_DETACHED)
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (flags & THR_SMALL_STACK) {
        rc = -pthread_attr_setstacksize(&attr, THR_SMALL_STACK_BYTES);
        if (rc != 0) {
            pthread_attr_destroy(&attr);
            goto out_free;
        }
    }
    /* The new thread inherits the creator's mask: block everything around the create. */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    rc = -pthread_create(&t, &attr, thr_main, b);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0)
        goto out_free;
    if (ret_thread)
        *ret_thread = t;
    return 0;
out_free:
    free(b);
    return rc;
}
