/* pl_test: drive an output through the real pipeline (pipeline.h) in unit tests: the output
 * is created, fed and destroyed by a pipeline without a filter, as the monitor does. A few
 * outputs may be alive at once. Header-only. */
#ifndef MSMON_TEST_PL_TEST_H
#define MSMON_TEST_PL_TEST_H

#include <stdlib.h>
#include <string.h>

#include "plugin/pipeline/output.h"
#include "plugin/pipeline/pipeline.h"

#define PT_MAX 8
static struct { struct output *p; struct pipeline *pl; } pt_live[PT_MAX];

static inline struct pipeline *pt_pl(struct output *p)
{
    for (int i = 0; i < PT_MAX; i++)
        if (pt_live[i].p == p && p)
            return pt_live[i].pl;
    return NULL;
}

static inline int pt_create(const struct output_ops *ops, const struct output_config *cfg, struct output **ret)
{
    struct pipeline *pl = NULL;
    int rc = pipeline_create(cfg, NULL, ops, &pl);
    if (rc != 0)
        return rc;
    for (int i = 0; i < PT_MAX; i++) {
        if (!pt_live[i].p) {
            pt_live[i].p = pipeline_output(pl);
            pt_live[i].pl = pl;
            break;
        }
    }
    *ret = pipeline_output(pl);
    return 0;
}

/* The pipeline compacts in place: feed a copy so tests may reuse their arrays. */
static inline void pt_consume(struct output *p, const struct mon_record *r, size_t n)
{
    struct mon_record *copy = malloc((n ? n : 1) * sizeof(*copy));
    memcpy(copy, r, n * sizeof(*copy));
    pipeline_deliver(pt_pl(p), copy, n);
    free(copy);
}

static inline int pt_stop(struct output *p, const char *pgi)
{
    return pipeline_stop(pt_pl(p), pgi);
}

static inline void pt_destroy(struct output *p)
{
    for (int i = 0; i < PT_MAX; i++) {
        if (pt_live[i].p == p && p) {
            pipeline_destroy(pt_live[i].pl);
            pt_live[i].p = NULL;
            pt_live[i].pl = NULL;
            return;
        }
    }
}

#endif
