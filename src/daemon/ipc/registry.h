/* registry: processes that poll for on-demand configs (docs/design/ipc.md#registry): job -> pid set ->
 * process with a one-shot config mailbox, plus Kineto ctxt registrations. Thread-safe (one
 * internal mutex), although the daemon now calls it from its one loop thread only. */
#ifndef MSMON_DAEMON_REGISTRY_H
#define MSMON_DAEMON_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define REGISTRY_MAX_PROCS 4096
#define REGISTRY_MAX_CTXT 50
#define REGISTRY_MAX_PIDS 16

enum reg_origin { REG_ORIGIN_MSMON = 0, REG_ORIGIN_KINETO = 1 };
enum reg_kind { REG_KIND_TRACE = 0, REG_KIND_NPU_MONITOR = 1 };

struct registry;

/* hostname feeds REQUEST_TRACE_ID. 0 and *ret (caller owns; free with registry_destroy()),
 * or -ENOMEM. */
int registry_create(const char *hostname, struct registry **ret);
void registry_destroy(struct registry *r);

/* Fair sharing: one uid holds at most uid_quota of the REGISTRY_MAX_PROCS entries
 * (<= 0: no quota, the default), and with check_alive a process whose leaf pid is dead
 * (kill(pid, 0) fails with ESRCH) is never registered, is dropped when room is needed and
 * never takes a process_limit slot. check_alive is off when the leaves live in another pid
 * namespace (their pids mean nothing here). Defaults: no quota, check_alive off. */
void registry_set_policy(struct registry *r, int uid_quota, bool check_alive);

/* registry_poll on behalf of uid (the datagram's credential), counted against its quota;
 * -EDQUOT when uid is at its quota, -ESRCH when the leaf is dead (neither registered). */
int registry_poll_uid(struct registry *r, uid_t uid, int64_t job, const int32_t *pids, int n,
                      int32_t type, enum reg_origin origin, uint64_t now_ns, char **ret_cfg,
                      size_t *ret_len);

/* Who a req's sender is on the node (ipc_server, from the kernel's credentials and
 * /proc/<pid>/status NSpid): the leaf's node pid, the node's numbers of the leaf and its
 * ancestors (what --pids matches) and the leaf's pid namespace. The received pids are the
 * process's own namespace's: equal sets in two containers stay two processes. */
struct reg_who {
    int32_t node;             /* > 0 */
    uint64_t pidns;           /* 0 unknown */
    /* The node's numbers of the leaf and its ancestors (at most cap, leaf first), asked once,
     * when the process registers; NULL: the received pids are the node's (our namespace). */
    size_t (*lineage)(void *arg, int32_t node, int32_t *ret, size_t cap);
    void *arg;
};
/* registry_poll_uid for a sender of known node identity (who NULL: the received pids are the
 * node's, as for a sender in the daemon's own namespace). */
int registry_poll_who(struct registry *r, uid_t uid, const struct reg_who *who, int64_t job,
                      const int32_t *pids, int n, int32_t type, enum reg_origin origin, uint64_t now_ns,
                      char **ret_cfg, size_t *ret_len);

/* `req` (docs/design/ipc.md#polling): registers (job, set(pids)) if new, refreshes its last request time and, when
 * type has the ACTIVITIES bit, moves the pending config (+ "\n") out of the mailbox.
 * *ret_cfg: NULL (nothing pending) or a string the caller owns (free()). Returns 0, or
 * -ENOSPC when the process is unknown and the 4096 cap is reached (not registered). */
int registry_poll(struct registry *r, int64_t job, const int32_t *pids, int n, int32_t type,
                  enum reg_origin origin, uint64_t now_ns, char **ret_cfg, size_t *ret_len);

/* `ctxt` (docs/design/ipc.md#registration; pid as the node numbers it): returns the registration count of (job, npu) (>= 1) or -ENOSPC at the cap.
 * Logs "Registered process (<pid>) for job <job>." at INFO the first time (pid, job) registers,
 * at DEBUG on every repeat. */
int registry_ctxt(struct registry *r, int64_t job, int32_t npu, int32_t pid);

/* An NPU status from `pid`: processes whose leaf is pid become MSMON (docs/design/ipc.md#registry). */
void registry_mark_msmon(struct registry *r, int32_t pid);

/* Decides per process (its leaf's node pid) whether it may receive the config
 * (docs/design/rpc.md#status-gate; the --pod selection). */
typedef bool (*reg_eligible_fn)(enum reg_origin origin, int32_t pid, void *arg);

struct reg_set_result {
    int32_t *matched;        /* leaf node pids, iteration order; caller owns (reg_set_result_fini) */
    size_t n_matched;
    int32_t *triggered;
    size_t n_triggered;
    int busy;                /* triggered processes whose older pending config was replaced */
    size_t n_skipped;        /* matched but beyond the process limit */
};
/* setOnDemandConfig (docs/design/ipc.md#installing-a-config). pids must be sorted ascending (upstream's std::set<int>)
 * and the node's numbers (registry_resolve_pids). The
 * stored text is the wrapped config with REQUEST_TRACE_ID, an id unique per delivery
 * (docs/troubleshooting.md). A process whose mailbox still holds an older config gets the
 * new one instead (last wins; the old id's outcome becomes superseded). token (NULL or "":
 * none) tags the deliveries for registry_outcomes(). */
int registry_set_config(struct registry *r, int64_t job, const int32_t *pids, size_t npids,
                        const char *config, size_t config_len, int64_t limit,
                        reg_eligible_fn eligible, void *arg, const char *token,
                        struct reg_set_result *ret);

