/* doctor_ns: the checks of `dyno doctor` where containers meet the daemon
 * (docs/troubleshooting.md#containers-and-pods): a daemon that cannot see its senders' pids, a dyno
 * in a pid namespace of its own, a socket directory the job cannot see, Kineto's @dynolog in
 * another network namespace, uids mapped by a user namespace. Each failed check names its fix
 * and a docs/ section. */
#ifndef MSMON_CLI_DOCTOR_NS_H
#define MSMON_CLI_DOCTOR_NS_H

#include <stdbool.h>

#include <cjson/cJSON.h>

enum doctor_mark { DOCTOR_OK, DOCTOR_FAIL, DOCTOR_INFO };
/* One finished line (the caller escapes and counts it). */
typedef void (*doctor_say_fn)(void *report, enum doctor_mark m, const char *line);

struct doctor_ns_in {
    const cJSON *status;  /* the getStatus reply (borrowed) */
    bool has_pid;
    long long pid;        /* --pid, as this dyno's pid namespace numbers it */
    const char *sock_dir; /* this dyno's view of the socket directory; NULL: work it out */
};

/* --pid as the daemon numbers it: the same number when dyno and the daemon share a pid
 * namespace (or the reply does not say), else the process of the reply that runs in dyno's pid
 * namespace under that pid; -1 when no such process is listed. */
long long doctor_ns_node_pid(const cJSON *status, long long pid);
/* What the daemon itself refused (any target): datagrams without a visible sender pid, from
 * uids it does not take, speaking for others. */
void doctor_ns_daemon(const struct doctor_ns_in *in, doctor_say_fn say, void *report);
/* This node only: dyno's and the job's namespaces against the daemon's. */
void doctor_ns_local(const struct doctor_ns_in *in, doctor_say_fn say, void *report);

#endif
