/* doctor_ns: namespace checks. The daemon reports its own pid and network namespaces (getStatus
 * "pid_ns", "net_ns"), each process's ("pid_ns") and pid inside it ("ns_pid"), and what its IPC
 * sockets refused ("ipc_drops"); dyno compares them with its own /proc/self/ns and with the job's
 * /proc/<pid>, which it reads as the job's user or root. */
#include "cli/doctor_ns.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli_gather.h"
#include "cli/cli_val.h"
#include "cli/doctor_text.h"
#include "contract/names.h"
#include "contract/podid.h"
#include "ipc/ipc_msg.h"

#define DOC "docs/troubleshooting.md#"
#define DEPLOY "docs/deploy.md#"
#define ENVIRON_MAX (1u << 20)

static void sayf(doctor_say_fn say, void *r, enum doctor_mark m, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void sayf(doctor_say_fn say, void *r, enum doctor_mark m, const char *fmt, ...)
{
    char line[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    say(r, m, line);
}

static double num(const cJSON *o, const char *key, double def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : def;
}

/* A namespace inode from the reply; 0 when absent or not a whole number. */
static uint64_t ns_of(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    long long x = cli_json_i64(v, 1, INT64_MAX, 0);
    return x > 0 ? (uint64_t)x : 0;
}

static uint64_t own_ns(const char *name)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof(path), "/proc/self/ns/%s", name);
    return stat(path, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

static uint64_t pid_ns_of(long long pid, const char *name)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof(path), "/proc/%lld/ns/%s", pid, name);
    return stat(path, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* The process of the reply that runs in pid namespace ns as pid (its ns_pid, or its pid when the
 * reply shows none because it shares the daemon's); NULL when none. */
static const cJSON *proc_in_ns(const cJSON *status, uint64_t ns, long long pid)
{
    const cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(status, "processes")) {
        long long mine = cli_json_i64(cJSON_GetObjectItemCaseSensitive(p, "ns_pid"), 1, INT32_MAX, -1);
        if (mine < 0)
            mine = cli_json_i64(cJSON_GetObjectItemCaseSensitive(p, "pid"), 1, INT32_MAX, -1);
        if (ns_of(p, "pid_ns") == ns && mine == pid)
            return p;
    }
    return NULL;
}

long long doctor_ns_node_pid(const cJSON *status, long long pid)
{
    uint64_t daemon = ns_of(status, "pid_ns"), mine = own_ns("pid");
    const cJSON *p;
    if (!daemon || !mine || daemon == mine)
        return pid;
    p = proc_in_ns(status, mine, pid);
    return p ? cli_json_i64(cJSON_GetObjectItemCaseSensitive(p, "pid"), 1, INT32_MAX, -1) : -1;
}

void doctor_ns_daemon(const struct doctor_ns_in *in, doctor_say_fn say, void *r)
{
    const cJSON *drops = cJSON_GetObjectItemCaseSensitive(in->status, "ipc_drops");
    double nopid = num(drops, "no_pid", 0), uid = num(drops, "uid", 0), other = num(drops, "speaks_for", 0);

    if (!cJSON_IsObject(drops))
        return; /* an older daemon: it does not say */
    if (nopid > 0)
        sayf(say, r, DOCTOR_FAIL, "the daemon dropped %.0f datagrams whose sender it cannot see: it runs in a pid "
             "namespace of its own, so the kernel gives it no pid for the jobs - fix: run dynolog in the host's pid "
             "namespace (Kubernetes: hostPID: true; docker: --pid=host) (%sthe-daemon-cannot-see-the-jobs-pids)",
             nopid, DOC);
    else
        sayf(say, r, DOCTOR_OK, "the daemon sees the pid of every sender (it shares the jobs' pid namespace or "
             "an ancestor of it)");
    if (uid > 0)
        sayf(say, r, DOCTOR_FAIL, "the daemon dropped %.0f datagrams from uids it does not take, the last from uid "
             "%.0f (a container's user as the node sees it?) - fix: dynolog --ipc_allowed_uids=%.0f, or run the job "
             "as root or the daemon's user (%smapped-uids)", uid, num(drops, "uid_last", 0),
             num(drops, "uid_last", 0), DOC);
    if (other > 0)
        sayf(say, r, DOCTOR_INFO, "the daemon refused %.0f datagrams that spoke for a process other than their "
             "sender or its descendants (an older plugin, or an attempt to act for another process; the daemon "
             "log names the pids)", other);
}

/* The whole of a /proc file of the job; NULL (and errno) when unreadable. Caller frees. */
static char *read_all(const char *path, size_t cap, size_t *ret_len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    char *buf;
    size_t len = 0;
    ssize_t n;
    if (fd < 0)
        return NULL;
    buf = malloc(cap + 1);
    if (!buf) {
        close(fd);
        errno = ENOMEM;
        return NULL;
    }
    while (len < cap && (n = read(fd, buf + len, cap - len)) > 0)
        len += (size_t)n;
    close(fd);
    buf[len] = '\0';
    *ret_len = len;
    return buf;
}

/* What the job sees at its MSMONITOR_SOCKET_DIR, against the daemon's dynolog.sock as dyno sees it. */
static void check_job_sockets(const struct doctor_ns_in *in, const char *env, size_t envlen, doctor_say_fn say,
                              void *r)
{
    char mine[4096], theirs[4200], path[4400], e1[1024], e2[1024];
    struct stat ours, job;
    size_t vl = 0;
    const char *v = doctor_environ_get(env, envlen, NAMES_ENV_SOCKET_DIR, &vl);
    bool other_mnt = pid_ns_of(in->pid, "mnt") != own_ns("mnt");

    if (in->sock_dir)
        snprintf(mine, sizeof(mine), "%s", in->sock_dir);
    else if (ipc_socket_dir(NULL, mine, sizeof(mine)) != 0)
        return;
    snprintf(path, sizeof(path), "%s/" NAMES_SOCK_FILE(NAMES_SOCK_CTL), mine);
    if (stat(path, &ours) != 0 || !S_ISSOCK(ours.st_mode))
        return; /* check_sockets says so */
    if (!v || vl == 0 || vl >= sizeof(theirs) - 1) {
        if (other_mnt)
            sayf(say, r, DOCTOR_FAIL, "pid %lld runs in a mount namespace of its own (a container) without "
                 NAMES_ENV_SOCKET_DIR ": it looks for the sockets in its user's home inside the container - fix: "
                 "mount the daemon's socket directory %s into the container and set " NAMES_ENV_SOCKET_DIR
                 " to where it is mounted (%sthe-job-cannot-see-the-socket-directory)", in->pid,
                 doctor_tesc(mine, strlen(mine), e1, sizeof(e1)), DOC);
        return;
    }
    memcpy(theirs, v, vl);
    theirs[vl] = '\0';
    doctor_tesc(theirs, vl, e2, sizeof(e2));
    snprintf(path, sizeof(path), "/proc/%lld/root%s/" NAMES_SOCK_FILE(NAMES_SOCK_CTL), in->pid, theirs);
    if (stat(path, &job) != 0) {
        if (errno == EACCES || errno == EPERM)
            sayf(say, r, DOCTOR_INFO, "could not look into pid %lld's mount namespace (%s): its socket directory "
                 "was not checked - run dyno doctor as the job's user or root", in->pid, strerror(errno));
        else
            sayf(say, r, DOCTOR_FAIL, "pid %lld cannot see %s/" NAMES_SOCK_FILE(NAMES_SOCK_CTL) " (its "
                 NAMES_ENV_SOCKET_DIR ") in its mount namespace - fix: mount the daemon's socket directory %s "
                 "there (a hostPath volume in Kubernetes, docker -v) (%sthe-job-cannot-see-the-socket-directory)",
                 in->pid, e2, doctor_tesc(mine, strlen(mine), e1, sizeof(e1)), DOC);
        return;
    }
    if (job.st_dev != ours.st_dev || job.st_ino != ours.st_ino)
        sayf(say, r, DOCTOR_FAIL, "pid %lld's %s/" NAMES_SOCK_FILE(NAMES_SOCK_CTL) " is another socket than the "
             "daemon's (%s/" NAMES_SOCK_FILE(NAMES_SOCK_CTL) ") - fix: mount the daemon's socket directory itself "
             "into the container, not a copy or another directory (%sthe-job-cannot-see-the-socket-directory)",
             in->pid, e2, doctor_tesc(mine, strlen(mine), e1, sizeof(e1)), DOC);
    else
        sayf(say, r, DOCTOR_OK, "pid %lld sees the daemon's " NAMES_SOCK_FILE(NAMES_SOCK_CTL) " at %s%s", in->pid, e2,
             other_mnt ? " in its own mount namespace" : "");
}

/* Kineto's endpoint is an abstract name, one per network namespace; ours are files. */
static void check_job_netns(const struct doctor_ns_in *in, const char *env, size_t envlen, doctor_say_fn say,
                            void *r)
{
    uint64_t daemon = ns_of(in->status, "net_ns"), job = pid_ns_of(in->pid, "net");
    size_t kl = 0, dl = 0;
    const char *kineto = doctor_environ_get(env, envlen, "KINETO_USE_DAEMON", &kl);
    const char *kdir = doctor_environ_get(env, envlen, NAMES_ENV_KINETO_SOCKET_DIR, &dl);
    bool uses_kineto = kineto && kl > 0 && !(kl == 1 && kineto[0] == '0');

    if (!daemon || !job || daemon == job)
        return;
    if (uses_kineto && !(kdir && dl > 0))
        sayf(say, r, DOCTOR_FAIL, "pid %lld runs Kineto (KINETO_USE_DAEMON), whose @dynolog socket exists once per "
             "network namespace, in another network namespace than the daemon's - fix: run the pod with "
             "hostNetwork: true, or set " NAMES_ENV_KINETO_SOCKET_DIR " to one directory mounted at the same path "
             "for both dynolog and the job (%skinetos-dynolog-in-another-network-namespace)", in->pid, DOC);
    else
        sayf(say, r, DOCTOR_OK, "pid %lld runs in another network namespace than the daemon: msMonitor's sockets "
             "are files in the shared directory and its replies come through one (%s)", in->pid,
             uses_kineto ? "Kineto uses " NAMES_ENV_KINETO_SOCKET_DIR : "docs/design/ipc.md#network-namespaces");
}

/* A user namespace maps the job's uids: the daemon sees the node's. */
static void check_job_uid(const struct doctor_ns_in *in, doctor_say_fn say, void *r)
{
    char path[64], *map, *st;
    size_t len = 0, slen = 0;
    unsigned long a, b, c;
    long long uid = -1;
    const cJSON *u, *uids = cJSON_GetObjectItemCaseSensitive(in->status, "ipc_uids");
    bool taken = false;

    snprintf(path, sizeof(path), "/proc/%lld/uid_map", in->pid);
    map = read_all(path, 4096, &len);
    if (!map)
        return;
    bool identity = sscanf(map, " %lu %lu %lu", &a, &b, &c) == 3 && a == 0 && b == 0 && c == 4294967295ul;
    free(map);
    if (identity || !cJSON_IsArray(uids))
        return;
    snprintf(path, sizeof(path), "/proc/%lld/status", in->pid);
    st = read_all(path, 16384, &slen);
    if (!st)
        return;
    const char *line = strstr(st, "\nUid:");
    if (line)
        uid = strtoll(line + 5, NULL, 10);
    free(st);
    if (uid < 0)
        return;
    cJSON_ArrayForEach(u, uids)
        taken |= cJSON_IsNumber(u) && (long long)u->valuedouble == uid;
    if (taken)
        sayf(say, r, DOCTOR_OK, "pid %lld runs in a user namespace; the node sees it as uid %lld, which the daemon "
             "takes", in->pid, uid);
    else
        sayf(say, r, DOCTOR_FAIL, "pid %lld runs in a user namespace; the node sees it as uid %lld, whose datagrams "
             "the daemon drops - fix: dynolog --ipc_allowed_uids=%lld (%smapped-uids)", in->pid, uid, uid, DOC);
}

void doctor_ns_local(const struct doctor_ns_in *in, doctor_say_fn say, void *r)
{
    uint64_t daemon = ns_of(in->status, "pid_ns"), mine = own_ns("pid");
    char *env = NULL, path[64], e1[600];
    size_t envlen = 0;

    if (daemon && mine && daemon != mine) {
        const cJSON *p = in->has_pid ? proc_in_ns(in->status, mine, in->pid) : NULL;
        const cJSON *pod = p ? cJSON_GetObjectItemCaseSensitive(p, "pod") : NULL;
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(pod, "name");
        if (p)
            sayf(say, r, DOCTOR_OK, "dyno runs in another pid namespace than the daemon (a container): pid %lld here "
                 "is pid %lld on the node%s%s%s; dyno status shows the node's pids", in->pid,
                 (long long)cli_json_i64(cJSON_GetObjectItemCaseSensitive(p, "pid"), 1, INT32_MAX, -1),
                 cJSON_IsString(name) ? " (pod " : "",
                 cJSON_IsString(name) ? doctor_tesc(name->valuestring, strlen(name->valuestring), e1, sizeof(e1)) : "",
                 cJSON_IsString(name) ? ")" : "");
        else
            sayf(say, r, DOCTOR_INFO, "dyno runs in another pid namespace than the daemon (a container): dyno status "
                 "shows the node's pids, and \"ns_pid\" the pid a process has in its container (%spids-in-containers)",
                 DEPLOY);
    }
    if (!in->has_pid)
        return;
    /* the daemon sees the job when it shares the job's pid namespace or one above it; a job it
     * does not list, while it is in neither dyno's namespace nor the job's, it cannot see */
    uint64_t job = pid_ns_of(in->pid, "pid");
    long long node = doctor_ns_node_pid(in->status, in->pid);
    bool listed = false;
    const cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(in->status, "processes"))
        listed |= node > 0 && cli_json_i64(cJSON_GetObjectItemCaseSensitive(p, "pid"), 1, INT32_MAX, -1) == node;
    if (!listed && daemon && mine && job && daemon != mine && daemon != job)
        sayf(say, r, DOCTOR_FAIL, "the daemon runs in a pid namespace that is neither this node's nor pid %lld's: "
             "it cannot see the job's processes - fix: run dynolog in the host's pid namespace (Kubernetes: hostPID: "
             "true; docker: --pid=host) (%sthe-daemon-cannot-see-the-jobs-pids)", in->pid, DOC);
    snprintf(path, sizeof(path), "/proc/%lld/environ", in->pid);
    env = read_all(path, ENVIRON_MAX, &envlen);
    if (env && envlen > 0) {
        check_job_sockets(in, env, envlen, say, r);
        check_job_netns(in, env, envlen, say, r);
    }
    free(env);
    check_job_uid(in, say, r);
}
