/* cupti_record: converts one CUPTI activity record (docs/design/session.md#cupti-backend) straight into the
 * normalised struct mon_record(s) the core consumes: one record may give none (a kind that is
 * not wanted, a marker flag we do not keep) or several (an NCCL kernel is Kernel,
 * Communication and Hccl). Used by the CUPTI backend, its tests and the CUPTI benchmark. */
#ifndef MSMON_PLUGIN_CUPTI_RECORD_H
#define MSMON_PLUGIN_CUPTI_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "msmon/cupti_abi.h"
#include "plugin/pipeline/record.h"

#define CUPTI_RECORD_MAX_OUT 3 /* most mon_records one CUPTI record becomes */

/* What the conversion needs besides the record; read-only while records are converted. */
struct cupti_conv {
    uint32_t enabled;      /* mon kinds on (bit 1u << enum mon_kind): routes API records and
                            * NCCL kernels, drops records of kinds nobody asked for */
    cupti_abi_get_callback_name_fn *callback_name; /* optional: NULL names APIs cbid_<n> */
    uint32_t pid;          /* getpid(): markers on objects other than a process or thread */
};

/* Convert the record at raw (8-byte aligned, as CUPTI hands them out; only its docs/design/session.md#cupti-backend prefix
 * is read, so longer records of newer CUPTI versions convert too) into out[0..n). Returns n
 * (0..CUPTI_RECORD_MAX_OUT), or -ENOENT for a CUPTI kind the plugin does not convert. */
int cupti_record_convert(const void *raw, const struct cupti_conv *cv,
                         struct mon_record out[CUPTI_RECORD_MAX_OUT]);

/* NCCL kernel names (`ncclDevKernel_AllReduce_Sum_f32_RING_LL(...)`, older `ncclKernel_...`):
 * 0 and the collective (interned, lives for the process), the msPTI data type and the
 * algorithm token (a constant, "" if none); -ENOENT for any other kernel name. */
int cupti_record_parse_nccl(const char *name, const char **ret_coll, int32_t *ret_dtype,
                            const char **ret_alg);
/* Length of name without a trailing `_v<digits>` of at least 4 digits (cudaMalloc_v3020). */
size_t cupti_record_strip_version(const char *name, size_t len);
/* API name of (domain, cbid): the callback name with its version suffix stripped, cached per
 * (domain, cbid) and interned (same pointer every time, lives for the process), or
 * "cbid_<n>" when CUPTI cannot name it. Thread-safe. */
const char *cupti_record_api_name(const struct cupti_conv *cv, int domain, uint32_t cbid);

#endif
