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
/* The non-empty fields of p (podenv_get()'s) as extra keys of a data message (podid_key names; a pod name taken from
 * the hostname goes as PODID_HOSTNAME_KEY), at most cap; returns how many were written. */
size_t podenv_fields(const struct podid_self *p, struct datamsg_field *out, size_t cap);
/* The downward-API fields as one JSON object {"container","name","namespace","node"} (the known
 * keys, sorted; not the hostname) into buf; the length, 0 when none is set or cap is too small. */
size_t podenv_json(char *buf, size_t cap);

#endif
