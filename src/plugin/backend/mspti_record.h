/* mspti_record: converts one packed msPTI activity record (docs/design/mspti.md#kinds-and-records) into the
 * aligned struct mon_record the core consumes. Only the msPTI backend calls it (and the
 * ingestion benchmark and the record tests). */
#ifndef MSMON_PLUGIN_MSPTI_RECORD_H
#define MSMON_PLUGIN_MSPTI_RECORD_H

#include "plugin/pipeline/record.h"

/* Convert one packed msPTI record (pointer into a buffer, possibly unaligned fields) into
 * *out. Returns 0, or -ENOENT for a kind the plugin does not know (skip it). */
int mon_record_from_mspti(const void *raw, struct mon_record *out);

#endif
