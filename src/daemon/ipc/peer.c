/* peer: the sender cache. A hash of node pid -> entry, at most cap entries; a miss reads
 * /proc/<pid>/status (NSpid), ns/pid and cgroup once, a hit polls the entry's pidfd. The pidfd is
 * what keeps an entry honest: the kernel makes it readable when the process exits, so a reused
 * pid number can never inherit a dead process's identity, and the check costs one syscall. */
#include "daemon/ipc/peer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

#define NSPID_MAX 32                    /* nesting levels read (the kernel allows 32) */
#define STATUS_READ_MAX 8192            /* /proc/<pid>/status is ~1.5 KiB */
#define CGROUP_READ_MAX 65536           /* one line per v1 hierarchy; paths are short */
#define ENVIRON_READ_MAX (256u * 1024u) /* the downward-API variables come early in practice */
#define NOPIDFD_TTL_NS 1000000000ull    /* without pidfd_open (Linux < 5.3) an entry lives 1 s */
#define EXITED_KEEP_NS 5000000000ull    /* an exited entry answers late datagrams this long */
#define CHILDREN_READS_MAX 1024         /* task/<tid>/children files one descendant walk reads */

struct entry {
    int32_t pid;        /* 0: free slot */
    int pidfd;          /* -1: none */
    uint64_t used;      /* LRU stamp */
    uint64_t filled_ns;
    uint64_t exited_ns; /* 0: alive as far as we know */
    struct peer_id id;
    bool has_self, env_read;
    struct podid_self self;
    int next;           /* hash chain, -1 ends */
};

struct peer_cache {
    pthread_mutex_t mu;
    char root[128];
    size_t cap;
    struct entry *e;
    int *bucket;
    size_t nbucket; /* power of two */
    uint64_t tick;
    uint64_t own_pidns;
    struct peer_counters cnt;
    struct log_ratelimit rl_mismatch;
};

int peer_cache_create(const char *proc_root, size_t cap, struct peer_cache **ret)
{
    struct peer_cache *c = calloc(1, sizeof(*c));
    struct stat sb;
    char path[160];

    if (!c)
        return -ENOMEM;
    c->cap = cap ? cap : PEER_CACHE_DEFAULT;
    c->nbucket = 16;
    while (c->nbucket < 2 * c->cap)
        c->nbucket <<= 1;
    c->e = calloc(c->cap, sizeof(*c->e));
    c->bucket = malloc(c->nbucket * sizeof(*c->bucket));
    if (!c->e || !c->bucket) {
        free(c->e);
        free(c->bucket);
        free(c);
        return -ENOMEM;
    }
    for (size_t i = 0; i < c->nbucket; i++)
        c->bucket[i] = -1;
    for (size_t i = 0; i < c->cap; i++)
        c->e[i].pidfd = -1;
    snprintf(c->root, sizeof(c->root), "%s", proc_root && *proc_root ? proc_root : "/proc");
    snprintf(path, sizeof(path), "%s/self/ns/pid", c->root);
    if (stat(path, &sb) == 0)
        c->own_pidns = (uint64_t)sb.st_ino;
    pthread_mutex_init(&c->mu, NULL);
    *ret = c;
    return 0;
}

void peer_cache_destroy(struct peer_cache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->cap; i++)
        if (c->e[i].pidfd >= 0)
            close(c->e[i].pidfd);
    pthread_mutex_destroy(&c->mu);
    free(c->e);
    free(c->bucket);
    free(c);
}

uint64_t peer_own_pidns(const struct peer_cache *c)
{
    return c ? c->own_pidns : 0;
}

/* ---------------------------------------------------------------- /proc reads */

