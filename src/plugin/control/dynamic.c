/* dynamic: dyno mode (docs/design/ipc.md#shared-memory-handoff), the one implementation of the segment handoff of
 * docs/design/ipc.md#segment, #ranks for C programs and msmonitor.dynamic_profile alike: creator election and
 * killed-job takeover, the creator's poller (a control_poller), and the per-step work. */
#include "plugin/control/dynamic.h"

#include <dlfcn.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/jw.h"
#include "common/log.h"
#include "common/logesc.h"
#include "common/strutil.h"
#include "contract/names.h"
#include "contract/cfgkeys.h"
#include "contract/cjx.h"
#include "contract/kvtext.h"
#include "contract/rank.h"
#include "ipc/ipc_msg.h"
#include "msmon/ipc_wire.h"
#include "plugin/control/ack.h"
#include "plugin/control/control.h"
#include "plugin/control/health.h"
#include "plugin/control/monitor.h"
#include "plugin/control/tracewin.h"
#include "plugin/penv.h"

#define DYN_PY_WS KVTEXT_WS
#define DYN_STATUS_PERIOD_NS 1000000000ull
#define DYN_TAKEOVER_GRACE_US 100000

_Static_assert(DYN_SHM_SIZE == 1048576, "segment size of docs/design/ipc.md#segment");

/* Python callers want the lifecycle lines on stderr too, as the Python module printed them
 * (DYN_INIT_ECHO); set before the first line of a join, read-only afterwards. */
static bool dyn_echo;