/* ---- config outcomes (docs/troubleshooting.md) ---- */
enum reg_outcome {
    REG_OUT_NONE = 0,
    REG_OUT_PENDING,      /* in the mailbox, the process has not polled since */
    REG_OUT_DELIVERED,    /* handed over, waiting for the process's acknowledgement */
    REG_OUT_UNACKED,      /* handed over to a client that never acknowledges (Kineto, upstream) */
    REG_OUT_APPLIED,
    REG_OUT_REJECTED,
    REG_OUT_SUPERSEDED,
};
/* "pending", "delivered", "delivered (unacknowledged)", "applied", "rejected", "superseded". */
const char *registry_outcome_name(enum reg_outcome o);
/* Final: nothing the process does later changes it (delivered and pending are not). */
bool registry_outcome_final(enum reg_outcome o);

#define REG_TOKEN_CAP 65
#define REG_REASON_CAP 256
#define REG_STATE_CAP 16
#define REG_CFG_HISTORY 4     /* deliveries remembered per process */
struct reg_cfg_entry {
    uint64_t id;              /* REQUEST_TRACE_ID; 0 = none */
    int32_t pid;              /* leaf, as the node numbers it */
    int32_t ns_pid;           /* leaf, in its own pid namespace */
    int32_t rank;             /* from the acknowledgement; -1 unknown */
    enum reg_outcome outcome;
    char token[REG_TOKEN_CAP];
    char reason[REG_REASON_CAP];
    char state[REG_STATE_CAP];  /* session state after it ("Running", "Idle"), "" unknown */
};
/* An acknowledgement from the process whose leaf is pid: outcome must be applied, rejected
 * or superseded; reason/state are copied (cut to the caps). -ENOENT when pid or id is
 * unknown, -EINVAL for another outcome, -EALREADY when the id already has a final outcome. */
int registry_ack(struct registry *r, int32_t pid, uint64_t id, enum reg_outcome outcome,
                 int32_t rank, const char *reason, const char *state);
/* PluginInfo said the process acknowledges configs: its deliveries wait for the answer. */
int registry_set_acks(struct registry *r, int32_t pid, bool acks);
/* Every remembered delivery tagged with token, registry order. Caller owns *ret (free()). */
int registry_outcomes(struct registry *r, const char *token, struct reg_cfg_entry **ret,
                      size_t *ret_n);
/* The newest delivery of the process whose leaf is pid (getStatus); -ENOENT when none. */
int registry_last_outcome(struct registry *r, int32_t pid, struct reg_cfg_entry *ret);
void reg_set_result_fini(struct reg_set_result *res);

/* GC pass (docs/design/ipc.md#garbage-collection): forget processes idle for more than age_ns, and then empty jobs with their
 * ctxt registrations. Returns the number of processes removed. */
int registry_gc(struct registry *r, uint64_t now_ns, uint64_t age_ns);

#define REG_BACKEND_CAP 16
#define REG_LIBRARY_CAP 512
struct reg_leaf {
    int32_t pid;
    int64_t job;
    uint64_t last_ns;   /* the process's latest poll (the clock registry_poll was given) */
    char backend[REG_BACKEND_CAP];   /* as reported by PluginInfo; "" = not reported */
    char library[REG_LIBRARY_CAP];   /* "" with a backend set: no vendor library was found */
    int32_t ns_pid;     /* the leaf in its own pid namespace (== pid in the daemon's) */
    uint64_t pidns;     /* its pid namespace (0 unknown) */
};
/* PluginInfo (ours): the backend and vendor library the plugin of leaf pid loaded ("" = none
 * found), shown by getStatus; copied, cut to the caps. -ENOENT if pid is not a live leaf. */
int registry_set_library(struct registry *r, int32_t pid, const char *backend, const char *library);
/* A --pids list (sorted ascending) as the node numbers it: a pid some process of job has in its
 * node lineage stays; a pid only known inside containers (their own numbers) becomes the node
 * pids of the processes that know it, when they share one pid namespace; when they live in
 * several it is ambiguous: -EEXIST, *ret_ambiguous = that pid and *ret_cand its candidates'
 * leaf node pids (sorted; caller owns, free()). On 0, *ret (caller owns, free()) is sorted and
 * unique. Pids nothing knows stay (they match nothing, as before). */
int registry_resolve_pids(struct registry *r, int64_t job, const int32_t *pids, size_t n, int32_t **ret,
                          size_t *ret_n, int32_t *ret_ambiguous, int32_t **ret_cand, size_t *ret_ncand);

/* Leaf pids of all live processes (getStatus). Caller owns *ret (free()). */
int registry_leaves(struct registry *r, struct reg_leaf **ret, size_t *ret_n);
size_t registry_count(struct registry *r);
int registry_ctxt_count(struct registry *r);

/* Wrapped config (docs/design/ipc.md#config-wrapping) into a new string: "\n" + 12 spaces + cfg + "\n" + 12 spaces +
 * "REQUEST_TRACE_ID=<id>". Caller owns. */
char *registry_wrap_config(uint64_t id, const char *cfg, size_t cfg_len, size_t *ret_len);
/* The id of one delivery: fnv1a64("<host>:<leaf>:<secs>:<seq>"), seq a per-daemon counter so
 * two deliveries within a second differ; never 0. */
uint64_t registry_config_id(const char *hostname, int32_t leaf, int64_t secs, uint64_t seq);
uint64_t registry_fnv1a64(const char *s, size_t n);

#endif
