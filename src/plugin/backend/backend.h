/* backend: the vendor activity interface (docs/design/session.md#backends, docs/design/session.md#cupti-backend). A
 * backend owns its library loading, its buffer protocol and the conversion of its raw records
 * into struct mon_record; the core sees only this table and batches of normalised records.
 * One file per implementation: backend_mspti.c, backend_cupti.c, backend_fake.c (tests).
 * This header includes no vendor header: nothing above backend/ ever sees one. */
#ifndef MSMON_PLUGIN_BACKEND_H
#define MSMON_PLUGIN_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plugin/pipeline/record.h"

/* One batch of normalised records, called on the backend's completion threads (several may
 * run at once) between start() and the return of stop(). The records are the backend's
 * scratch: mutable (the core filters them in place) and borrowed until the call returns;
 * their strings are the vendor library's and live for the process. */
typedef void (*backend_sink_fn)(void *ctx, struct mon_record *recs, size_t n);

/* What a backend lost during the current session (reset by start()). */
struct backend_drops {
    uint64_t buffers_declined;  /* buffer requests refused (pool cap or out of memory): the
                                 * vendor drops the records it could not store */
    uint64_t unknown_kind;      /* records of a kind the backend cannot convert (skipped) */
    uint64_t read_errors;       /* record-iterator errors: the rest of that buffer is lost */
    uint64_t vendor_dropped;    /* records the vendor library itself reports dropped */
};

struct backend;

/* Threading: start, set_kinds, flush, stop and destroy are called by one thread at a time
 * (the monitor's session actor); drops() may be called from any thread. */
struct backend_ops {
    const char *name; /* "mspti", "fake", ... */
    /* Open a collection session (msPTI: subscribe, register the buffer callbacks); no kind is
     * enabled yet. -EBUSY if another tool owns the vendor API, -EIO otherwise (logged). */
    int (*start)(struct backend *be, backend_sink_fn sink, void *ctx);
    /* Make the enabled set `want` (bit 1u << enum mon_kind): enable what is missing, disable
     * what is not wanted, ascending kinds; failures are logged per kind. *ret_enabled gets
     * the kinds actually on. 0, or -ENOENT without a session. */
    int (*set_kinds)(struct backend *be, uint32_t want, uint32_t *ret_enabled);
    /* Report-tick flush: on return every record produced so far has been through the sink. */
    int (*flush)(struct backend *be);
    /* Close the session (docs/design/session.md#session-life-cycle steps 1–3): disable every kind, flush synchronously, detach.
     * After it returns the sink is never called again (late completions are discarded). */
    void (*stop)(struct backend *be);
    /* Session drop counters; safe from any thread. */
    void (*drops)(const struct backend *be, struct backend_drops *ret);
    /* Free the object. Vendor libraries stay mapped (record strings point into them). */
    void (*destroy)(struct backend *be);
};

/* Base of every implementation (first member), so the core holds one pointer type. */
struct backend {
    const struct backend_ops *ops;
    const char *library;   /* the vendor library loaded ("" for fakes); borrowed for the object's life */
};

/* One vendor backend, a row of backend.c's table, defined by the implementation's own file
 * (backend_<name>.c): the selection names no implementation's header. */
struct backend_impl {
    const char *name; /* the MSMONITOR_BACKEND value */
    /* Load the vendor library and build the backend; quiet: no log line when it is not found
     * (the automatic fallback's probe). -ENOENT if not found. Caller owns; free with
     * be->ops->destroy(). */
    int (*create)(struct backend **ret, bool quiet);
};

extern const struct backend_impl backend_mspti_impl;
extern const struct backend_impl backend_cupti_impl;

/* The backend chosen by MSMONITOR_BACKEND: "mspti" or "cupti" (docs/design/session.md#cupti-backend). Unset or empty:
 * "cupti" under CUDA_INJECTION64_PATH, else msPTI, falling back to CUPTI when msPTI is not
 * found, MSMONITOR_MSPTI_LIB is unset and a CUPTI library loads. -ENOENT when the vendor
 * library is not found (logged with what was searched). Caller owns; free with
 * be->ops->destroy(). */
int backend_create(struct backend **ret);
/* Copies into buf why the automatic choice is not msPTI: "" when msPTI loaded, a backend was pinned, or no
 * choice was made yet; else one line naming what was searched (status marks, docs/cupti.md). */
void backend_fallback_note(char *buf, size_t cap);

#endif
