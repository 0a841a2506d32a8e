/* cfgrules: the value rules of the npu-monitor config keys (type, default, range, command,
 * the CLI's flag, reason and help), one table (cfgrules.def) that the CLI builds its flags from
 * and checks them against and the plugin reads values by, so the two cannot disagree on a range
 * (docs/design/contract.md#npu-monitor-keys). */
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

/* The dyno subcommands of the table's command column. */
#define CFGRULES_COMMAND_NPU_MONITOR "npu-monitor"

struct cfgrules_rule {
    const char *key;
    enum cfgrules_type type;
    const char *dflt;
    int64_t min, max;
    bool minus_one;
    const char *command;
    const char *flag;
    const char *help;
};

/* The rule of key (exact spelling); NULL for a key without one. Static storage. */
const struct cfgrules_rule *cfgrules_of(const char *key);
/* The i-th rule in table order; NULL past the end. */
const struct cfgrules_rule *cfgrules_at(size_t i);
/* An INT value by rule r: 0 and *ret in range; -ERANGE with *ret set when text is an
 * integer outside the range; -EINVAL when it is not one (a sign only where the range allows
 * negatives or -1), or r is not INT. */
int cfgrules_int(const struct cfgrules_rule *r, const char *text, int64_t *ret);
/* The CLI's reason for a value out of rule r, into buf (always terminated), built from the rule
 * and the table it names: a BOOL's "Must be true or false", an INT's range ("Must be an integer
 * in [100, 500000]", "Must be -1 or an integer greater than or equal to 2"), the exportable rows
 * of the output table ("possible values: DB, Jsonl"). "" for the types whose own validator names
 * the fault (seconds, kinds, directory, filter: docs/design/cli.md#validation). Returns the
 * length (as snprintf). */
size_t cfgrules_reason(const struct cfgrules_rule *r, char *buf, size_t cap);

#endif
