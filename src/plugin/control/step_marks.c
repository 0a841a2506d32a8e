/* step_marks: the `step <N>` ranges (step_marks.h). The API is resolved once, when a rank
 * joins dyno mode, and read by its stepping thread afterwards: both under dyno mode's lock. */
#include "plugin/control/step_marks.h"

#include <dlfcn.h>
#include <stddef.h>

#include "contract/names.h"
#include "plugin/penv.h"

/* mstx: the simulator's API, else CANN's; both optional */
static struct {
    uint64_t (*sim_start)(const char *, int32_t);
    uint64_t (*cann_start)(const char *, void *);
    void (*range_end)(uint64_t);
} mk;

void step_marks_resolve(void)
{
    const char *names[2] = { penv_get(PENV_MSPTI_LIB), "libmspti.so" };
    void *h;

    if (mk.range_end)
        return;
    for (int i = 0; i < 2; i++) {
        if (!names[i] || !names[i][0])
            continue;
        h = dlopen(names[i], RTLD_LAZY | RTLD_NOLOAD); /* already loaded by the backend */
        if (!h)
            continue;
        if (dlsym(h, "mssim_is_simulator") && dlsym(h, "mssim_mstx_range_start") && dlsym(h, "mssim_mstx_range_end")) {
            *(void **)&mk.sim_start = dlsym(h, "mssim_mstx_range_start");
            *(void **)&mk.range_end = dlsym(h, "mssim_mstx_range_end");
            return; /* handle kept for the process */
        }
        dlclose(h);
    }
    h = dlopen("libms_tools_ext.so", RTLD_LAZY | RTLD_LOCAL);
    if (!h)
        return;
    *(void **)&mk.cann_start = dlsym(h, "mstxRangeStartA");
    *(void **)&mk.range_end = dlsym(h, "mstxRangeEnd");
    if (!mk.cann_start || !mk.range_end) {
        mk.cann_start = NULL;
        mk.range_end = NULL;
        dlclose(h);
    }
}

uint64_t step_marks_begin(int32_t step)
{
    char msg[32];

    if (names_step_format(msg, sizeof(msg), step) != 0)
        return 0;
    if (mk.sim_start)
        return mk.sim_start(msg, 0);
    if (mk.cann_start)
        return mk.cann_start(msg, NULL);
    return 0;
}

void step_marks_end(uint64_t id)
{
    if (mk.range_end && id)
        mk.range_end(id);
}
