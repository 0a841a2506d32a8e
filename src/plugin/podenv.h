/* podenv: what this process says about its pod (docs/deploy.md#attribution): the downward-API
 * variables POD_NAME, POD_NAMESPACE, NODE_NAME and CONTAINER_NAME (read once through penv), the
 * hostname standing in for an unset POD_NAME, each kept only when it is a valid name by the
 * contract's rules. The daemon gets them in every PluginHealth report; the DB and JSONL outputs
 * write them beside their data. Thread-safe (built once). */
#ifndef MSMON_PLUGIN_PODENV_H
#define MSMON_PLUGIN_PODENV_H

#include <stddef.h>

#include "contract/datamsg.h"
#include "contract/podid.h"

/* The fields, built at first use. Borrowed for the process's life. */
const struct podid_self *podenv_get(void);
/* The non-empty fields as extra keys of a data message (podid_key names), at most cap;
 * returns how many were written. */
size_t podenv_fields(struct datamsg_field *out, size_t cap);
/* The fields as one JSON object {"container","name","namespace","node"} (the known keys,
 * sorted) into buf; the length, 0 when nothing is known or cap is too small. */
size_t podenv_json(char *buf, size_t cap);

#endif
