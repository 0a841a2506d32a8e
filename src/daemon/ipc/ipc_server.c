/* ipc_server: receive + dispatch for the IPC endpoints, driven by the daemon loop. Every
 * datagram is dequeued with MSG_TRUNC into a 40+4096 buffer, validated by ipc_msg_parse,
 * peer-checked and dispatched on its exact type; drops are logged at most once a second per
 * reason. */
#include "daemon/ipc/ipc_server.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/logesc.h"
#include "common/strutil.h"
#include "contract/names.h"
#include "daemon/ipc/peer.h"
#include "daemon/ipc/sock_file.h"
#include "ipc/ipc_msg.h"

struct ipc_server {
    struct ipc_server_cfg cfg;
    struct sock_file ctl;      /* dynolog.sock */
    struct sock_file data;     /* dynolog_data.sock */
    int kineto_fd;
    struct sock_file kineto_file;   /* dir mode only */
    char netns_link[160];           /* <dir>/dynolog.netns when we made it, else "" */
    int dir_fd;                     /* the socket directory (O_PATH): path-bound clients' replies */
    char netns_text[64];
    char kineto_dir[108];
    struct loop_event *ev_ctl, *ev_data, *ev_kineto;   /* NULL until ipc_server_start */
    struct log_ratelimit rl_drop[5];
    struct log_ratelimit rl_send;
    struct log_ratelimit rl_peer;
    struct log_ratelimit rl_type;
    struct log_ratelimit rl_size;
    struct log_ratelimit rl_unnamed;
    struct log_ratelimit rl_uid[3], rl_pid[3], rl_nocred;   /* per endpoint (endpoint_idx) */
    struct log_ratelimit rl_route;  /* a path-bound client whose socket file is not where it must be */
    uid_t allowed[IPC_MAX_ALLOWED_UIDS];
    size_t nallowed;
    bool pid_check;
    uint64_t dropped_uid, dropped_pid, dropped_nopid; /* shown in the drop lines and getStatus */
    uid_t cur_uid;                       /* credential uid of the datagram being handled */
    struct peer_cache *peers;            /* cfg's, or our own (own_peers) */
    bool own_peers;
    bool nopid_said;                     /* the pid-namespace WARNING is written once */
};

int ipc_server_set_peers(struct ipc_server *s, const uid_t *uids, size_t n, bool pid_check)
{
    if (n > IPC_MAX_ALLOWED_UIDS)
        return -E2BIG;
    memcpy(s->allowed, uids, n * sizeof(*uids));
    s->nallowed = n;
    s->pid_check = pid_check;
    return 0;
}

int ipc_parse_uids(const char *list, uid_t *ret, size_t cap, size_t *ret_n, char *err, size_t errcap)
{
    const char *p = list ? list : "";
    *ret_n = 0;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char item[24];
        uint32_t u;
        if (n > 0) {
            if (n >= sizeof(item) || str_copy(item, sizeof(item), p, n) != 0 ||
                str_to_u32(item, &u) != 0 || u == (uint32_t)-1) {
                snprintf(err, errcap, "--ipc_allowed_uids: '%.*s' is not a uid", (int)(n < 64 ? n : 64), p);
                return -EINVAL;
            }
            if (*ret_n >= cap) {
                snprintf(err, errcap, "--ipc_allowed_uids: more than %zu uids", cap);
                return -E2BIG;
            }
            ret[(*ret_n)++] = (uid_t)u;
        }
        p += n;
        if (*p == ',')
            p++;
    }
    return 0;
}

static bool uid_allowed(const struct ipc_server *s, uid_t uid)
{
    if (uid == 0 || uid == geteuid())
        return true;
    for (size_t i = 0; i < s->nallowed; i++)
        if (s->allowed[i] == uid)
            return true;
    return false;
}

