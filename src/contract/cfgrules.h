/* cfgrules: the value rules of the npu-monitor config keys (type, default, range, command),
 * one table (cfgrules.def) that the CLI checks flags against and the plugin reads values by,
 * so the two cannot disagree on a range (docs/design/contract.md#npu-monitor-keys). */
#ifndef MSMON_CONTRACT_CFGRULES_H
#define MSMON_CONTRACT_CFGRULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cfgrules_type {
    CFGRULES_BOOL,    /* true/false, any case */
    CFGRULES_INT,     /* decimal integer in [min, max] (or -1 when minus_one) */
    CFGRULES_SECONDS, /* decimal seconds, fractions allowed */
    CFGRULES_KINDS,   /* kind list */
    CFGRULES_DIR,     /* directory path */
    CFGRULES_EXPORT,  /* export type */
    CFGRULES_FILTER,  /* filter grammar */
};

struct cfgrules_rule {
    const char *key;
    enum cfgrules_type type;
    const char *dflt;
    int64_t min, max;
    bool minus_one;
    const char *command;
    const char *msg;
};

/* The rule of key (exact spelling); NULL for a key without one. Static storage. */
const struct cfgrules_rule *cfgrules_of(const char *key);
/* The i-th rule in table order; NULL past the end. */
const struct cfgrules_rule *cfgrules_at(size_t i);
/* An INT value by rule r: 0 and *ret in range; -ERANGE with *ret set when text is an
 * integer outside the range; -EINVAL when it is not one (a sign only where the range allows
 * negatives or -1), or r is not INT. */
int cfgrules_int(const struct cfgrules_rule *r, const char *text, int64_t *ret);

#endif