/* The whole of a /proc file (at most cap - 1 bytes, NUL-terminated). 0 and *ret_len, or -errno. */
static int read_proc(const struct peer_cache *c, int32_t pid, const char *name, char *buf, size_t cap,
                     size_t *ret_len)
{
    char path[192];
    size_t len = 0;
    int fd;

    snprintf(path, sizeof(path), "%s/%d/%s", c->root, (int)pid, name);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    while (len + 1 < cap) {
        ssize_t n = read(fd, buf + len, cap - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n < 0 && len == 0) {
                int e = errno;
                close(fd);
                return -e;
            }
            break;
        }
        len += (size_t)n;
    }
    close(fd);
    buf[len] = '\0';
    *ret_len = len;
    return 0;
}

int peer_parse_stat(const char *text, size_t len, int32_t *ret_ppid, char *ret_state)
{
    const char *rp = NULL;
    size_t i;
    long long ppid = 0;
    int digits = 0;

    for (i = 0; i < len; i++)
        if (text[i] == ')')
            rp = text + i;
    if (!rp)
        return -EINVAL;
    i = (size_t)(rp - text) + 1;
    if (i + 3 > len || text[i] != ' ' || text[i + 2] != ' ')
        return -EINVAL;
    *ret_state = text[i + 1];
    for (i += 3; i < len && text[i] >= '0' && text[i] <= '9' && digits < 11; i++, digits++)
        ppid = ppid * 10 + (text[i] - '0');
    if (digits == 0 || ppid > INT32_MAX || (i < len && text[i] != ' '))
        return -EINVAL;
    *ret_ppid = (int32_t)ppid;
    return 0;
}

static int stat_of(const struct peer_cache *c, int32_t pid, int32_t *ret_ppid, char *ret_state)
{
    char buf[1024];
    size_t len = 0;
    int rc = read_proc(c, pid, "stat", buf, sizeof(buf), &len);
    return rc ? rc : peer_parse_stat(buf, len, ret_ppid, ret_state);
}

static int nspid_of(const struct peer_cache *c, int32_t pid, int32_t *v, size_t *ret_n)
{
    char buf[STATUS_READ_MAX];
    size_t len = 0;
    int rc = read_proc(c, pid, "status", buf, sizeof(buf), &len);
    return rc ? rc : podid_nspid_parse(buf, len, v, NSPID_MAX, ret_n);
}

/* Make an identity for pid from /proc. The pidfd is opened first: from then on it names this
 * very process, whatever happens to the number. */
static int fill(struct peer_cache *c, int32_t pid, struct entry *e)
{
    int32_t v[NSPID_MAX];
    size_t n = 0, len = 0;
    char path[192], status[STATUS_READ_MAX];
    struct stat sb;
    char *cg = NULL;
    size_t cglen = 0;
    int rc;

    memset(e, 0, sizeof(*e));
    e->pidfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
    if (read_proc(c, pid, "status", status, sizeof(status), &len) != 0) {
        if (e->pidfd >= 0)
            close(e->pidfd);
        e->pidfd = -1;
        return -ESRCH; /* exited and reaped before we looked */
    }
    e->pid = pid;
    e->id.pid = pid;
    e->id.ns_pid = pid; /* without an NSpid line (Linux < 4.1): the daemon's own namespace */
    rc = podid_nspid_parse(status, len, v, NSPID_MAX, &n);
    if (rc == 0 && v[0] == pid) {
        e->id.depth = (uint32_t)(n - 1);
        e->id.ns_pid = v[n - 1];
    } else if (rc == 0) {
        /* NSpid's first entry is the pid in the namespace of /proc's mount: not ours */
        LOG_RL(&c->rl_mismatch, 60000, LOG_LVL_WARNING,
               "ipc: %s/%d/status names pid %d first: %s is not this daemon's pid namespace's /proc; the "
               "pids of processes in containers cannot be related (docs/deploy.md#identity)",
               c->root, (int)pid, (int)v[0], c->root);
    }
    snprintf(path, sizeof(path), "%s/%d/ns/pid", c->root, (int)pid);
    if (stat(path, &sb) == 0)
        e->id.pidns = (uint64_t)sb.st_ino;
    e->id.cg = (struct podid_cgroup){ "", "", "" };
    cg = malloc(CGROUP_READ_MAX);
    if (cg && read_proc(c, pid, "cgroup", cg, CGROUP_READ_MAX, &cglen) == 0)
        (void)podid_cgroup_parse(cg, cglen, &e->id.cg);
    free(cg);
    e->filled_ns = clock_mono_ns();
    e->next = -1;
    return 0;
}

