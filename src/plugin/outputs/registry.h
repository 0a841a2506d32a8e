/* registry: the plugin's outputs as {name, ops}, one row each, built from the contract's
 * output table (contract/outputs.h; docs/design/session.md#outputs). A session asks for a set
 * of outputs; nothing else in the plugin names an output's ops. */
#ifndef MSMON_PLUGIN_REGISTRY_H
#define MSMON_PLUGIN_REGISTRY_H

#include "contract/outputs.h"
#include "plugin/outputs/proc.h"

struct registry_output {
    const char *name;
    const struct proc_ops *ops;
};

/* The row of id (test replacements included); NULL out of range. */
const struct registry_output *registry_get(enum msmon_output id);
/* Test seam: ops replacing an output's (NULL restores the table's). */
void registry_test_replace(enum msmon_output id, const struct proc_ops *ops);

#endif
