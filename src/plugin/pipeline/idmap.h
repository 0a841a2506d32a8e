/* idmap: a bounded map from 64-bit ids (marker ids) to fixed-size values with FIFO
 * eviction, used for every piece of marker bookkeeping (filter companions, JSONL/standalone
 * pairing, metric ranges) so that none of it can grow without limit (docs/design/outputs.md#metric-datagrams, #line-shapes).
 * Not thread-safe: callers hold their own lock. */
#ifndef MSMON_PLUGIN_IDMAP_H
#define MSMON_PLUGIN_IDMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct idmap;

/* cap: most live ids (a power of two is not required); val_size: bytes per value.
 * Caller owns; free with idmap_destroy(). */
int idmap_create(size_t cap, size_t val_size, struct idmap **ret);
void idmap_destroy(struct idmap *m);
/* Forget everything (keeps the storage). */
void idmap_clear(struct idmap *m);
size_t idmap_count(const struct idmap *m);

/* Value of id, or NULL. Borrowed until the next put/del/clear. */
void *idmap_get(struct idmap *m, uint64_t id);
/* Insert id with a zeroed value (an existing entry for id is replaced and becomes the
 * newest). When full, the oldest id is evicted first; *ret_evicted (may be NULL) tells.
 * Returns the value slot, borrowed until the next put/del/clear. */
void *idmap_put(struct idmap *m, uint64_t id, bool *ret_evicted);
/* Remove id; false if absent. */
bool idmap_del(struct idmap *m, uint64_t id);
/* Oldest live entry (FIFO order of insertion): its value, id in *ret_id; NULL if empty. */
void *idmap_oldest(struct idmap *m, uint64_t *ret_id);

#endif
