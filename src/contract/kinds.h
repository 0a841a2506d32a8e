/* kinds: the 11 user-visible msPTI activity kinds (docs/design/contract.md#activity-kinds) —
 * names, values, the standalone subset and the comma-list rule of --mspti-activity-kind /
 * MSPTI_ACTIVITY_KIND. The facts themselves are the rows of kinds.def, the only table of them. */
#ifndef MSMON_CONTRACT_KINDS_H
#define MSMON_CONTRACT_KINDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
#define KIND(name, id, value, standalone) KINDS_ROW_##id,
#include "contract/kinds.def"
#undef KIND
    KINDS_COUNT
};
#define KINDS_VALUE_LIMIT 13 /* every kind value is < this: size of per-kind arrays */
#define KINDS_EXTERNAL_CORRELATION 8 /* msPTI's kind that is never user-visible */
#define KINDS_STANDALONE_COUNT 7

/* The 11 names in table order, used in every "possible values" message; a literal so
 * messages can be composed at compile time. The unit test holds it equal to kinds.def's
 * names; kinds_list_text is the same text. */
#define KINDS_LIST_TEXT                                                                          \
    "Marker, Kernel, API, Hccl, Memory, MemSet, MemCpy, Communication, AclAPI, NodeAPI, RuntimeAPI"
extern const char kinds_list_text[];

/* Name of kind value v ("Kernel" for 2); NULL for values that are not one of the 11. Static. */
const char *kinds_name(int v);
/* Value of the exact (case-sensitive) name name[0..len); -EINVAL if it is not one of the 11. */
int kinds_from_name(const char *name, size_t len);
/* The i-th kind in table order, i in [0, KINDS_COUNT); -EINVAL otherwise. */
int kinds_at(size_t i);
/* Kind value v is one the standalone Monitor accepts (API, Kernel, Marker, Communication
 * and the three *API kinds). */
bool kinds_standalone(int v);
/* The stem of kind value v in code names, its table ID in lower case ("acl_api" for AclAPI):
 * Python's get_<stem>_data getters. Into buf (always terminated); 0, -EINVAL for a value that
 * is not one of the 11, -ENAMETOOLONG when cap is too small. */
int kinds_stem(int v, char *buf, size_t cap);
/* The i-th standalone kind in ActivityKind's order, i in [0, KINDS_STANDALONE_COUNT);
 * -EINVAL otherwise. */
int kinds_standalone_at(size_t i);

/* A comma list of kinds (items trimmed of spaces and tabs). Strict (CLI): an empty item is
 * an error like an unknown one. Lenient (plugin): empty items are dropped. On success
 * *ret_mask has bit (1u << value) per kind (0 for an empty list). On -EINVAL *ret_bad and
 * *ret_bad_len (either may be NULL) point at the offending trimmed item inside s. */
int kinds_parse_list(const char *s, size_t len, bool strict, uint32_t *ret_mask,
                     const char **ret_bad, size_t *ret_bad_len);

#endif