/* ---------------------------------------------------------------- the table */

static size_t slot_of(const struct peer_cache *c, int32_t pid)
{
    return (size_t)(((uint32_t)pid * 2654435761u) & (uint32_t)(c->nbucket - 1));
}

static int find(const struct peer_cache *c, int32_t pid)
{
    for (int i = c->bucket[slot_of(c, pid)]; i >= 0; i = c->e[i].next)
        if (c->e[i].pid == pid)
            return i;
    return -1;
}

static void drop(struct peer_cache *c, int idx)
{
    int *link = &c->bucket[slot_of(c, c->e[idx].pid)];
    while (*link >= 0 && *link != idx)
        link = &c->e[*link].next;
    if (*link == idx)
        *link = c->e[idx].next;
    if (c->e[idx].pidfd >= 0)
        close(c->e[idx].pidfd);
    memset(&c->e[idx], 0, sizeof(c->e[idx]));
    c->e[idx].pidfd = -1;
    c->e[idx].next = -1;
    c->cnt.entries--;
}

/* A free slot: an empty one, else the oldest exited entry, else the least recently used. */
static int take_slot(struct peer_cache *c)
{
    int lru = -1, ex = -1;
    for (size_t i = 0; i < c->cap; i++) {
        struct entry *e = &c->e[i];
        if (e->pid == 0)
            return (int)i;
        if (e->exited_ns && (ex < 0 || e->exited_ns < c->e[ex].exited_ns))
            ex = (int)i;
        if (lru < 0 || e->used < c->e[lru].used)
            lru = (int)i;
    }
    if (ex >= 0) {
        drop(c, ex);
        return ex;
    }
    drop(c, lru);
    c->cnt.evicted++;
    return lru;
}

static bool pidfd_exited(int fd)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR));
}

/* A process that is still (or again) running at pid: not a zombie, not gone. */
static bool runs(const struct peer_cache *c, int32_t pid)
{
    int32_t ppid;
    char state;
    return stat_of(c, pid, &ppid, &state) == 0 && state != 'Z' && state != 'X';
}

/* The entry of pid, checked; -1 when none (or a stale one was dropped). */
static int current(struct peer_cache *c, int32_t pid, uint64_t now)
{
    int idx = find(c, pid);
    struct entry *e;

    if (idx < 0)
        return -1;
    e = &c->e[idx];
    if (e->pidfd < 0) {
        if (now - e->filled_ns > NOPIDFD_TTL_NS) {
            drop(c, idx);
            return -1;
        }
        return idx;
    }
    if (!e->exited_ns && !pidfd_exited(e->pidfd))
        return idx;
    if (!e->exited_ns) {
        e->exited_ns = now;
        c->cnt.exited++;
    }
    /* exited: late datagrams still carry this identity, unless the number already names a new
     * running process (pid reuse) or the grace period is over */
    if (now - e->exited_ns > EXITED_KEEP_NS || runs(c, pid)) {
        drop(c, idx);
        return -1;
    }
    return idx;
}

