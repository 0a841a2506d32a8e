/* peer: who sent a datagram, by the kernel's word, across pid namespaces (docs/deploy.md#identity).
 * SCM_CREDENTIALS names the sender in the daemon's pid namespace (the node pid, what `ps` on the
 * node prints); /proc/<pid>/status NSpid relates it to the pid the process knows itself by (its
 * container's pid), which is the pid its messages speak of. A bounded cache keeps one entry per
 * live sender, pinned by a pidfd, so a datagram costs one poll(2) rather than /proc reads; the
 * entry also carries the process's cgroup attribution (container id, pod UID) and what it
 * reported about its pod. Thread-safe (one mutex), although the daemon uses it from its loop. */
#ifndef MSMON_DAEMON_PEER_H
#define MSMON_DAEMON_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "contract/podid.h"

#define PEER_CACHE_DEFAULT 512 /* live senders remembered; a miss costs a /proc read, not a drop */
#define PEER_DESCENDANTS_MAX 256 /* processes a cross-namespace "speaks for a descendant" visits */

struct peer_id {
    int32_t pid;     /* in the daemon's pid namespace (the node pid) */
    int32_t ns_pid;  /* in the process's own pid namespace (its getpid()) */
    uint32_t depth;  /* pid namespaces between the daemon's and its own: 0 = the daemon's */
    uint64_t pidns;  /* inode of its pid namespace; 0 when unknown (no ptrace access) */
    bool exited;     /* it has exited since (this datagram was sent before) */
    struct podid_cgroup cg;
};

struct peer_counters {
    uint64_t lookups;    /* peer_lookup calls */
    uint64_t hits;       /* answered from the cache (one poll(2) on the pidfd) */
    uint64_t misses;     /* answered from /proc (NSpid, ns/pid, cgroup) */
    uint64_t evicted;    /* live entries pushed out by newer senders (the cache was full) */
    uint64_t exited;     /* entries dropped because their process exited */
    size_t entries;
};

struct peer_cache;

/* proc_root: where /proc is ("/proc"; fixture trees in tests). cap entries (0: the default).
 * 0 and *ret (caller owns; free with peer_cache_destroy()), or -ENOMEM. */
int peer_cache_create(const char *proc_root, size_t cap, struct peer_cache **ret);
void peer_cache_destroy(struct peer_cache *c);

/* The identity of node pid (> 0). 0 and *ret; -ESRCH when no such process can be read (it
 * exited and was reaped before its first datagram was read), -EINVAL for pid <= 0. A process
 * that exited since its entry was made is still answered once from the entry (its queued
 * datagrams pinned the pid number) with ret->exited set; then the entry goes. */
int peer_lookup(struct peer_cache *c, int32_t pid, struct peer_id *ret);

/* The rule of docs/daemon.md#local-peers-on-the-ipc-sockets across namespaces: a message of sender
 * may speak for `claimed`, a pid in the sender's own namespace, when it is the sender itself or
 * one of its descendants. On true, *ret_pid is claimed's node pid. Same-namespace senders walk
 * the claimed pid's parents (/proc/<pid>/stat); others walk the sender's children
 * (/proc/<pid>/task/<tid>/children), at most PEER_DESCENDANTS_MAX processes. */
bool peer_speaks_for(struct peer_cache *c, const struct peer_id *sender, int32_t claimed, int32_t *ret_pid);

/* pid and its ancestors as the node numbers them, at most cap (stops at the first pid <= 1 or
 * an unreadable parent): the kernel's version of a req's "itself, then its ancestors" list.
 * Returns the count (>= 1 for pid > 0). */
size_t peer_lineage(struct peer_cache *c, int32_t pid, int32_t *ret, size_t cap);

/* What the process of node pid reported about its pod (PluginHealth). -ENOENT when pid has no
 * entry (peer_lookup makes one). */
int peer_set_self(struct peer_cache *c, int32_t pid, const struct podid_self *self);
/* Its pod fields: the report, else (once per entry) the downward-API variables of its
 * /proc/<pid>/environ, for clients that do not report (Kineto, the upstream plugin); and the
 * cgroup attribution of its entry (ret_cg may be NULL). -ENOENT when nothing is known. */
int peer_self(struct peer_cache *c, int32_t pid, struct podid_self *ret, struct podid_cgroup *ret_cg);

/* The process has exited (a zombie too): its pidfd is readable, or kill(pid, 0) says ESRCH, or
 * /proc/<pid>/stat says Z or X. EPERM means it runs under another uid: alive. */
bool peer_gone(struct peer_cache *c, int32_t pid);
/* Drop the entries of exited processes (the GC timer); returns how many. */
int peer_gc(struct peer_cache *c);
void peer_get_counters(struct peer_cache *c, struct peer_counters *ret);

/* Inode of the daemon's own pid namespace (getStatus "pid_ns"; dyno doctor compares its own). */
uint64_t peer_own_pidns(const struct peer_cache *c);

/* /proc/<pid>/stat's parent pid and state from its text (the command name may hold spaces and
 * parentheses). 0, or -EINVAL. Exposed for the fuzzer. */
int peer_parse_stat(const char *text, size_t len, int32_t *ret_ppid, char *ret_state);

#endif