static int open_kineto(struct ipc_server *s)
{
    struct sockaddr_un addr;
    socklen_t alen;
    int one = 1;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    /* before bind: every datagram that can reach the name carries its sender's credentials */
    if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    if (s->kineto_dir[0]) {
        char path[128];
        int n = snprintf(path, sizeof(path), "%s/dynolog", s->kineto_dir);
        if (n < 0 || n > 107 || ipc_addr_path(&addr, &alen, path) != 0) {
            LOG_ERROR("Kineto socket path %s/dynolog is too long", s->kineto_dir);
            close(fd);
            return -ENAMETOOLONG;
        }
        unlink(path);
        if (bind(fd, (struct sockaddr *)&addr, alen) != 0 || chmod(path, 0666) != 0) {
            int e = errno;
            LOG_ERROR("Kineto endpoint %s: bind failed: %s (%s)", path, errno_name(e), strerror(e));
            close(fd);
            return -e;
        }
        struct stat st;
        if (stat(path, &st) == 0) {
            snprintf(s->kineto_file.path, sizeof(s->kineto_file.path), "%s", path);
            s->kineto_file.dev = st.st_dev;
            s->kineto_file.ino = st.st_ino;
            s->kineto_file.fd = -1;
        }
    } else {
        ipc_addr_abstract(&addr, &alen, "dynolog", true);   /* addrlen 11, trailing NUL */
        if (bind(fd, (struct sockaddr *)&addr, alen) != 0) {
            int e = errno;
            LOG_ERROR("Kineto endpoint @dynolog@: bind failed: %s (%s)", errno_name(e), strerror(e));
            close(fd);
            return -e;
        }
    }
    return fd;
}

/* <dir>/dynolog.netns -> "net:[<inode>]", our network namespace: a plugin in another one (a pod)
 * sees that its abstract reply address cannot reach us and binds its socket in the directory
 * instead (docs/design/ipc.md#network-namespaces). Replaced atomically; an entry of another uid
 * is left alone. Returns 0 when the link is ours. */
static int publish_netns(struct ipc_server *s)
{
    char ns[64], path[160], tmp[176];
    struct stat st;
    ssize_t n = readlink("/proc/self/ns/net", ns, sizeof(ns) - 1);

    if (n <= 0 || snprintf(path, sizeof(path), "%s/" NAMES_NETNS_LINK, s->cfg.sock_dir) >= (int)sizeof(path) ||
        snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid()) >= (int)sizeof(tmp))
        return -ENAMETOOLONG;
    ns[n] = '\0';
    if (lstat(path, &st) == 0 && (!S_ISLNK(st.st_mode) || st.st_uid != geteuid())) {
        LOG_ERROR("%s exists and is not our symbolic link: left alone; plugins in other network namespaces "
                  "will not receive replies (docs/design/ipc.md#network-namespaces)", path);
        return -EEXIST;
    }
    (void)unlink(tmp);
    if (symlink(ns, tmp) != 0 || rename(tmp, path) != 0) {
        int e = errno;
        (void)unlink(tmp);
        LOG_ERROR("cannot publish %s: %s", path, errno_name(e));
        return -e;
    }
    snprintf(s->netns_link, sizeof(s->netns_link), "%s", path);
    snprintf(s->netns_text, sizeof(s->netns_text), "%s", ns);
    return 0;
}

/* At exit: unlink the link if it still says what we wrote (a newer daemon may have replaced it). */
static void unpublish_netns(struct ipc_server *s)
{
    char cur[64];
    ssize_t n;
    if (!s->netns_link[0])
        return;
    n = readlink(s->netns_link, cur, sizeof(cur) - 1);
    if (n > 0) {
        cur[n] = '\0';
        if (strcmp(cur, s->netns_text) == 0)
            (void)unlink(s->netns_link);
    }
}