static void dyn_note(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void dyn_note(enum log_level lvl, const char *fmt, ...)
{
    static const char *const names[] = { "DEBUG", "INFO", "WARNING", "ERROR", "FATAL" };
    char msg[PATH_MAX + 512], esc[LOGESC_CAP(sizeof(msg))];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    log_write(lvl, __FILE__, __LINE__, "dynamic_profile: %s", msg);
    if (dyn_echo && lvl < LOG_LVL_ERROR) /* ERROR lines reach stderr already */
        fprintf(stderr, "[%s] [msmonitor.dynamic_profile %d] %s\n", names[lvl], (int)getpid(),
                logesc(msg, strlen(msg), esc, sizeof(esc))); /* paths and values from outside */
}

/* ---- pure helpers ---- */

/* FNV-1a 64 over each part and a separator, so ("ab","c") and ("a","bc") differ. */
static uint64_t dyn_fnv(uint64_t h, const char *part)
{
    for (const unsigned char *p = (const unsigned char *)(part ? part : ""); *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    return (h ^ 0x1f) * 0x100000001b3ull;
}

int dyn_job_key(const char *job, const char *master_addr, const char *master_port, const char *run_id, pid_t ppid,
                char *buf, size_t cap)
{
    uint64_t h = 0xcbf29ce484222325ull;
    char pid[24];

    if (job && job[0]) {
        h = dyn_fnv(dyn_fnv(h, "job"), job);
    } else if (master_port && master_port[0]) {
        /* One launcher rendezvous per job: two live jobs cannot share MASTER_ADDR:MASTER_PORT. */
        h = dyn_fnv(dyn_fnv(dyn_fnv(dyn_fnv(h, "master"), master_addr), master_port), run_id);
    } else {
        /* No launcher variables: the ranks of one job are the children of one launcher. */
        snprintf(pid, sizeof(pid), "%d", (int)ppid);
        h = dyn_fnv(dyn_fnv(h, "ppid"), pid);
    }
    return snprintf(buf, cap, "%016llx", (unsigned long long)h) < (int)cap ? 0 : -ENOSPC;
}

int dyn_shm_name(const char *key, char *buf, size_t cap)
{
    return snprintf(buf, cap, "%s-%s", DYN_SHM_PREFIX, key) < (int)cap ? 0 : -ENOSPC;
}

/* Why directory `dir` may not hold this uid's segments, NULL if it may. own: only this uid
 * may create or replace entries (owner = euid, no group/other write). Otherwise it is a
 * parent in which we create our own private subdirectory: owned by us or root, and either
 * not writable by others or sticky (/dev/shm), so nobody can rename our entry away. */
static const char *dyn_dir_problem(const char *dir, bool own, char *why, size_t cap)
{
    struct stat st;

    if (lstat(dir, &st) != 0) {
        snprintf(why, cap, "%s", strerror(errno));
        return why;
    }
    if (!S_ISDIR(st.st_mode))
        snprintf(why, cap, "not a directory");
    else if (own && st.st_uid != geteuid())
        snprintf(why, cap, "owned by uid %u, not by uid %u", (unsigned)st.st_uid, (unsigned)geteuid());
    else if (own && (st.st_mode & 022))
        snprintf(why, cap, "mode %04o lets others write in it", (unsigned)(st.st_mode & 07777));
    else if (!own && st.st_uid != geteuid() && st.st_uid != 0)
        snprintf(why, cap, "owned by uid %u, neither uid %u nor root", (unsigned)st.st_uid, (unsigned)geteuid());
    else if (!own && (st.st_mode & 022) && !(st.st_mode & S_ISVTX))
        snprintf(why, cap, "mode %04o lets others replace entries in it", (unsigned)(st.st_mode & 07777));
    else
        return NULL;
    return why;
}

/* `parent`/`name` as this uid's private directory (created 0700). 0, or -errno with a
 * one-line reason and the fix in err. */
static int dyn_private_subdir(const char *parent, const char *name, char *buf, size_t cap, char *err, size_t errcap)
{
    char why[128];

    if (dyn_dir_problem(parent, false, why, sizeof(why))) {
        snprintf(err, errcap, "%s: %s", parent, why);
        return -EPERM;
    }
    if (snprintf(buf, cap, "%s%s%s", parent, parent[strlen(parent) - 1] == '/' ? "" : "/", name) >= (int)cap) {
        snprintf(err, errcap, "%s: path too long", parent);
        return -ENAMETOOLONG;
    }
    if (mkdir(buf, 0700) != 0 && errno != EEXIST) {
        int rc = -errno;
        snprintf(err, errcap, "%s: cannot create: %s", buf, strerror(-rc));
        return rc;
    }
    if (dyn_dir_problem(buf, true, why, sizeof(why))) {
        snprintf(err, errcap, "%s: %s; not using it, another user may have made it to read or forge this "
                 "job's configs (fix: have its owner or root remove it)", buf, why);
        return -EPERM;
    }
    return 0;
}

int dyn_segment_dir(const char *base, const char *xdg, const char *sockdir, char *buf, size_t cap)
{
    char name[32], why[128], err[PATH_MAX + 256];
    int rc;

    if (!base || !base[0])
        base = DYN_SHM_DIR;
    /* A directory of our own (MSMONITOR_SHM_DIR made for the job): used as it is. */
    if (!dyn_dir_problem(base, true, why, sizeof(why)))
        return snprintf(buf, cap, "%s", base) < (int)cap ? 0 : -ENAMETOOLONG;
    snprintf(name, sizeof(name), NAMES_SHM_PRIVATE_PREFIX "%u", (unsigned)geteuid());
    rc = dyn_private_subdir(base, name, buf, cap, err, sizeof(err));
    if (rc == 0)
        return 0;
    dyn_note(LOG_LVL_WARNING, "%s", err);
    if (xdg && xdg[0]) {
        if (dyn_dir_problem(xdg, true, why, sizeof(why)))
            dyn_note(LOG_LVL_WARNING, "XDG_RUNTIME_DIR %s: %s; not using it", xdg, why);
        else if ((rc = dyn_private_subdir(xdg, "msmonitor", buf, cap, err, sizeof(err))) == 0)
            goto fallback;
        else
            dyn_note(LOG_LVL_WARNING, "%s", err);
    }
    if (sockdir && sockdir[0]) {
        rc = dyn_private_subdir(sockdir, "msmonitor-shm", buf, cap, err, sizeof(err));
        if (rc == 0)
            goto fallback;
        dyn_note(LOG_LVL_WARNING, "%s", err);
    }
    return rc;
fallback:
    dyn_note(LOG_LVL_WARNING, "the job's segment lives in %s instead", buf);
    return 0;
}

/* A segment or side file we may attach to: a regular file of this uid or root that nobody
 * else can write. 0, or -EPERM with the reason and the fix in err. */
static int dyn_file_trusted(const char *path, const struct stat *st, char *err, size_t errcap)
{
    if (S_ISREG(st->st_mode) && (st->st_uid == geteuid() || st->st_uid == 0) && !(st->st_mode & 022))
        return 0;
    snprintf(err, errcap, "%s: %s owned by uid %u with mode %04o; only a file of uid %u or root that nobody else "
             "can write is used (fix: remove it if no job of yours uses it)", path,
             S_ISREG(st->st_mode) ? "file" : "not a regular file,", (unsigned)st->st_uid,
             (unsigned)(st->st_mode & 07777), (unsigned)geteuid());
    return -EPERM;
}

/* os.path.dirname(): the head up to the last '/', trailing slashes removed unless it is
 * all slashes; "." when there is none (Python's text uses `... or "."`). */
int dyn_stale_message(const char *path, char *buf, size_t cap)
{
    const char *slash = strrchr(path, '/'), *d = ".";
    int dlen = 1, n;

    if (slash) {
        int k = (int)(slash - path) + 1;
        d = path;
        dlen = k;
        while (k > 0 && path[k - 1] == '/')
            k--;
        if (k > 0)
            dlen = k;
    }
    n = snprintf(buf, cap,
                 "There may exist shared memory before this task. If no job is using it, run "
                 "`rm -f %.*s/%s*` (see `ls -la %.*s/%s*`). Please remove: %s",
                 dlen, d, DYN_SHM_PREFIX, dlen, d, DYN_SHM_PREFIX, path);
    return (n >= 0 && (size_t)n < cap) ? 0 : -ENOSPC;
}

bool dyn_use_daemon(const char *msmon, const char *kineto)
{
    const char *name = "MSMONITOR_USE_DAEMON", *raw = msmon;
    char tmp[64];
    const char *v;
    size_t n;
    int64_t value;

    if (!raw) {
        if (!kineto)
            return false;
        raw = kineto;
        name = "KINETO_USE_DAEMON";
        LOG_WARN("dynamic_profile: KINETO_USE_DAEMON is deprecated, use MSMONITOR_USE_DAEMON");
    }
    v = raw;
    n = strlen(raw);
    str_trim_view(&v, &n, DYN_PY_WS);
    if (str_copy(tmp, sizeof(tmp), v, n) != 0 || str_to_i64(tmp, &value) != 0) {
        LOG_WARN("dynamic_profile: Environment variable %s='%s' value not valid, will be set to 0 !", name, raw);
        return false;
    }
    return value == 1;
}

double dyn_poll_interval(const char *raw)
{
    double v;

    if (!raw)
        return DYN_DEFAULT_POLL_S;
    if (str_to_double(raw, &v) != 0 || !(v >= 0.1 && v <= 50)) {
        LOG_WARN("dynamic_profile: MSMONITOR_POLL_INTERVAL_S='%s' invalid (0.1..50), using 2", raw);
        return DYN_DEFAULT_POLL_S;
    }
    return v;
}

long dyn_stale_seconds(const char *raw)
{
    int32_t v;

    if (!raw)
        return DYN_STALE_S;
    if (kvtext_int(raw, &v) != 0 || v < 0) {
        LOG_WARN("dynamic_profile: MSMONITOR_SHM_STALE_S='%s' invalid (integer >= 0), using %d", raw, DYN_STALE_S);
        return DYN_STALE_S;
    }
    return v;
}

static const struct kvtext *dyn_sort_kv; /* qsort has no context argument in C11 */

static int dyn_cmp_idx(const void *a, const void *b)
{
    return strcmp(dyn_sort_kv->keys[*(const size_t *)a], dyn_sort_kv->keys[*(const size_t *)b]);
}

int dyn_config_json(const struct kvtext *kv, char **ret, size_t *ret_len)
{
    static pthread_mutex_t sort_lock = PTHREAD_MUTEX_INITIALIZER;
    size_t idx[KVTEXT_MAX_KEYS], n = 0;
    bool valid_done = false;
    struct jw w;
    int rc;

    for (size_t i = 0; i < kv->n; i++)
        if (strcmp(kv->keys[i], CFGKEY_IS_VALID) != 0)
            idx[n++] = i;
    pthread_mutex_lock(&sort_lock);
    dyn_sort_kv = kv;
    qsort(idx, n, sizeof(idx[0]), dyn_cmp_idx);
    pthread_mutex_unlock(&sort_lock);
    jw_init_dyn(&w, DYN_SHM_SIZE - 4);
    jw_obj_begin(&w);
    for (size_t i = 0; i < n; i++) {
        const char *k = kv->keys[idx[i]];
        if (!valid_done && strcmp(k, "is_valid") > 0) {
            jw_key(&w, "is_valid");
            jw_bool(&w, true);
            valid_done = true;
        }
        jw_key(&w, k);
        jw_str(&w, kv->values[idx[i]]);
    }
    if (!valid_done) {
        jw_key(&w, "is_valid");
        jw_bool(&w, true);
    }
    jw_obj_end(&w);
    rc = w.err == -ENOSPC ? -E2BIG : w.err;
    if (rc != 0) {
        jw_fini(&w);
        return rc;
    }
    *ret = w.buf; /* caller frees */
    *ret_len = w.len;
    return 0;
}

/* ---- segment I/O ---- */

int dyn_shm_write(uint8_t *shm, const char *json, size_t len, uint32_t now)
{
    if (len > DYN_SHM_SIZE - 4)
        return -E2BIG;
    memcpy(shm + 4, json, len);
    memset(shm + 4 + len, ' ', DYN_SHM_SIZE - 4 - len);
    __atomic_store_n((uint32_t *)(void *)shm, htole32(now), __ATOMIC_RELEASE);
    return 0;
}

uint32_t dyn_shm_time(const uint8_t *shm)
{
    return le32toh(__atomic_load_n((const uint32_t *)(const void *)shm, __ATOMIC_ACQUIRE));
}

int dyn_shm_read(const uint8_t *shm, struct kvtext *kv, bool *ret_is_valid)
{
    size_t len = DYN_SHM_SIZE - 4;
    char *copy;
    int rc;

    kvtext_init(kv);
    *ret_is_valid = false;
    /* The padding is most of the megabyte: skip it a block at a time (a block is one byte
     * repeated iff it equals itself shifted by one), then byte-wise. */
    while (len >= 4096) {
        const uint8_t *b = shm + 4 + len - 4096;
        if ((b[0] != ' ' && b[0] != '\0') || memcmp(b, b + 1, 4095) != 0)
            break;
        len -= 4096;
    }
    while (len > 0 && (shm[4 + len - 1] == ' ' || shm[4 + len - 1] == '\0'))
        len--;
    if (len == 0)
        return -ENODATA;
    /* Parse a private copy: another process may be rewriting the segment meanwhile. */
    copy = malloc(len);
    if (!copy)
        return -ENOMEM;
    memcpy(copy, shm + 4, len);
    rc = cjx_flat_object(copy, len, kv, ret_is_valid);
    free(copy);
    return rc;
}

/* The creator lock: an exclusive OFD lock on byte 0, held by the creator for its whole life
 * (its open file description, so threads and fork()ed helpers share it). The kernel drops it
 * when the creator dies, also by SIGKILL, which is how a rank tells a leftover segment from
 * a live one. Independent of the shared flock every holder keeps for cleanup-shm. */
static int dyn_creator_lock(int fd)
{
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1, .l_pid = 0 };

    return fcntl(fd, F_OFD_SETLK, &fl) == 0 ? 0 : -errno;
}

/* Time 0 (first 4 bytes) and an empty, space-filled text. */
static int dyn_segment_reset(int fd)
{
    uint8_t *p = mmap(NULL, DYN_SHM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

    if (p == MAP_FAILED)
        return -errno;
    memset(p + 4, ' ', DYN_SHM_SIZE - 4);
    __atomic_store_n((uint32_t *)(void *)p, 0, __ATOMIC_RELEASE);
    munmap(p, DYN_SHM_SIZE);
    /* Writes through a mapping update the inode times lazily; the stale rule of the ranks
     * that attach next reads ctime, so bump it now. */
    return futimens(fd, NULL) == 0 ? 0 : -errno;
}

/* Create under a private name, initialise, then link(2) into place: link fails if another
 * rank won, so there is one creator and nobody sees a half-initialised file. 1 created,
 * 0 someone else won, -errno. */
static int dyn_fresh_segment(const char *path, int *ret_fd)
{
    char tmp[PATH_MAX];
    int fd = -1, rc = 0;

    if (snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid()) >= (int)sizeof(tmp))
        return -ENAMETOOLONG;
    fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    if (flock(fd, LOCK_SH) != 0 || ftruncate(fd, DYN_SHM_SIZE) != 0) {
        rc = -errno;
        goto unlink_tmp;
    }
    rc = dyn_creator_lock(fd);
    if (rc == 0)
        rc = dyn_segment_reset(fd);
    if (rc != 0)
        goto unlink_tmp;
    if (link(tmp, path) != 0) {
        rc = errno == EEXIST ? 0 : -errno;
        goto unlink_tmp;
    }
    rc = 1;
unlink_tmp:
    (void)unlink(tmp);
    if (rc == 1)
        *ret_fd = fd;
    else
        close(fd);
    return rc;
}

static double dyn_ts(const struct timespec *t)
{
    return (double)t->tv_sec + (double)t->tv_nsec / 1e9;
}

/* True if `path` still names the file open on `fd` (cleanup-shm unlinks while holding
 * LOCK_EX; a rank that opened the file just before must not keep an orphan). */
static bool dyn_same_file(int fd, const char *path)
{
    struct stat a, b;

    return fstat(fd, &a) == 0 && lstat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* An existing file at `path`, open on fd: attach, take it over, or refuse. 0 attached or
 * taken over (*ret_creator), 1 the file went away meanwhile (try again), -errno. */
static int dyn_attach_existing(const char *path, int fd, long stale_s, bool *ret_creator, char *err, size_t errcap)
{
    char proc[64];
    struct stat st, pst;
    int rc;

    snprintf(proc, sizeof(proc), "/proc/%d", (int)getpid());
    if (fstat(fd, &st) != 0) {
        rc = -errno;
        snprintf(err, errcap, "%s: stat failed: %s", path, strerror(-rc));
        return rc;
    }
    rc = dyn_file_trusted(path, &st, err, errcap);
    if (rc != 0)
        return rc; /* another user's segment would feed this rank its configs */
    if (st.st_size != DYN_SHM_SIZE) {
        snprintf(err, errcap, "%s: size %lld, expected %u", path, (long long)st.st_size, DYN_SHM_SIZE);
        return -EINVAL; /* not one of ours: never resized */
    }
    if (flock(fd, LOCK_SH) != 0) {
        rc = -errno;
        snprintf(err, errcap, "%s: flock failed: %s", path, strerror(-rc));
        return rc;
    }
    if (!dyn_same_file(fd, path))
        return 1;
    if (dyn_creator_lock(fd) == 0) {
        /* Nobody holds the creator lock: the creator is gone (killed job). Take over. */
        rc = dyn_segment_reset(fd);
        if (rc != 0) {
            snprintf(err, errcap, "%s: cannot re-initialise: %s", path, strerror(-rc));
            return rc;
        }
        dyn_note(LOG_LVL_WARNING, "took over %s: its creator was killed without removing it (SIGKILL, a crash or "
                 "the OOM killer; a job that ends normally or by SIGTERM removes it); this rank is the creator now, "
                 "re-initialised the segment and runs the poller", path);
        *ret_creator = true;
        return 0;
    }
    if (stat(proc, &pst) != 0) {
        rc = -errno;
        snprintf(err, errcap, "%s: stat failed: %s", proc, strerror(-rc));
        return rc;
    }
    if (dyn_ts(&pst.st_ctim) - dyn_ts(&st.st_ctim) > (double)stale_s) {
        /* A rank taking the segment over right now holds the lock but may not have
         * refreshed the times yet: look once more before calling it stale. */
        (void)usleep(DYN_TAKEOVER_GRACE_US);
        if (fstat(fd, &st) == 0 && dyn_ts(&pst.st_ctim) - dyn_ts(&st.st_ctim) <= (double)stale_s) {
            *ret_creator = false;
            return 0;
        }
        (void)dyn_stale_message(path, err, errcap);
        return -ESTALE; /* a live creator's old segment: never touched */
    }
    *ret_creator = false;
    return 0;
}

int dyn_attach_or_create(const char *path, long stale_s, int *ret_fd, bool *ret_creator, char *err, size_t errcap)
{
    char scratch[8];
    int rc = -EAGAIN;

    if (!err || errcap == 0) {
        err = scratch;
        errcap = sizeof(scratch);
    }
    err[0] = '\0';
    for (int i = 0; i < DYN_ATTACH_TRIES; i++) {
        int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0) {
            rc = dyn_attach_existing(path, fd, stale_s, ret_creator, err, errcap);
            if (rc == 0) {
                *ret_fd = fd;
                return 0;
            }
            close(fd);
            if (rc < 0)
                return rc;
            continue; /* unlinked under us: look again */
        }
        if (errno != ENOENT) {
            rc = -errno;
            break;
        }
        rc = dyn_fresh_segment(path, ret_fd);
        if (rc == 1) {
            *ret_creator = true;
            return 0;
        }
        if (rc < 0)
            break;
        rc = -EAGAIN;
        (void)usleep((useconds_t)(rand() % 20000)); /* lost the race: attach next round */
    }
    snprintf(err, errcap, "could not attach to or create %s: %s", path, strerror(-rc));
    return rc;
}


/* ---- the process's dyno-mode state ---- */

static struct {
    pthread_mutex_t lock;
    bool enabled, creator, atexit_done;
    pid_t pid; /* the process that joined: a fork()ed child inherits nothing of it */
    bool forked;  /* set in a fork()ed child (atfork): its steps are no-ops, without a getpid() each */
    bool atfork_done;
    char path[PATH_MAX];
    int fd;
    uint8_t *shm;
    int32_t rank, step;
    uint32_t last_ts;
    uint64_t range_id, last_status_ns;
    bool status_due;
    uint32_t *steps;              /* <segment>.steps: every rank's current step (alignment) */
    uint32_t steps_retry;         /* steps until a rank tries to map it again */
    /* mstx: the simulator's API, else CANN's; both optional */
    uint64_t (*sim_start)(const char *, int32_t);
    uint64_t (*cann_start)(const char *, void *);
    void (*range_end)(uint64_t);
    struct control_poller *poller; /* the creator's */
    void (*stop_hook)(void *);
    void *stop_hook_ctx;
} dyn = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };

/* Runs in the child of a fork(), single-threaded: whatever the parent joined is not the child's. */
static void dyn_atfork_child(void)
{
    dyn.forked = true;
}

/* RANK, else RANK_ID; unknown counts as rank 0 here (init_dyno id, rank-list match). */
static int32_t dyn_env_rank(void)
{
    int32_t r = rank_resolve(penv_get(PENV_RANK), penv_get(PENV_RANK_ID));

    return r == RANK_UNKNOWN ? 0 : r;
}

/* The simulator when the msPTI library in use is the simulator (already loaded by the
 * backend: RTLD_NOLOAD), else CANN's libms_tools_ext.so, else no markers. */
static void dyn_mstx_resolve(void)
{
    const char *names[2] = { penv_get(PENV_MSPTI_LIB), "libmspti.so" };
    void *h;

    for (int i = 0; i < 2; i++) {
        if (!names[i] || !names[i][0])
            continue;
        h = dlopen(names[i], RTLD_LAZY | RTLD_NOLOAD);
        if (!h)
            continue;
        if (dlsym(h, "mssim_is_simulator") && dlsym(h, "mssim_mstx_range_start") && dlsym(h, "mssim_mstx_range_end")) {
            *(void **)&dyn.sim_start = dlsym(h, "mssim_mstx_range_start");
            *(void **)&dyn.range_end = dlsym(h, "mssim_mstx_range_end");
            return; /* handle kept for the process */
        }
        dlclose(h);
    }
    h = dlopen("libms_tools_ext.so", RTLD_LAZY | RTLD_LOCAL);
    if (!h)
        return;
    *(void **)&dyn.cann_start = dlsym(h, "mstxRangeStartA");
    *(void **)&dyn.range_end = dlsym(h, "mstxRangeEnd");
    if (!dyn.cann_start || !dyn.range_end) {
        dyn.cann_start = NULL;
        dyn.range_end = NULL;
        dlclose(h);
    }
}

