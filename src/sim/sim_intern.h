/* sim_intern: library-owned string cache (record strings live until process exit, docs/design/mspti.md#runtime-semantics) and
 * the mstx marker domain registry (enabled by default; disabling may precede creation). */
#ifndef MSMON_SIM_INTERN_H
#define MSMON_SIM_INTERN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

/* Interned copy of s (NULL -> NULL); never freed. NULL also on allocation failure. */
const char *sim_intern(const char *s);

struct sim_domain {
    const char *name;            /* interned */
    _Atomic bool disabled;
    struct sim_domain *next;
};
/* Find or create (never freed). NULL on allocation failure. */
struct sim_domain *sim_domain_get(const char *name);
struct sim_domain *sim_domain_default(void);
/* Enable every domain again (mssim_reset). */
void sim_domain_enable_all(void);

#endif