int ipc_server_create(const struct ipc_server_cfg *cfg, bool *ret_live_conflict, struct ipc_server **ret)
{
    struct ipc_server *s = calloc(1, sizeof(*s));
    *ret_live_conflict = false;
    if (!s)
        return -ENOMEM;
    s->cfg = *cfg;
    s->peers = cfg->peers;
    if (!s->peers) {
        if (peer_cache_create("/proc", 0, &s->peers) != 0) {
            free(s);
            return -ENOMEM;
        }
        s->own_peers = true;
    }
    s->ctl.fd = s->data.fd = s->kineto_fd = -1;
    s->dir_fd = cfg->sock_dir ? open(cfg->sock_dir, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
    s->pid_check = true;
    s->kineto_file.fd = -1;
    if (cfg->kineto_dir && *cfg->kineto_dir)
        snprintf(s->kineto_dir, sizeof(s->kineto_dir), "%s", cfg->kineto_dir);
    /* dynolog.sock last: clients (and the e2e tests) take its existence as "the daemon is
     * up", so the Kineto and data endpoints must already be bound when it appears */
    s->kineto_fd = open_kineto(s);
    sock_file_create(&s->data, cfg->sock_dir, NAMES_SOCK_FILE(NAMES_SOCK_DATA), SOCK_DGRAM, cfg->mode);
    int rc = sock_file_create(&s->ctl, cfg->sock_dir, NAMES_SOCK_FILE(NAMES_SOCK_CTL), SOCK_DGRAM, cfg->mode);
    if (rc == -EADDRINUSE)
        *ret_live_conflict = true;
    else if (s->ctl.fd >= 0)
        (void)publish_netns(s);
    *ret = s;
    return 0;
}

/* The file name of a path-bound plugin client ("dynoconfigclient<uuid>.sock"), NULL for any
 * other address. */
static const char *client_base(const struct sockaddr_un *peer, socklen_t len)
{
    size_t n = len > sizeof(sa_family_t) ? strnlen(peer->sun_path, (size_t)len - sizeof(sa_family_t)) : 0;
    const char *slash = n ? memrchr(peer->sun_path, '/', n) : NULL;
    const char *base = slash ? slash + 1 : NULL;
    size_t bn = base ? (size_t)(peer->sun_path + n - base) : 0;
    static const char suffix[] = NAMES_SOCK_SUFFIX;

    if (!base || bn <= sizeof(suffix) - 1 || memcmp(base + bn - (sizeof(suffix) - 1), suffix, sizeof(suffix) - 1) != 0 ||
        !ipc_client_name_valid(base, bn - (sizeof(suffix) - 1)))
        return NULL;
    return base;
}

static void send_reply(struct ipc_server *s, int fd, const char *type, const void *payload,
                       size_t len, const struct sockaddr_un *peer, socklen_t peer_len)
{
    uint8_t buf[IPC_HDR_SIZE + 16];
    struct ipc_metadata md;
    char name[160];
    if (peer_len <= sizeof(sa_family_t)) {
        /* an unbound client polling in a loop would otherwise write one line per datagram */
        LOG_RL(&s->rl_unnamed, 1000, LOG_LVL_WARNING, "unnamed sender: %s reply skipped", type);
        return;
    }
    /* a path-bound plugin names its socket as its mount namespace sees the socket directory: the
     * reply goes to that name in our directory, and only to a socket of the sender's uid there */
    struct sockaddr_un routed;
    const char *base = peer->sun_path[0] && !(s->kineto_dir[0] && fd == s->kineto_fd) ? client_base(peer, peer_len) : NULL;
    if (base) {
        struct stat st;
        char path[IPC_SOCK_PATH_MAX + 2];
        /* a directory too deep for a socket address is reached through its descriptor */
        int pn = snprintf(path, sizeof(path), "%s/%s", s->cfg.sock_dir, base);
        if (pn < 0 || (size_t)pn > IPC_SOCK_PATH_MAX)
            pn = snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", s->dir_fd, base);
        if (s->dir_fd < 0 || pn < 0 || (size_t)pn >= sizeof(path) || ipc_addr_path(&routed, &peer_len, path) != 0 ||
            fstatat(s->dir_fd, base, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISSOCK(st.st_mode) ||
            st.st_uid != s->cur_uid) {
            LOG_RL(&s->rl_route, 1000, LOG_LVL_WARNING,
                   "ipc: %s reply skipped: the client socket %s is not a socket of uid %u in %s "
                   "(docs/design/ipc.md#network-namespaces)", type, base, (unsigned)s->cur_uid, s->cfg.sock_dir);
            return;
        }
        peer = &routed;
    }
    memset(&md, 0, sizeof(md));
    md.size = len;
    memcpy(md.type, type, strlen(type));
    memcpy(buf, &md, sizeof(md));
    struct iovec iov[2] = { { buf, IPC_HDR_SIZE }, { (void *)payload, len } };
    struct msghdr mh = { .msg_name = (void *)peer, .msg_namelen = peer_len, .msg_iov = iov,
                         .msg_iovlen = len ? 2 : 1 };
    /* at most 3 attempts (now, +1 ms, +2 ms), only on EAGAIN: a dead client costs the daemon
     * loop (RPC included) at most 3 ms per reply, never a stall */
    for (int attempt = 0; attempt < 3; attempt++) {
        if (sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0)
            return;
        if (errno == EINTR) {
            attempt--;
            continue;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            break;
        if (attempt < 2) {
            struct timespec ts = { 0, (attempt + 1) * 1000000L };
            nanosleep(&ts, NULL);
        }
    }
    int e = errno;
    ipc_addr_str(peer, peer_len, name, sizeof(name));
    LOG_RL(&s->rl_send, 1000, LOG_LVL_ERROR, "Failed to send %s reply to %s: %s (%s)", type, name,
           errno_name(e), strerror(e));
}

static bool peer_ok(const struct ipc_server *s, bool kineto, bool data,
                    const struct sockaddr_un *peer, socklen_t len)
{
    if (data)
        return true;
    if (len <= sizeof(sa_family_t))
        return true;              /* unnamed */
    if (peer->sun_path[0] == '\0')
        return !kineto || !s->kineto_dir[0];   /* abstract names (not in dir mode) */
    if (kineto && s->kineto_dir[0]) {
        size_t dl = strlen(s->kineto_dir);
        return strncmp(peer->sun_path, s->kineto_dir, dl) == 0 && peer->sun_path[dl] == '/';
    }
    /* a plugin in another network namespace: <its view of the socket directory>/<client>.sock */
    return !kineto && client_base(peer, len) != NULL;
}

/* Who a control message is from and speaks for: the kernel's identity of the sender (have_who),
 * and the node's pid of the process it names (node; the payload's pid when unchecked). */
struct who {
    bool have;
    struct peer_id id;
    int32_t node;
};

/* The node's numbers of a new process's leaf and ancestors (the registry asks once). */
static size_t lineage(void *arg, int32_t node, int32_t *ret, size_t cap)
{
    return peer_lineage(arg, node, ret, cap);
}

static void handle_ctxt(struct ipc_server *s, int fd, const struct ipc_view *v,
                        const struct sockaddr_un *peer, socklen_t plen, const struct who *who)
{
    struct ipc_ctxt c;
    if (ipc_parse_ctxt(v, &c) != 0) {
        LOG_RL(&s->rl_size, 1000, LOG_LVL_ERROR, "ctxt receive message size is invalid: %zu", v->len);
        return;
    }
    int count = registry_ctxt(s->cfg.reg, c.job_id, c.npu, who->have ? who->node : c.pid);
    if (count < 0)
        return;
    int32_t n = count;
    send_reply(s, fd, IPC_TYPE_CTXT, &n, sizeof(n), peer, plen);
}

static void handle_req(struct ipc_server *s, int fd, bool kineto, const struct ipc_view *v,
                       const struct sockaddr_un *peer, socklen_t plen, const struct who *who)
{
    struct ipc_req hdr;
    int32_t pids[IPC_REQ_MAX_PIDS];
    int n = 0;
    if (v->len >= sizeof(hdr)) {
        memcpy(&hdr, v->payload, sizeof(hdr));
        if (hdr.n <= 0) {
            LOG_RL(&s->rl_size, 1000, LOG_LVL_ERROR, "Missing pids parameter for type %d", hdr.type);
            return;
        }
    }
    if (ipc_parse_req(v, &hdr, pids, &n) != 0) {
        LOG_RL(&s->rl_size, 1000, LOG_LVL_ERROR, "req receive message size is invalid: %zu", v->len);
        return;
    }
    char *cfg = NULL;
    size_t cfg_len = 0;
    /* a sender in our pid namespace numbers its pids as we do; one in a container gets the
     * node's numbers of its lineage when it registers */
    struct reg_who rw = { who->node, who->id.pidns, who->id.depth > 0 ? lineage : NULL, s->peers };
    int rc = registry_poll_who(s->cfg.reg, s->cur_uid, who->have ? &rw : NULL, hdr.job_id, pids, n, hdr.type,
                               kineto ? REG_ORIGIN_KINETO : REG_ORIGIN_MSMON, clock_mono_ns(), &cfg,
                               &cfg_len);
    if (rc && rc != -ENOSPC && rc != -EDQUOT && rc != -ESRCH)
        return;
    send_reply(s, fd, IPC_TYPE_REQ, cfg ? cfg : "", cfg_len, peer, plen);
    free(cfg);
}

/* The pid a control message speaks for (ctxt's pid, req's leaf, a status's pid). false when
 * the type names none or the payload is too short to say (the handler then refuses it with its
 * own message); pid 0 or a negative pid is a claim like any other, and fails the check. */
static bool claimed_pid(const struct ipc_view *v, int32_t *ret)
{
    size_t off;
    switch (v->type) {
    case IPC_T_CTXT: off = offsetof(struct ipc_ctxt, pid); break;
    case IPC_T_REQ: off = offsetof(struct ipc_req, pids); break;
    case IPC_T_TRACE_STATUS:
    case IPC_T_MONITOR_STATUS: off = offsetof(struct ipc_status, pid); break;
    default: return false;
    }
    if (v->len < off + sizeof(*ret))
        return false;
    memcpy(ret, v->payload + off, sizeof(*ret));
    return true;
}

static void handle_status(struct ipc_server *s, const struct ipc_view *v, enum status_dim dim,
                          const struct who *who)
{
    struct ipc_status st;
    if (ipc_parse_status(v, &st) != 0) {
        LOG_RL(&s->rl_size, 1000, LOG_LVL_ERROR, "%s receive message size is invalid: %zu",
               v->type_str, v->len);
        return;
    }
    int32_t ns_pid = st.pid;
    if (who->have)
        st.pid = who->node; /* the node's number: what gone checks, status and --pids use */
    status_update_ns(s->cfg.st, dim, &st, ns_pid, clock_mono_ns());
    registry_mark_msmon(s->cfg.reg, st.pid);
}

void ipc_server_dispatch(struct ipc_server *s, int fd, bool kineto, bool data,
                         const uint8_t *buf, size_t got, size_t real_len,
                         const struct sockaddr_un *peer, socklen_t peer_len)
{
    /* trusted callers (tests, the fuzzer): the datagram is our own */
    ipc_server_dispatch_cred(s, fd, kineto, data, buf, got, real_len, peer, peer_len, NULL);
}

static int endpoint_idx(bool kineto, bool data)
{
    return kineto ? 2 : data ? 1 : 0;
}

static const char *endpoint_name(bool kineto, bool data)
{
    return kineto ? "Kineto endpoint" : data ? NAMES_SOCK_FILE(NAMES_SOCK_DATA) : NAMES_SOCK_FILE(NAMES_SOCK_CTL);
}

void ipc_server_dispatch_cred(struct ipc_server *s, int fd, bool kineto, bool data,
                              const uint8_t *buf, size_t got, size_t real_len,
                              const struct sockaddr_un *peer, socklen_t peer_len,
                              const struct ucred *cred)
{
    struct ipc_view v;
    char tesc[LOGESC_CAP(IPC_TYPE_LEN)];   /* the type tag is outside text */
    struct who who = { .have = false };
    s->cur_uid = cred ? cred->uid : geteuid();
    if (cred && !uid_allowed(s, cred->uid)) {
        s->dropped_uid++;
        if (s->cfg.st)
            status_count_drop(s->cfg.st, STATUS_DROP_UID, cred->uid);
        LOG_RL(&s->rl_uid[endpoint_idx(kineto, data)], 1000, LOG_LVL_WARNING,
               "ipc: dropped datagram on %s from uid %u (pid %d): uid not allowed (%llu so far)",
               endpoint_name(kineto, data), (unsigned)cred->uid, (int)cred->pid,
               (unsigned long long)s->dropped_uid);
        return;
    }
    enum ipc_drop d = ipc_msg_parse(buf, got, real_len, IPC_MAX_DATAGRAM, &v);
    if (d != IPC_OK) {
        LOG_RL(&s->rl_drop[d], 1000, LOG_LVL_ERROR, "dropped datagram of %zu bytes: %s", real_len,
               ipc_drop_reason_str(d));
        return;
    }
    if (!peer_ok(s, kineto, data, peer, peer_len)) {
        char name[160];
        ipc_addr_str(peer, peer_len, name, sizeof(name));
        LOG_RL(&s->rl_peer, 1000, LOG_LVL_WARNING, "unexpected peer address %s", name);
        return;
    }
    if (cred && s->pid_check) {
        if (cred->pid <= 0) {
            /* the kernel could not name the sender in our pid namespace: we run in one of our
             * own (a container without the host's), and no pid any process sends means anything
             * here */
            s->dropped_nopid++;
            if (s->cfg.st)
                status_count_drop(s->cfg.st, STATUS_DROP_NO_PID, cred->uid);
            if (!s->nopid_said) {
                s->nopid_said = true;
                LOG_WARN("ipc: the kernel reports pid 0 for the sender of a datagram on %s: this daemon runs in "
                            "a pid namespace of its own and cannot see the processes it monitors, so their "
                            "datagrams are dropped - fix: run dynolog in the host's pid namespace (Kubernetes: "
                            "hostPID: true; docker: --pid=host) (docs/deploy.md#the-daemon-must-see-the-jobs-pids)",
                            endpoint_name(kineto, data));
            }
            return;
        }
        if (peer_lookup(s->peers, cred->pid, &who.id) != 0)
            who.id = (struct peer_id){ .pid = cred->pid, .ns_pid = cred->pid }; /* unreadable: as before */
        who.have = true;
        who.node = who.id.pid;
    }
    if (data) {
        if (v.type != IPC_T_DATA) {
            LOG_RL(&s->rl_type, 1000, LOG_LVL_ERROR, "TYPE UNKOWN: %s",
                   logesc(v.type_str, strlen(v.type_str), tesc, sizeof(tesc)));
            return;
        }
        if (v.len < 1) {
            LOG_RL(&s->rl_size, 1000, LOG_LVL_ERROR, "data receive message size is invalid: %zu", v.len);
            return;
        }
        if (s->cfg.data) {
            struct data_sender ds = { who.id.pid, who.id.ns_pid };
            data_handle_sender(s->cfg.data, (const char *)v.payload, v.len, clock_real_ns(), who.have ? &ds : NULL);
        }
        return;
    }
    int32_t claimed = 0;
    if (who.have && claimed_pid(&v, &claimed) && !peer_speaks_for(s->peers, &who.id, claimed, &who.node)) {
        s->dropped_pid++;
        if (s->cfg.st)
            status_count_drop(s->cfg.st, STATUS_DROP_SPEAKS_FOR, cred->uid);
        LOG_RL(&s->rl_pid[endpoint_idx(kineto, data)], 1000, LOG_LVL_WARNING,
               "ipc: dropped %s on %s from pid %d (uid %u): it speaks for pid %d, which is neither "
               "the sender nor its descendant (%llu so far)",
               v.type_str, endpoint_name(kineto, data), (int)cred->pid, (unsigned)cred->uid,
               (int)claimed, (unsigned long long)s->dropped_pid);
        return;
    }
    switch (v.type) {
    case IPC_T_CTXT: handle_ctxt(s, fd, &v, peer, peer_len, &who); break;
    case IPC_T_REQ: handle_req(s, fd, kineto, &v, peer, peer_len, &who); break;
    case IPC_T_TRACE_STATUS: handle_status(s, &v, STATUS_TRACE, &who); break;
    case IPC_T_MONITOR_STATUS: handle_status(s, &v, STATUS_MONITOR, &who); break;
    default:
        LOG_RL(&s->rl_type, 1000, LOG_LVL_ERROR, "TYPE UNKOWN: %s",
                   logesc(v.type_str, strlen(v.type_str), tesc, sizeof(tesc)));
        break;
    }
}

/* Datagrams handled per readiness callback: one flooded socket (data from many ranks) then
 * yields to the other endpoints and to RPC instead of draining forever; the event is
 * level-triggered, so the rest is read on the next loop iteration. */
#define DRAIN_BUDGET 256

/* Drain one socket until EAGAIN or the budget is spent. */
static void drain(struct ipc_server *s, int fd, bool kineto, bool data)
{
    /* one loop thread: one buffer; aligned so that payload structs could be read in place */
    static uint8_t buf[IPC_MAX_DATAGRAM] __attribute__((aligned(8)));
    for (int i = 0; i < DRAIN_BUDGET; i++) {
        struct sockaddr_un peer;
        struct iovec iov = { buf, sizeof(buf) };
        union {
            struct cmsghdr align;
            char buf[CMSG_SPACE(sizeof(struct ucred))];
        } ctl;
        struct msghdr mh = { .msg_name = &peer, .msg_namelen = sizeof(peer), .msg_iov = &iov,
                             .msg_iovlen = 1, .msg_control = ctl.buf,
                             .msg_controllen = sizeof(ctl.buf) };
        memset(&peer, 0, sizeof(peer));
        ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_TRUNC | MSG_CMSG_CLOEXEC);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        /* SO_PASSCRED makes the kernel attach the sender's real pid/uid/gid to every datagram,
         * whether or not the sender sent them: that, not the payload, says who is talking */
        const struct ucred *cred = NULL;
        struct ucred uc;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
            if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_CREDENTIALS &&
                cm->cmsg_len >= CMSG_LEN(sizeof(uc))) {
                memcpy(&uc, CMSG_DATA(cm), sizeof(uc));
                cred = &uc;
            } else if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
                /* nobody passes us descriptors: close them rather than leak */
                size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t j = 0; j < k; j++) {
                    int xfd;
                    memcpy(&xfd, CMSG_DATA(cm) + j * sizeof(int), sizeof(int));
                    close(xfd);
                }
            }
        }
        if (!cred) {
            LOG_RL(&s->rl_nocred, 1000, LOG_LVL_WARNING,
                   "ipc: dropped datagram on %s without sender credentials", endpoint_name(kineto, data));
            continue;
        }
        size_t got = (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf);
        ipc_server_dispatch_cred(s, fd, kineto, data, buf, got, (size_t)n, &peer, mh.msg_namelen,
                                 cred);
    }
}