static uint64_t dyn_mstx_start(int32_t step)
{
    char msg[32];

    if (names_step_format(msg, sizeof(msg), step) != 0)
        return 0;
    if (dyn.sim_start)
        return dyn.sim_start(msg, 0);
    if (dyn.cann_start)
        return dyn.cann_start(msg, NULL);
    return 0;
}

static void dyn_mstx_end(uint64_t id)
{
    if (dyn.range_end && id)
        dyn.range_end(id);
}

/* ---- every rank's step, for the nputrace alignment ----
 * `msmonitor_steps.<segment name>` next to the segment: DYN_STEPS_SLOTS uint32 slots, rank r writes its current step at slot
 * r % DYN_STEPS_SLOTS each step; the creator takes the maximum when it aligns a start step.
 * A side file, not the segment, because the segment's text must stay plain padded JSON for
 * every reader. Only the creator creates (and at exit unlinks) it; ranks map it when it is
 * there. Best effort: without it the creator aligns on its own step. */
#define DYN_STEPS_SLOTS 4096u
#define DYN_STEPS_RETRY 64u

/* "<dir>/msmonitor_steps.<segment name>": not under the segment's prefix, so tools that list
 * DynamicProfileNpuShm* segments see one file per job. */
static int dyn_steps_path(char *buf, size_t cap)
{
    const char *slash = strrchr(dyn.path, '/');
    int dlen = slash ? (int)(slash - dyn.path) + 1 : 0;

    return snprintf(buf, cap, "%.*s" NAMES_SHM_STEPS_PREFIX "%s", dlen, dyn.path, dyn.path + dlen) < (int)cap ? 0
                                                                                                          : -1;
}

