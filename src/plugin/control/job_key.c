/* job_key: which job a process belongs to, for its dyno-mode segment (job_key.h): the one
 * rule, which C ranks and the Python module (msmon_dynamic_job_key) both use. */
#include "plugin/control/job_key.h"

#include <errno.h>
#include <stdio.h>

#include "common/strutil.h"

/* FNV-1a 64 over each part and a separator, so ("ab","c") and ("a","bc") differ. */
static uint64_t jk_fnv(uint64_t h, const char *part)
{
    for (const unsigned char *p = (const unsigned char *)(part ? part : ""); *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    return (h ^ 0x1f) * 0x100000001b3ull;
}

/* The first of the variables the process has set (non-empty), NULL when none. */
static const char *jk_first(const struct job_key_env *e, const char *const *names)
{
    for (; *names; names++) {
        const char *v = e->get(e->ctx, *names);
        if (v && v[0])
            return v;
    }
    return NULL;
}

int job_key_of(const struct job_key_env *e, pid_t ppid, pid_t pid, char *buf, size_t cap, char *src, size_t srccap)
{
    static const char *const world[] = { "WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", NULL };
    const char *job = e->get(e->ctx, "MSMONITOR_JOB_KEY"), *port = e->get(e->ctx, "MASTER_PORT");
    const char *pmix = e->get(e->ctx, "PMIX_NAMESPACE"), *ompi = e->get(e->ctx, "OMPI_MCA_ess_base_jobid");
    const char *sjob = e->get(e->ctx, "SLURM_JOB_ID"), *sstep = e->get(e->ctx, "SLURM_STEP_ID");
    const char *ws = jk_first(e, world);
    uint64_t h = 0xcbf29ce484222325ull;
    int64_t nranks = 0;
    char num[24];

    if (job && job[0]) {
        h = jk_fnv(jk_fnv(h, "job"), job);
        snprintf(src, srccap, "MSMONITOR_JOB_KEY");
    } else if (port && port[0]) {
        /* One launcher rendezvous per job (torchrun, torch.distributed): two live jobs cannot
         * share MASTER_ADDR:MASTER_PORT. */
        h = jk_fnv(jk_fnv(jk_fnv(jk_fnv(h, "master"), e->get(e->ctx, "MASTER_ADDR")), port),
                    e->get(e->ctx, "TORCHELASTIC_RUN_ID"));
        snprintf(src, srccap, "the launcher's MASTER_ADDR:MASTER_PORT");
    } else if (pmix && pmix[0]) {
        h = jk_fnv(jk_fnv(h, "pmix"), pmix); /* one namespace per MPI job (Open MPI, Slurm's PMIx) */
        snprintf(src, srccap, "PMIX_NAMESPACE");
    } else if (ompi && ompi[0]) {
        h = jk_fnv(jk_fnv(h, "ompi"), ompi);
        snprintf(src, srccap, "OMPI_MCA_ess_base_jobid");
    } else if (sjob && sjob[0] && sstep && sstep[0]) {
        h = jk_fnv(jk_fnv(jk_fnv(h, "slurm"), sjob), sstep); /* the tasks of one srun step */
        snprintf(src, srccap, "SLURM_JOB_ID.SLURM_STEP_ID");
    } else if (ws && str_to_i64(ws, &nranks) == 0 && nranks > 1) {
        /* several ranks and no launcher variable we know: the ranks of one job are the
         * children of one launcher */
        snprintf(num, sizeof(num), "%d", (int)ppid);
        h = jk_fnv(jk_fnv(h, "ppid"), num);
        snprintf(src, srccap, "the parent pid %d (a world size of %lld without a launcher variable)", (int)ppid,
                 (long long)nranks);
    } else {
        /* a single-process job is a job of its own: two of them started from one shell never
         * share a segment (nor lose their monitoring when the other exits) */
        snprintf(num, sizeof(num), "%d", (int)pid);
        h = jk_fnv(jk_fnv(h, "pid"), num);
        snprintf(src, srccap, "this process (a single-process job)");
    }
    return snprintf(buf, cap, "%016llx", (unsigned long long)h) < (int)cap ? 0 : -ENOSPC;
}