static void on_ctl(struct loop_event *ev, int fd, unsigned events, void *arg)
{
    (void)ev;
    (void)events;
    drain(arg, fd, false, false);
}

static void on_kineto(struct loop_event *ev, int fd, unsigned events, void *arg)
{
    (void)ev;
    (void)events;
    drain(arg, fd, true, false);
}

static void on_data(struct loop_event *ev, int fd, unsigned events, void *arg)
{
    (void)ev;
    (void)events;
    drain(arg, fd, false, true);
}

int ipc_server_start(struct ipc_server *s, struct loop *l)
{
    int rc = 0;   /* SO_PASSCRED is already on: set before bind (open_kineto, sock_file) */
    if (s->ctl.fd >= 0 && (rc = loop_fd_add(l, s->ctl.fd, LOOP_READ, on_ctl, s, &s->ev_ctl)) != 0)
        goto fail;
    if (s->kineto_fd >= 0 &&
        (rc = loop_fd_add(l, s->kineto_fd, LOOP_READ, on_kineto, s, &s->ev_kineto)) != 0)
        goto fail;
    if (s->data.fd >= 0 && (rc = loop_fd_add(l, s->data.fd, LOOP_READ, on_data, s, &s->ev_data)) != 0)
        goto fail;
    return 0;
fail:
    ipc_server_stop(s);
    return rc;
}

