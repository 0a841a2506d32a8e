/* job_key: the job a process belongs to, which names its dyno-mode segment (docs/python.md,
 * "Where the segment lives"). */
#ifndef MSMON_PLUGIN_JOB_KEY_H
#define MSMON_PLUGIN_JOB_KEY_H

#include <stddef.h>
#include <sys/types.h>

/* A process environment as job_key_of reads it (the plugin's penv table, or a Python dict). */
struct job_key_env {
    const char *(*get)(void *ctx, const char *name); /* NULL when unset */
    void *ctx;
};
/* 16 hex digits of a hash of the first that applies of MSMONITOR_JOB_KEY; the launcher's
 * MASTER_ADDR:MASTER_PORT (+ TORCHELASTIC_RUN_ID: torchrun, torch.distributed);
 * PMIX_NAMESPACE (Open MPI, Slurm with PMIx); OMPI_MCA_ess_base_jobid; SLURM_JOB_ID +
 * SLURM_STEP_ID (an srun step); the parent pid when WORLD_SIZE (or PMI_SIZE,
 * OMPI_COMM_WORLD_SIZE) says there are several ranks; else the process's own pid: a
 * single-process job is its own job. Every rank of one job computes the same key and no two
 * launches share one. src (srccap) names the rule that gave it, for the log. 0 or -ENOSPC. */
int job_key_of(const struct job_key_env *e, pid_t ppid, pid_t pid, char *buf, size_t cap, char *src, size_t srccap);

#endif
