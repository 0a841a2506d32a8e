/* bufpool: a mutex-guarded free list. Requests come from whichever thread records the
 * activity, completions from msPTI's completion threads; both are rare next to records
 * (one per 8 MiB), so a plain mutex costs nothing measurable. */
#include "plugin/backend/bufpool.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "common/log.h"
#include "common/strutil.h"
#include "plugin/penv.h"

struct bufpool {
    pthread_mutex_t lock;
    size_t size;
    unsigned outstanding;
    unsigned nfree;
    uint8_t *free_list[BUFPOOL_CAP];
    uint64_t allocated_total, declined_total;
    struct log_ratelimit rl;
};

size_t bufpool_default_size(void)
{
    const char *v = penv_get(PENV_TEST_BUFFER_SIZE);
    uint64_t n;

    if (!v || !v[0])
        return BUFPOOL_SIZE;
    if (str_to_u64(v, &n) != 0 || n < 4096 || n > BUFPOOL_SIZE || n % 8 != 0) {
        LOG_WARN("bufpool: ignoring MSMONITOR_TEST_BUFFER_SIZE='%s' (multiple of 8 in [4096, %u])", v,
                 BUFPOOL_SIZE);
        return BUFPOOL_SIZE;
    }
    return (size_t)n;
}

int bufpool_create(size_t buf_size, struct bufpool **ret)
{
    struct bufpool *bp;

    if (buf_size == 0 || buf_size % 8 != 0)
        return -EINVAL;
    bp = calloc(1, sizeof(*bp));
    if (!bp)
        return -ENOMEM;
    pthread_mutex_init(&bp->lock, NULL);
    bp->size = buf_size;
    *ret = bp;
    return 0;
}

void bufpool_destroy(struct bufpool *bp)
{
    if (!bp)
        return;
    if (bp->outstanding)
        LOG_WARN("bufpool: destroyed with %u buffers outstanding", bp->outstanding);
    for (unsigned i = 0; i < bp->nfree; i++)
        free(bp->free_list[i]);
    pthread_mutex_destroy(&bp->lock);
    free(bp);
}

uint8_t *bufpool_get(struct bufpool *bp, size_t *ret_size)
{
    uint8_t *buf = NULL;

    pthread_mutex_lock(&bp->lock);
    if (bp->outstanding >= BUFPOOL_CAP) {
        bp->declined_total++;
        pthread_mutex_unlock(&bp->lock);
        /* msPTI asks again for every record while declined: once per 10 s is plenty. */
        LOG_RL(&bp->rl, 10000, LOG_LVL_ERROR, "Buffer allocation exhausted, allocCnt: %d", BUFPOOL_CAP);
        *ret_size = 0;
        return NULL;
    }
    if (bp->nfree > 0) {
        buf = bp->free_list[--bp->nfree];
    } else {
        if (posix_memalign((void **)&buf, 8, bp->size) != 0)
            buf = NULL;
        else
            bp->allocated_total++;
    }
    if (buf)
        bp->outstanding++;
    pthread_mutex_unlock(&bp->lock);
    if (!buf)
        LOG_RL(&bp->rl, 10000, LOG_LVL_ERROR, "bufpool: out of memory for a %zu-byte buffer", bp->size);
    *ret_size = buf ? bp->size : 0;
    return buf;
}

void bufpool_put(struct bufpool *bp, uint8_t *buf)
{
    if (!buf)
        return;
    pthread_mutex_lock(&bp->lock);
    if (bp->outstanding > 0)
        bp->outstanding--;
    if (bp->nfree < BUFPOOL_CAP) {
        bp->free_list[bp->nfree++] = buf;
        buf = NULL;
    }
    pthread_mutex_unlock(&bp->lock);
    free(buf);
}

void bufpool_stats(struct bufpool *bp, struct bufpool_stats *ret)
{
    pthread_mutex_lock(&bp->lock);
    ret->outstanding = bp->outstanding;
    ret->allocated_total = bp->allocated_total;
    ret->declined_total = bp->declined_total;
    ret->free_list = bp->nfree;
    pthread_mutex_unlock(&bp->lock);
}
