/* filter: the npu-monitor record filter (docs/design/session.md#filter): parses `Kind:Name,Name;Kind:Name`
 * and decides per record whether it reaches the processor. The hot path reads an immutable,
 * reference-counted snapshot through a per-thread cached reference: no lock, no copy. */
#ifndef MSMON_PLUGIN_FILTER_H
#define MSMON_PLUGIN_FILTER_H

#include <stdbool.h>
#include <stddef.h>

#include "contract/fgram.h"
#include "plugin/pipeline/record.h"

#define FILTER_MAX_TEXT FGRAM_MAX_TEXT /* the contract's limit */
#define FILTER_COMPANION_CAP 65536 /* remembered ids of dropped markers */

struct filter_state;

/* Caller owns; free with filter_state_destroy(). Starts with no filter (keep all). */
int filter_state_create(struct filter_state **ret);
/* Not concurrent with filter_state_keep() on the same state. */
void filter_state_destroy(struct filter_state *fs);
/* Replace the filter atomically; ""/NULL = no filter. The text is parsed by the
 * contract's lenient grammar (contract/fgram.h: items and names trimmed of spaces and tabs,
 * like the CLI); invalid tokens are skipped with a WARNING; text without any valid item logs
 * an ERROR and means no filter.
 * -EINVAL if text is longer than FILTER_MAX_TEXT bytes (nothing changed); -ENOMEM. */
int filter_state_set(struct filter_state *fs, const char *text);
/* ShouldKeepRecord (docs/design/session.md#filter). Thread-safe, lock-free except for marker records (companion
 * set). Record names must stay valid and unchanged for the life of the process (msPTI
 * interns them): match results are cached per name pointer. */
bool filter_state_keep(struct filter_state *fs, const struct mon_record *r);
/* Batch form of filter_state_keep for the completion path: compacts recs[0..n) in place to
 * the kept records (order preserved) and returns their number. The filter snapshot is read
 * once per call, and with no filter active the call returns n without touching a record. */
size_t filter_state_apply(struct filter_state *fs, struct mon_record *recs, size_t n);

/* Introspection for tests and logs: number of names configured for kind (0 if none) and
 * whether any filter is active. */
size_t filter_state_kind_names(struct filter_state *fs, int kind);
bool filter_state_active(struct filter_state *fs);
/* The text last given to filter_state_set ("" = none) into buf, cut to cap - 1 bytes and always
 * terminated: the outputs record it at the session end (docs/outputs.md#session-end). */
size_t filter_state_text(struct filter_state *fs, char *buf, size_t cap);

#endif
