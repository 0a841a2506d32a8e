/* fgram: the npu-monitor filter grammar `Kind:Name,Name;Kind:Name` (docs/design/cli.md#validation,
 * docs/design/contract.md#filter-grammar) with ONE trim rule — spaces and tabs — and two modes over one tokenizer:
 * strict (the CLI: the first bad item is an error) and lenient (the plugin: bad items are
 * skipped with a WARNING). For every text strict accepts, lenient yields the same items. */
#ifndef MSMON_CONTRACT_FGRAM_H
#define MSMON_CONTRACT_FGRAM_H

#include <stddef.h>

#define FGRAM_MAX_TEXT 1024 /* the contract's limit, both modes */
#define FGRAM_TRIM " \t"

enum fgram_mode { FGRAM_STRICT, FGRAM_LENIENT };

/* One event of a parse, in text order. For each valid item: first (kind, NULL, 0) — the item
 * names this kind, which turns the kind on even when lenient mode dropped all its names —
 * then (kind, name, len) per non-empty trimmed name; name points into the parsed text.
 * Return 0 to go on, a negative errno to stop the parse with that value. */
typedef int (*fgram_fn)(void *arg, int kind, const char *name, size_t len);

/* Parse text[0..len) (NUL bytes are ordinary bytes). Items are split on ';' and trimmed;
 * empty items are ignored. A non-empty item must be `Kind:Names` with exactly one ':', Kind
 * one of the 11 kind names (case-sensitive, trimmed), Names split on ',' and trimmed.
 *   strict:  an empty name is an error too; nothing is reported to fn unless the whole text
 *            is valid. -EINVAL with the reason of docs/design/cli.md#validation in err ("item '...' must
 *            have the form Kind:Name[,Name...]", "unknown activity kind '...' (possible
 *            values: ...)", "empty operator name in item '...'").
 *   lenient: empty names are dropped; a bad item is skipped with a WARNING naming it; a
 *            non-empty text without any valid item logs the ERROR of docs/design/contract.md#filter-grammar and returns 0.
 * Both: -E2BIG ("longer than 1024 bytes" in err) when len > FGRAM_MAX_TEXT, nothing reported.
 * *ret_items (may be NULL) gets the number of valid items. err may be NULL. */
int fgram_parse(const char *text, size_t len, enum fgram_mode mode, fgram_fn fn, void *arg,
                size_t *ret_items, char *err, size_t errcap);

#endif