void ipc_server_stop(struct ipc_server *s)
{
    if (!s)
        return;
    loop_event_free(s->ev_ctl);
    loop_event_free(s->ev_kineto);
    loop_event_free(s->ev_data);
    s->ev_ctl = s->ev_kineto = s->ev_data = NULL;
}

int ipc_server_sweep(struct ipc_server *s)
{
    DIR *d = s && s->cfg.sock_dir ? opendir(s->cfg.sock_dir) : NULL;
    struct dirent *de;
    int n = 0;
    static const char suffix[] = NAMES_SOCK_SUFFIX;

    if (!d)
        return 0;
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        struct sockaddr_un addr;
        socklen_t alen;
        struct stat st;
        char path[IPC_SOCK_PATH_MAX + 2];
        if (s->dir_fd < 0 || len <= sizeof(suffix) - 1 || strcmp(de->d_name + len - (sizeof(suffix) - 1), suffix) != 0 ||
            !ipc_client_name_valid(de->d_name, len - (sizeof(suffix) - 1)) ||
            snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", s->dir_fd, de->d_name) >= (int)sizeof(path) ||
            fstatat(s->dir_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISSOCK(st.st_mode) ||
            ipc_addr_path(&addr, &alen, path) != 0)
            continue;
        /* nobody bound: the process that made it was killed before it could unlink it */
        int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            break;
        if (connect(fd, (struct sockaddr *)&addr, alen) != 0 && errno == ECONNREFUSED &&
            unlinkat(s->dir_fd, de->d_name, 0) == 0)
            n++;
        close(fd);
    }
    closedir(d);
    if (n)
        LOG_INFO("ipc: removed %d client socket(s) of exited processes from %s", n, s->cfg.sock_dir);
    return n;
}

void ipc_server_destroy(struct ipc_server *s)
{
    if (!s)
        return;
    ipc_server_stop(s);
    sock_file_close(&s->ctl);
    sock_file_close(&s->data);
    if (s->kineto_fd >= 0)
        close(s->kineto_fd);
    unpublish_netns(s);
    if (s->dir_fd >= 0)
        close(s->dir_fd);
    sock_file_close(&s->kineto_file);
    if (s->own_peers)
        peer_cache_destroy(s->peers);
    free(s);
}
