/* markpair: marker pairing of the JSONL export and the standalone Monitor (05-outputs.md
 * §4.4): host instant/start/end and device records become completed host and device marker
 * "lines"; pending entries are bounded (65536 per map, oldest evicted). Also keeps the
 * "devices seen" set (Kernel, Communication and device marker records add to it). */
#ifndef MSMON_PLUGIN_MARKPAIR_H
#define MSMON_PLUGIN_MARKPAIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plugin/pipeline/record.h"

#define MARKPAIR_PENDING_CAP 65536

/* One completed marker. Strings are borrowed from the records (msPTI interned strings). */
struct mp_line {
    int32_t source_kind;          /* 0 host, 1 device */
    uint64_t start, end, id;
    const char *name, *domain;    /* never NULL ("" when the record had none) */
    uint32_t pid, tid;            /* host lines (0 for device lines) */
    uint32_t device_id, stream_id; /* device lines (0 for host lines) */
};

/* Called for every completed line, under the pairing lock: keep it short, do not call back
 * into the same markpair. */
typedef void (*mp_line_fn)(void *ctx, const struct mp_line *line);

struct markpair;

/* Caller owns; free with markpair_destroy(). */
int markpair_create(mp_line_fn fn, void *ctx, struct markpair **ret);
void markpair_destroy(struct markpair *mp);
/* Feed one marker record (thread-safe; serialised internally). Device records also add
 * their device to the devices-seen set. */
void markpair_feed(struct markpair *mp, const struct mon_marker *m);
/* Forget pending entries and the devices seen (session end). */
void markpair_clear(struct markpair *mp);
/* Pending entry counts (tests). */
size_t markpair_pending_host(struct markpair *mp);
size_t markpair_pending_device(struct markpair *mp);

/* Devices seen: lock-free for ids < 256 (the hot path of Kernel/Communication records). */
void markpair_add_device(struct markpair *mp, uint32_t device_id);
/* Ascending ids into out (up to cap); *ret_n = total number seen (may exceed cap). */
void markpair_devices(struct markpair *mp, uint32_t *out, size_t cap, size_t *ret_n);

#endif
