/* bufpool: activity buffers handed to msPTI (docs/design/session.md#buffers): 8 MiB, 8-byte aligned, at
 * most 32 outstanding, freed ones kept on a free list. Declines are logged rate-limited.
 *
 * Test knob: MSMONITOR_TEST_BUFFER_SIZE=<bytes> (read once at bufpool_init, ≥ 4096, a
 * multiple of 8) shrinks the buffers so e2e tests can exhaust the pool quickly; it is not a
 * product setting and is documented as such in docs/plugin.md. The cap of 32 is fixed. */
#ifndef MSMON_PLUGIN_BUFPOOL_H
#define MSMON_PLUGIN_BUFPOOL_H

#include <stddef.h>
#include <stdint.h>

#define BUFPOOL_SIZE (8u * 1024u * 1024u)
#define BUFPOOL_CAP 32

struct bufpool;

/* Caller owns; free with bufpool_destroy() once no buffer is outstanding. */
int bufpool_create(size_t buf_size, struct bufpool **ret);
void bufpool_destroy(struct bufpool *bp);
/* Buffer size from the test knob, else BUFPOOL_SIZE. */
size_t bufpool_default_size(void);

/* NULL (and a rate-limited ERROR) when BUFPOOL_CAP buffers are outstanding. */
uint8_t *bufpool_get(struct bufpool *bp, size_t *ret_size);
/* Return a buffer obtained from bufpool_get (NULL is ignored). */
void bufpool_put(struct bufpool *bp, uint8_t *buf);

struct bufpool_stats {
    uint64_t outstanding, allocated_total, declined_total, free_list;
};
void bufpool_stats(struct bufpool *bp, struct bufpool_stats *ret);

#endif