int peer_lookup(struct peer_cache *c, int32_t pid, struct peer_id *ret)
{
    uint64_t now = clock_mono_ns();
    struct entry fresh;
    int idx, rc = 0;

    if (pid <= 0)
        return -EINVAL;
    pthread_mutex_lock(&c->mu);
    c->cnt.lookups++;
    idx = current(c, pid, now);
    if (idx >= 0) {
        c->cnt.hits++;
    } else {
        c->cnt.misses++;
        rc = fill(c, pid, &fresh);
        if (rc)
            goto out;
        idx = take_slot(c);
        c->e[idx] = fresh;
        size_t b = slot_of(c, pid);
        c->e[idx].next = c->bucket[b];
        c->bucket[b] = idx;
        c->cnt.entries++;
    }
    c->e[idx].used = ++c->tick;
    *ret = c->e[idx].id;
    ret->exited = c->e[idx].exited_ns != 0;
out:
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* ---------------------------------------------------------------- speaks for */

/* Same namespace: is sender the claimed node pid or one of its ancestors? The walk stops at
 * init, at a loop or after 64 generations (deeper trees do not occur in training jobs). */
static bool ancestor_of(const struct peer_cache *c, int32_t sender, int32_t claimed)
{
    int32_t p = claimed;
    for (int depth = 0; depth < 64 && p > 1; depth++) {
        int32_t ppid;
        char state;
        if (p == sender)
            return true;
        if (stat_of(c, p, &ppid, &state) != 0)
            return false;
        p = ppid;
    }
    return p == sender;
}

/* Another namespace: walk the sender's descendants (node pids) for the one whose pid at the
 * sender's level is claimed. Bounded in processes and files read. */
static bool descendant_named(const struct peer_cache *c, const struct peer_id *s, int32_t claimed,
                             int32_t *ret_pid)
{
    int32_t queue[PEER_DESCENDANTS_MAX];
    size_t head = 0, tail = 0, reads = 0;
    bool found = false;

    queue[tail++] = s->pid;
    while (head < tail && !found && reads < CHILDREN_READS_MAX) {
        int32_t q = queue[head++];
        char dir[192];
        snprintf(dir, sizeof(dir), "%s/%d/task", c->root, (int)q);
        DIR *d = opendir(dir);
        struct dirent *de;
        if (!d)
            continue;
        while (!found && (de = readdir(d)) != NULL && reads < CHILDREN_READS_MAX) {
            char name[300], buf[4096];
            size_t len = 0;
            if (de->d_name[0] < '0' || de->d_name[0] > '9')
                continue;
            reads++;
            snprintf(name, sizeof(name), "task/%s/children", de->d_name);
            if (read_proc(c, q, name, buf, sizeof(buf), &len) != 0)
                continue;
            for (char *p = buf; *p && !found;) {
                char *end;
                long child = strtol(p, &end, 10);
                int32_t v[NSPID_MAX];
                size_t n = 0;
                if (end == p)
                    break;
                p = end;
                while (*p == ' ')
                    p++;
                if (child <= 0 || child > INT32_MAX)
                    continue;
                if (nspid_of(c, (int32_t)child, v, &n) == 0 && v[0] == (int32_t)child && n > s->depth &&
                    v[s->depth] == claimed) {
                    *ret_pid = (int32_t)child;
                    found = true;
                } else if (tail < PEER_DESCENDANTS_MAX) {
                    queue[tail++] = (int32_t)child;
                }
            }
        }
        closedir(d);
    }
    return found;
}

bool peer_speaks_for(struct peer_cache *c, const struct peer_id *sender, int32_t claimed, int32_t *ret_pid)
{
    if (claimed <= 0 || sender->pid <= 0)
        return false;
    if (claimed == sender->ns_pid) {
        *ret_pid = sender->pid;
        return true;
    }
    if (sender->depth == 0) {
        if (!ancestor_of(c, sender->pid, claimed))
            return false;
        *ret_pid = claimed;
        return true;
    }
    return descendant_named(c, sender, claimed, ret_pid);
}

size_t peer_lineage(struct peer_cache *c, int32_t pid, int32_t *ret, size_t cap)
{
    size_t n = 0;
    if (cap == 0 || pid <= 0)
        return 0;
    ret[n++] = pid;
    while (n < cap) {
        int32_t ppid;
        char state;
        if (stat_of(c, ret[n - 1], &ppid, &state) != 0 || ppid <= 1)
            break;
        ret[n++] = ppid;
    }
    return n;
}

/* ---------------------------------------------------------------- attribution */

int peer_set_self(struct peer_cache *c, int32_t pid, const struct podid_self *self)
{
    int rc = -ENOENT;
    pthread_mutex_lock(&c->mu);
    int idx = find(c, pid);
    if (idx >= 0) {
        c->e[idx].self = *self;
        c->e[idx].has_self = true;
        rc = 0;
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* The downward-API variables of pid's initial environment (NUL-separated NAME=value). */
static void env_self(const struct peer_cache *c, int32_t pid, struct podid_self *ret)
{
    char *buf = malloc(ENVIRON_READ_MAX);
    size_t len = 0;

    memset(ret, 0, sizeof(*ret));
    if (!buf || read_proc(c, pid, "environ", buf, ENVIRON_READ_MAX, &len) != 0) {
        free(buf);
        return;
    }
    for (size_t i = 0; i < len;) {
        const char *var = buf + i;
        size_t vl = strnlen(var, len - i);
        for (int f = 0; f < PODID_NFIELDS; f++) {
            const char *name = podid_env((enum podid_field)f);
            size_t nl = strlen(name);
            if (vl > nl && memcmp(var, name, nl) == 0 && var[nl] == '=')
                (void)podid_self_set(ret, (enum podid_field)f, var + nl + 1, vl - nl - 1);
        }
        i += vl + 1;
    }
    free(buf);
}

int peer_self(struct peer_cache *c, int32_t pid, struct podid_self *ret, struct podid_cgroup *ret_cg)
{
    int rc = -ENOENT;
    struct entry *e;

    memset(ret, 0, sizeof(*ret));
    if (ret_cg)
        *ret_cg = (struct podid_cgroup){ "", "", "" };
    pthread_mutex_lock(&c->mu);
    int idx = find(c, pid);
    if (idx < 0)
        goto out;
    e = &c->e[idx];
    if (!e->has_self && !e->env_read) {
        env_self(c, pid, &e->self);
        e->env_read = true;
    }
    *ret = e->self;
    /* a hostname names the pod of a process in a container only: on the node it is the node */
    if (ret->pod_from_hostname && e->id.depth == 0 && !e->id.cg.container_id[0]) {
        ret->v[PODID_POD][0] = '\0';
        ret->pod_from_hostname = false;
    }
    if (ret_cg)
        *ret_cg = e->id.cg;
    rc = 0;
out:
    pthread_mutex_unlock(&c->mu);
    return rc;
}

bool peer_gone(struct peer_cache *c, int32_t pid)
{
    bool gone;
    int32_t ppid;
    char state;

    if (pid <= 0)
        return false;
    if (c) {
        pthread_mutex_lock(&c->mu);
        int idx = find(c, pid);
        if (idx >= 0 && c->e[idx].pidfd >= 0) {
            gone = c->e[idx].exited_ns || pidfd_exited(c->e[idx].pidfd);
            pthread_mutex_unlock(&c->mu);
            return gone;
        }
        pthread_mutex_unlock(&c->mu);
    }
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
        return true;
    /* a zombie still answers kill(): it has exited all the same */
    struct peer_cache tmp = { .root = "/proc" };
    int rc = stat_of(c ? c : &tmp, pid, &ppid, &state);
    return rc == 0 ? (state == 'Z' || state == 'X') : rc == -ENOENT || rc == -ESRCH;
}

int peer_gc(struct peer_cache *c)
{
    int n = 0;
    uint64_t now = clock_mono_ns();
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->cap; i++) {
        struct entry *e = &c->e[i];
        if (e->pid == 0)
            continue;
        if ((e->pidfd >= 0 && (e->exited_ns || pidfd_exited(e->pidfd))) ||
            (e->pidfd < 0 && now - e->filled_ns > NOPIDFD_TTL_NS)) {
            if (!e->exited_ns && e->pidfd >= 0)
                c->cnt.exited++;
            drop(c, (int)i);
            n++;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return n;
}

void peer_get_counters(struct peer_cache *c, struct peer_counters *ret)
{
    pthread_mutex_lock(&c->mu);
    *ret = c->cnt;
    pthread_mutex_unlock(&c->mu);
}