static void dyn_steps_map(bool create)
{
    char p[PATH_MAX + 32];
    void *m;
    int fd;

    if (dyn_steps_path(p, sizeof(p)) != 0)
        return;
    fd = open(p, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | (create ? O_CREAT : 0), 0600);
    if (fd < 0)
        return;
    {
        static bool said;
        char err[PATH_MAX + 256] = "";
        struct stat st;
        if (fstat(fd, &st) != 0 || dyn_file_trusted(p, &st, err, sizeof(err)) != 0) {
            if (!said)
                dyn_note(LOG_LVL_WARNING, "%s; the nputrace start step is aligned without it",
                         err[0] ? err : p);
            said = true;
            close(fd);
            return;
        }
    }
    /* Zeroed by the new creator: a killed job's steps must not push the start away. */
    if (create && (ftruncate(fd, 0) != 0 || ftruncate(fd, DYN_STEPS_SLOTS * sizeof(uint32_t)) != 0)) {
        close(fd);
        return;
    }
    m = mmap(NULL, DYN_STEPS_SLOTS * sizeof(uint32_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m != MAP_FAILED) {
        struct stat st;
        if (stat(p, &st) == 0 && st.st_size >= (off_t)(DYN_STEPS_SLOTS * sizeof(uint32_t)))
            dyn.steps = m;
        else
            munmap(m, DYN_STEPS_SLOTS * sizeof(uint32_t));
    }
}

static void dyn_steps_note(void)
{
    if (!dyn.steps && !dyn.creator && dyn.steps_retry-- == 0) {
        dyn.steps_retry = DYN_STEPS_RETRY;
        dyn_steps_map(false);
    }
    if (dyn.steps)
        __atomic_store_n(&dyn.steps[(uint32_t)dyn.rank % DYN_STEPS_SLOTS], (uint32_t)dyn.step, __ATOMIC_RELAXED);
}

/* The highest step any rank of the node reports (poller thread). */
static int32_t dyn_steps_max(void)
{
    int32_t best = __atomic_load_n(&dyn.step, __ATOMIC_RELAXED);

    if (dyn.steps)
        for (uint32_t i = 0; i < DYN_STEPS_SLOTS; i++) {
            uint32_t v = __atomic_load_n(&dyn.steps[i], __ATOMIC_RELAXED);
            if (v <= INT32_MAX && (int32_t)v > best)
                best = (int32_t)v;
        }
    return best;
}

static void dyn_steps_unmap(void)
{
    char p[PATH_MAX + 32];
    bool ours = dyn.creator && dyn.steps; /* a refused file is not ours to remove */

    if (dyn.steps)
        munmap(dyn.steps, DYN_STEPS_SLOTS * sizeof(uint32_t));
    dyn.steps = NULL;
    if (ours && dyn_steps_path(p, sizeof(p)) == 0)
        (void)unlink(p);
}

/* Poller callback (poller thread): publish one poll reply in the segment for every rank. */
static void dyn_publish(void *ctx, const char *text, size_t len)
{
    uint8_t *shm = ctx;
    struct kvtext kv;
    char *json = NULL, aligned[16];
    size_t jlen = 0;
    int rc;

    if (kvtext_parse(text, len, &kv) != 0) {
        kvtext_fini(&kv);
        return;
    }
    /* nputrace with start step -1: one start step for every rank, published with the config. */
    (void)tracewin_align(&kv, dyn_steps_max(), aligned, sizeof(aligned));
    rc = kv.n > 0 ? dyn_config_json(&kv, &json, &jlen) : -ENODATA;
    if (rc == 0)
        rc = dyn_shm_write(shm, json, jlen, (uint32_t)time(NULL));
    if (rc == 0)
        dyn_note(LOG_LVL_INFO, "config published (%zu keys)", kv.n + 1);
    else if (rc != -ENODATA)
        dyn_note(LOG_LVL_ERROR, "config of %zu keys dropped: %s", kv.n, errno_name(-rc));
    free(json);
    kvtext_fini(&kv);
}

static void dyn_poller_exit(void *ctx)
{
    (void)ctx;
    (void)control_report_status(IPC_STATUS_UNINITIALIZED, -1, -1, -1);
}

static void dyn_poller_start(void)
{
    struct control_poller_cfg cfg = {
        .name = "MsMonitorPoll", .rank = dyn.rank, .period_s = dyn_poll_interval(penv_get(PENV_POLL_INTERVAL_S)),
        .on_config = dyn_publish, .on_exit = dyn_poller_exit, .ctx = dyn.shm, .echo_stderr = dyn_echo,
    };

    control_backoff_from_env(&cfg.backoff);
    if (control_poller_create(&cfg, &dyn.poller) != 0)
        dyn.poller = NULL; /* logged; without a poller the ranks still run */
}

/* ---- SIGTERM: a job's normal stop leaves no segment behind ----
 * A program that does not handle SIGTERM (a plain Python training script) dies of it without
 * running atexit, so its segment and steps file would stay, and the next job would "take
 * over" a leftover as if the job had been killed. Each rank installs, over the default
 * disposition only (never over the program's own handler), a handler that drops this rank's
 * hold on the segment and, if no other rank of the job holds it any more (an exclusive flock,
 * the protocol of cleanup-shm), unlinks the segment and its steps file; then SIGTERM takes its
 * default action, so the process still dies of SIGTERM at once. Only async-signal-safe calls
 * (close, open, flock, unlink, getpid, sigaction, raise). A takeover then means the creator
 * was killed (SIGKILL, a crash, the OOM killer). */
static struct {
    char seg[PATH_MAX], steps[PATH_MAX + 32];
    pid_t pid;             /* the process that joined: a fork()ed child cleans up nothing */
    volatile sig_atomic_t armed;
    volatile sig_atomic_t fd;
} dyn_term;

static void dyn_on_sigterm(int sig)
{
    int saved = errno;

    if (dyn_term.armed && getpid() == dyn_term.pid) {
        int fd;
        dyn_term.armed = 0;
        /* our shared flock: unlocked by hand, the segment's mapping keeps the description open */
        (void)flock(dyn_term.fd, LOCK_UN);
        (void)close(dyn_term.fd);
        fd = open(dyn_term.seg, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0) {
            if (flock(fd, LOCK_EX | LOCK_NB) == 0) { /* no other rank holds it: the job is gone */
                (void)unlink(dyn_term.steps);
                (void)unlink(dyn_term.seg);
            }
            (void)close(fd);
        }
    }
    /* SA_RESETHAND put the default back: delivered on return, it ends the process */
    (void)raise(sig);
    errno = saved;
}

/* dyn.lock held. */
static void dyn_term_install(void)
{
    struct sigaction old, sa;

    if (sigaction(SIGTERM, NULL, &old) != 0 || (!(old.sa_flags & SA_SIGINFO) && old.sa_handler != SIG_DFL))
        return; /* the program handles SIGTERM itself: its clean exit runs finalize */
    snprintf(dyn_term.seg, sizeof(dyn_term.seg), "%s", dyn.path);
    if (dyn_steps_path(dyn_term.steps, sizeof(dyn_term.steps)) != 0)
        dyn_term.steps[0] = '\0';
    dyn_term.pid = getpid();
    dyn_term.fd = dyn.fd;
    dyn_term.armed = 1;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = dyn_on_sigterm;
    sa.sa_flags = SA_RESETHAND;
    sigfillset(&sa.sa_mask);
    if (sigaction(SIGTERM, &sa, NULL) != 0)
        dyn_term.armed = 0;
}

/* dyn.lock held: the default back, unless the program installed its own handler since. */
static void dyn_term_remove(void)
{
    struct sigaction cur, dfl;

    dyn_term.armed = 0;
    if (sigaction(SIGTERM, NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == dyn_on_sigterm) {
        memset(&dfl, 0, sizeof(dfl));
        dfl.sa_handler = SIG_DFL;
        (void)sigaction(SIGTERM, &dfl, NULL);
    }
}

void dyn_finalize(void)
{
    pthread_mutex_lock(&dyn.lock);
    if (!dyn.enabled || dyn.pid != getpid())
        goto out; /* a child must not join the parent's poller nor unlink its segment */
    __atomic_store_n(&dyn.enabled, false, __ATOMIC_RELAXED);
    dyn_term_remove();
    /* its tick reads the segment: stopped before the unmap (it never takes dyn.lock) */
    health_reporter_stop();
    dyn_mstx_end(dyn.range_id);
    dyn.range_id = 0;
    tracewin_leave(dyn.step);
    (void)monitor_stop();
    control_poller_destroy(dyn.poller); /* sends the last status, then the -1 statuses */
    dyn.poller = NULL;
    munmap(dyn.shm, DYN_SHM_SIZE);
    dyn.shm = NULL;
    dyn_steps_unmap();
    if (dyn.creator && unlink(dyn.path) != 0 && errno != ENOENT)
        LOG_WARN("dynamic_profile: cannot remove %s: %s", dyn.path, strerror(errno));
    close(dyn.fd);
    dyn.fd = -1;
out:
    pthread_mutex_unlock(&dyn.lock);
}

/* <private dir>/DynamicProfileNpuShm-<job key> (docs/python.md, "Where the segment lives"). */
static int dyn_segment_path(char *buf, size_t cap)
{
    char dir[PATH_MAX], sock[PATH_MAX], key[24], name[64];
    int rc;

    if (ipc_socket_dir(NULL, sock, sizeof(sock)) != 0)
        sock[0] = '\0';
    rc = dyn_segment_dir(penv_get(PENV_SHM_DIR), penv_get(PENV_XDG_RUNTIME_DIR), sock, dir, sizeof(dir));
    if (rc != 0) {
        LOG_ERROR("dynamic_profile: dynamic profiler disabled: no directory of uid %u for the segment (see the "
                  "lines above; set MSMONITOR_SHM_DIR to a directory only you can write)", (unsigned)geteuid());
        return rc;
    }
    if (dyn_job_key(penv_get(PENV_JOB_KEY), penv_get(PENV_MASTER_ADDR), penv_get(PENV_MASTER_PORT),
                    penv_get(PENV_TORCHELASTIC_RUN_ID), getppid(), key, sizeof(key)) != 0 ||
        dyn_shm_name(key, name, sizeof(name)) != 0 ||
        snprintf(buf, cap, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", name) >= (int)cap) {
        LOG_ERROR("dynamic_profile: dynamic profiler disabled: shm directory too long: %s", dir);
        return -ENAMETOOLONG;
    }
    return 0;
}

/* Reporter thread: the segment's publish time, so a rank that never steps shows how long
 * a config has waited for it. The segment stays mapped until the reporter is stopped. */
static void dyn_health_tick(void)
{
    if (__atomic_load_n(&dyn.enabled, __ATOMIC_RELAXED))
        health_note_segment(dyn_shm_time(dyn.shm));
}

int dyn_init(int32_t rank, unsigned flags)
{
    char err[PATH_MAX + 512];
    int rc = 0;

    pthread_mutex_lock(&dyn.lock);
    if (dyn.enabled && dyn.pid == getpid())
        goto out;
    if (dyn.enabled) {
        rc = -ECHILD; /* fork()ed from a joined rank: the segment and poller are the parent's */
        goto out;
    }
    if (!dyn_use_daemon(penv_get(PENV_USE_DAEMON), penv_get(PENV_KINETO_USE_DAEMON))) {
        rc = -ENOTSUP;
        goto out;
    }
    dyn_echo = flags & DYN_INIT_ECHO;
    dyn.rank = rank >= 0 ? rank : dyn_env_rank();
    rc = dyn_segment_path(dyn.path, sizeof(dyn.path));
    if (rc != 0)
        goto out;
    srand((unsigned)getpid() ^ (unsigned)clock_mono_ns());
    rc = dyn_attach_or_create(dyn.path, dyn_stale_seconds(penv_get(PENV_SHM_STALE_S)), &dyn.fd, &dyn.creator,
                              err, sizeof(err));
    if (rc != 0) {
        if (rc == -ESTALE)
            LOG_ERROR("dynamic_profile: %s", err);
        else
            LOG_ERROR("dynamic_profile: dynamic profiler disabled: %s", err);
        goto out;
    }
    dyn.shm = mmap(NULL, DYN_SHM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, dyn.fd, 0);
    if (dyn.shm == MAP_FAILED) {
        rc = -errno;
        LOG_ERROR("dynamic_profile: dynamic profiler disabled: mmap %s: %s", dyn.path, strerror(-rc));
        goto close_fd;
    }
    dyn.pid = getpid();
    /* 0, not now: a rank that attaches after a config was published applies it at its
     * first step (docs/python.md "Ranks that attach late") */
    dyn.last_ts = 0;
    dyn.step = 1;
    dyn.status_due = true;
    dyn.steps_retry = 0;
    if (dyn.creator)
        dyn_steps_map(true); /* before the poller: it reads the slots */
    if (dyn.creator)
        dyn_poller_start();
    dyn_mstx_resolve();
    dyn.range_id = dyn_mstx_start(dyn.step);
    __atomic_store_n(&dyn.enabled, true, __ATOMIC_RELAXED);
    if (!dyn.atexit_done && atexit(dyn_finalize) == 0)
        dyn.atexit_done = true;
    if (!dyn.atfork_done && pthread_atfork(NULL, NULL, dyn_atfork_child) == 0)
        dyn.atfork_done = true;
    dyn_term_install();
    dyn_note(LOG_LVL_INFO, "rank %d attached to %s%s", (int)dyn.rank, dyn.path, dyn.creator ? " as creator" : "");
    health_set_identity("dyno", dyn.rank);
    (void)health_reporter_start(dyn_poll_interval(penv_get(PENV_POLL_INTERVAL_S)), dyn_health_tick);
    goto out;
close_fd:
    close(dyn.fd);
    dyn.fd = -1;
    if (dyn.creator)
        (void)unlink(dyn.path);
out:
    pthread_mutex_unlock(&dyn.lock);
    return rc;
}


static void dyn_apply(int32_t step)
{
    struct kvtext kv;
    bool valid;

    if (dyn_shm_read(dyn.shm, &kv, &valid) != 0 || !valid)
        goto out; /* empty or unparsable: ignored, like Python's read_config() -> None */
    if (cfgkeys_classify(kv.keys, kv.n) == CFGKEYS_NPU_MONITOR) {
        /* The session end writes the cluster layout next to the data (docs/design/outputs.md). */
        if (dyn.stop_hook && cfgkeys_true(kvtext_get(&kv, CFGKEY_NPU_MONITOR_STOP)))
            dyn.stop_hook(dyn.stop_hook_ctx);
        /* Every rank runs its own monitor and writes its own files. */
        (void)control_apply_config(kv.keys, kv.values, kv.n);
        goto out;
    }
    {
        /* answered to the daemon (ack.h) with the reason the line below logs */
        char id[ACK_ID_CAP], why[ACK_REASON_CAP + 1];
        int rc;
        struct tracewin_status st;
        ack_find_id(kv.keys, kv.values, kv.n, id);
        log_reason_begin(why, sizeof(why));
        rc = tracewin_arm(&kv, dyn.rank, step);
        log_reason_end();
        if (rc == 0)
            dyn.status_due = true; /* report the new state at once */
        tracewin_status(&st);
        (void)ack_send(id, rc == 0 ? "applied" : "rejected", rc == 0 ? "" : why[0] ? why : "not applied",
                       names_ipc_status(st.status));
    }
out:
    kvtext_fini(&kv);
}

/* One step, dyn.lock held. may_wait false: a step that has a config to apply or that moves
 * the nputrace window (both may wait: on the session actor, on a Python stop hook) returns
 * -EAGAIN before doing anything; every other step waits on nothing but short locks. */
static int dyn_step_locked(bool may_wait)
{
    int32_t next = dyn.step < INT32_MAX ? dyn.step + 1 : dyn.step;
    uint32_t ts = dyn_shm_time(dyn.shm);
    uint64_t now;

    if (!may_wait && (ts > dyn.last_ts || tracewin_step_nowait(next) != 0))
        return -EAGAIN;
    dyn_mstx_end(dyn.range_id);
    __atomic_store_n(&dyn.step, next, __ATOMIC_RELAXED); /* the creator's poller reads it */
    now = health_note_step(dyn.step);
    dyn_steps_note();
    if (may_wait) {
        if (ts > dyn.last_ts) {
            dyn.last_ts = ts;
            dyn_apply(dyn.step);
        }
        /* The window opens and closes between steps, before this step's range starts, so the
         * trace holds exactly the records (and `step <N>` ranges) of [start, stop). */
        if (tracewin_step(dyn.step))
            dyn.status_due = true;
    }
    dyn.range_id = dyn_mstx_start(dyn.step);
    if (dyn.poller) {
        if (dyn.status_due || now - dyn.last_status_ns >= DYN_STATUS_PERIOD_NS) {
            struct tracewin_status st;
            tracewin_status(&st);
            dyn.status_due = false;
            dyn.last_status_ns = now;
            /* Handed to the poller thread: the step never waits on the daemon. */
            control_poller_post_status(dyn.poller, st.status, dyn.step, st.start, st.stop);
        }
    }
    return 0;
}

/* The fork check reads dyn.forked, never written in the joined process; a child without
 * atfork (it failed at init) still falls back to comparing pids. */
static bool dyn_ours(void)
{
    return !dyn.forked && (dyn.atfork_done || dyn.pid == getpid());
}

int dyn_step(void)
{
    if (!__atomic_load_n(&dyn.enabled, __ATOMIC_RELAXED) || dyn.forked)
        return 0;
    pthread_mutex_lock(&dyn.lock);
    if (dyn.enabled && dyn_ours())
        (void)dyn_step_locked(true);
    pthread_mutex_unlock(&dyn.lock);
    return 0;
}

int dyn_step_nowait(void)
{
    int rc = 0;

    if (!__atomic_load_n(&dyn.enabled, __ATOMIC_RELAXED) || dyn.forked)
        return 1;
    if (pthread_mutex_trylock(&dyn.lock) != 0)
        return 0; /* finalize or an info() holds it: wait for it in dyn_step */
    if (dyn.enabled && dyn_ours())
        rc = dyn_step_locked(false);
    pthread_mutex_unlock(&dyn.lock);
    return rc == 0 ? 1 : 0;
}

void dyn_set_stop_hook(void (*fn)(void *ctx), void *ctx)
{
    pthread_mutex_lock(&dyn.lock);
    dyn.stop_hook = fn;
    dyn.stop_hook_ctx = ctx;
    pthread_mutex_unlock(&dyn.lock);
}

void dyn_get_info(struct dyn_info *ret)
{
    memset(ret, 0, sizeof(*ret));
    pthread_mutex_lock(&dyn.lock);
    ret->enabled = dyn.enabled && dyn.pid == getpid();
    if (ret->enabled) {
        ret->creator = dyn.creator;
        ret->rank = dyn.rank;
        ret->step = dyn.step;
        snprintf(ret->path, sizeof(ret->path), "%s", dyn.path);
        if (dyn.poller) {
            ret->poller = true;
            control_poller_get_state(dyn.poller, &ret->poller_state);
        }
    }
    pthread_mutex_unlock(&dyn.lock);
}
