/* cmd_doctor: `dyno doctor` — walks docs/troubleshooting.md ("What dyno doctor checks")
 * for each target: RPC reachability, versions, registrations, state, and — when the target is
 * this node — socket files, the job's MSMONITOR_USE_DAEMON, leftover shm and log-dir space. One
 * line per check: a mark, what was found, and the fix. Any failed check fails the host. */
#include "cli/cmd.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cli/cli_gather.h"
#include "cli/cli_val.h"
#include "cli/doctor_ns.h"
#include "cli/doctor_text.h"
#include "contract/names.h"
#include "cli/hosts.h"
#include "cli/rpc_client.h"
#include "ipc/ipc_msg.h"

#define MARK_OK "\xe2\x9c\x94"    /* ✔ */
#define MARK_FAIL "\xe2\x9c\x98"  /* ✘ */
#define MARK_INFO "\xe2\x84\xb9"  /* ℹ: nothing to judge (data not reported, or not readable) */
/* every file dyno mode creates, from the contract: cleanup-shm removes the same */
static const char *const shm_files[] = {
#define SHM_FILE(id, prefix, what) prefix,
    NAMES_SHM_FILES(SHM_FILE)
#undef SHM_FILE
};
#define SHM_PATTERNS "DynamicProfileNpuShm*, msmonitor_steps.DynamicProfileNpuShm*"
#define SHM_MAX 256               /* shm candidates examined per directory */
#define PIDS_SHOWN 16
#define DISK_MIN_FREE (1ull << 30)
#define ENVIRON_MAX (1u << 20)
/* every fix cites the section of this page that explains it */
#define DOC "docs/troubleshooting.md#"
#define EXCL "npu-monitor-and-nputrace-exclude-each-other"

enum mark { M_OK, M_FAIL, M_INFO };

struct report {
    struct cli_buf *out;
    unsigned checks;
    unsigned failed;
    bool local;   /* the target is this node: /proc/<pid> of its processes can be read */
};

struct opts {
    bool has_job, has_pid;
    long long job_id, pid;
    long long node_pid; /* --pid as the daemon numbers it (doctor_ns.h; -1 unknown) */
    const char *log_dir;
};

static void say(struct report *r, enum mark m, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static size_t read_environ(long long pid, char **ret);

static void say(struct report *r, enum mark m, const char *fmt, ...)
{
    char line[16384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    doctor_line_safe(line); /* values are escaped where printed; this catches any that is not */
    if (m != M_INFO)
        r->checks++;
    if (m == M_FAIL)
        r->failed++;
    cli_buf_printf(r->out, "%s %s\n", m == M_OK ? MARK_OK : m == M_FAIL ? MARK_FAIL : MARK_INFO,
                   line);
}

static const struct cli_flag doctor_flags[] = {
    {"job-id", CLI_FLAG_VALUE, false, NULL, "Job whose processes must be registered (default: any)"},
    {"log-dir", CLI_FLAG_VALUE, false, NULL, "Check free space of this output directory (--log-file)"},
    {"pid", CLI_FLAG_VALUE, false, NULL, "Training process to check (env, registration)"},
};
#define NFLAGS (sizeof(doctor_flags) / sizeof(doctor_flags[0]))

static int read_opts(const struct cli_args *a, struct opts *o, char *err, size_t errcap)
{
    int64_t v;
    memset(o, 0, sizeof(*o));
    if (cli_flags_given(a, "job-id")) {
        if (cli_val_i64("job-id", cli_flags_get(a, "job-id"), 0, INT64_MAX,
                        "Must be a non-negative integer", &v, err, errcap) < 0)
            return -EINVAL;
        o->has_job = true;
        o->job_id = v;
    }
    if (cli_flags_given(a, "pid")) {
        if (cli_val_i64("pid", cli_flags_get(a, "pid"), 1, INT32_MAX, "Must be a positive integer",
                        &v, err, errcap) < 0)
            return -EINVAL;
        o->has_pid = true;
        o->pid = v;
    }
    o->log_dir = cli_flags_get(a, "log-dir");
    return 0;
}

static int doctor_prepare(const struct cli_args *a, struct cmd_req *req, char *err, size_t errcap)
{
    struct opts o;
    if (read_opts(a, &o, err, errcap) < 0)
        return -EINVAL;
    /* The body the fan-out size-checks; run_host sends its own requests. */
    cli_buf_puts(&req->body, "{\"fn\":\"getStatus\"}");
    return req->body.err;
}

/* doctor_ns's lines, counted and escaped like ours. */
static void say_ns(void *report, enum doctor_mark m, const char *line)
{
    say(report, m == DOCTOR_OK ? M_OK : m == DOCTOR_FAIL ? M_FAIL : M_INFO, "%s", line);
}

/* Filesystem checks only make sense on the node the target names. */
static bool target_is_local(const char *t)
{
    char name[256];
    if (strncmp(t, HOSTS_UNIX_PREFIX, strlen(HOSTS_UNIX_PREFIX)) == 0 || strcmp(t, "localhost") == 0 ||
        strcmp(t, "ip6-localhost") == 0 || strncmp(t, "127.", 4) == 0 || strcmp(t, "::1") == 0 ||
        strcmp(t, "[::1]") == 0)
        return true;
    if (gethostname(name, sizeof(name)) != 0)
        return false;
    name[sizeof(name) - 1] = '\0';
    size_t n = strcspn(name, ".");
    return strcmp(t, name) == 0 || (strlen(t) == n && strncmp(t, name, n) == 0);
}

static cJSON *call_json(const struct rpc_tls *tls, const char *target, uint16_t port,
                        int timeout_s, const char *body, enum rpc_fail *ret_fail, char *err,
                        size_t errcap)
{
    char *reply = NULL;
    size_t len = 0;
    cJSON *json = NULL;
    if (rpc_call_tls(tls, target, port, NULL, timeout_s, body, strlen(body), &reply, &len,
                     ret_fail, err, errcap) < 0)
        return NULL;
    json = cJSON_ParseWithLengthOpts(reply, len, NULL, false);
    if (!json)
        snprintf(err, errcap, "unparsable reply (%zu bytes)", len);
    free(reply);
    return json;
}

static const char *str_item(const cJSON *o, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(it) ? it->valuestring : NULL;
}

static bool proc_selected(const cJSON *p, const struct opts *o)
{
    const cJSON *job = cJSON_GetObjectItemCaseSensitive(p, "job_id");
    return !o->has_job || (cJSON_IsNumber(job) && cli_json_i64(job, INT64_MIN, INT64_MAX, -1) == o->job_id);
}

static long long proc_pid(const cJSON *p)
{
    const cJSON *pid = cJSON_GetObjectItemCaseSensitive(p, "pid");
    return cli_json_i64(pid, INT64_MIN, INT64_MAX, -1);
}

static bool has_word(const char *key, const char *word)
{
    return strstr(key, word) != NULL;
}

/* Registrations for the job, the target pid, and the poll age when reported. */
static void check_processes(struct report *r, const cJSON *procs, const struct opts *o)
{
    char job[48] = "any job", list[PIDS_SHOWN * 24 + 8] = "";
    size_t used = 0;
    int n = 0, polling = 0, ages = 0;
    bool pid_found = false;
    const cJSON *p;
    if (o->has_job)
        snprintf(job, sizeof(job), "job %lld", o->job_id);
    cJSON_ArrayForEach(p, procs) {
        if (!cJSON_IsObject(p) || !proc_selected(p, o))
            continue;
        long long pid = proc_pid(p);
        bool poll = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "polling"));
        n++;
        polling += poll;
        pid_found |= o->has_pid && pid == o->node_pid;
        if (n <= PIDS_SHOWN && used < sizeof(list))
            used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%lld%s", n > 1 ? ", " : "",
                                     pid, poll ? " (polling)" : "");
    }
    if (n == 0) {
        say(r, M_FAIL, "no process registered for %s - fix: export MSMONITOR_USE_DAEMON=1 before "
            "starting the job and call step() every iteration; the daemon log then shows "
            "'Registered process (<pid>) for job <id>' (%sregistration)", job, DOC);
    } else {
        say(r, M_OK, "%d process%s registered for %s: %s%s", n, n == 1 ? "" : "es", job, list,
            n > PIDS_SHOWN ? ", ..." : "");
        if (polling == 0)
            say(r, M_FAIL, "none of them polls for configs - fix: the framework's dynamic profiler "
                "(torch_npu dyno mode or msmonitor.dynamic_profile) must be running (%sregistration)", DOC);
    }
    if (o->has_pid) {
        if (pid_found)
            say(r, M_OK, "pid %lld is known to the daemon", o->pid);
        else
            say(r, M_FAIL, "pid %lld is not registered%s - fix: start it with "
                "MSMONITOR_USE_DAEMON=1 and the daemon running as the same user", o->pid,
                o->has_job ? " for this job" : "");
    }
    /* Poll age: upstream has none; print whatever poll timing field the daemon reports. */
    cJSON_ArrayForEach(p, procs) {
        const cJSON *f;
        if (!cJSON_IsObject(p) || !proc_selected(p, o))
            continue;
        cJSON_ArrayForEach(f, p) {
            if (cJSON_IsNumber(f) && has_word(f->string, "poll")) {
                say(r, M_OK, "pid %lld: %s = %.0f", proc_pid(p), f->string, f->valuedouble);
                ages++;
            }
        }
    }
    if (n > 0 && ages == 0)
        say(r, M_INFO, "last poll age: not reported by this daemon (\"polling\": true means the "
            "process is a live poller)");
}

static int count_state(const cJSON *procs, const char *key, const char *state, char *pids,
                       size_t cap)
{
    const cJSON *p;
    int n = 0;
    size_t used = 0;
    pids[0] = '\0';
    cJSON_ArrayForEach(p, procs) {
        const char *s = cJSON_IsObject(p) ? str_item(p, key) : NULL;
        if (!s || strcmp(s, state) != 0)
            continue;
        if (used < cap)
            used += (size_t)snprintf(pids + used, cap - used, "%s%lld", n ? ", " : "", proc_pid(p));
        n++;
    }
    return n;
}

/* npu-monitor / nputrace exclusivity: who holds which. */
static void check_state(struct report *r, const cJSON *st)
{
    const cJSON *procs = cJSON_GetObjectItemCaseSensitive(st, "processes");
    const char *mon = str_item(st, "npumonitor"), *tr = str_item(st, "nputrace");
    char mpids[256], tpids[256];
    if (!mon || !tr) {
        say(r, M_FAIL, "status reply lacks npumonitor/nputrace - fix: upgrade dynolog to this "
            "dyno's release");
        return;
    }
    int nm = count_state(procs, "npumonitor", "Running", mpids, sizeof(mpids));
    int nt = count_state(procs, "nputrace", "Running", tpids, sizeof(tpids));
    if (strcmp(mon, "unknown") == 0 || strcmp(tr, "unknown") == 0) {
        say(r, M_FAIL, "npu-monitor %s, nputrace %s: a process reported an unknown state - fix: "
            "keep dyno, dynolog and mindstudio_monitor at the same release (%sversions)", mon, tr, DOC);
    } else if (nm > 0 && nt > 0) {
        say(r, M_FAIL, "npu-monitor runs in pid %s while nputrace runs in pid %s - fix: stop one "
            "(dyno npu-monitor --npu-monitor-stop) (%s%s)", mpids, tpids, DOC, EXCL);
    } else if (strcmp(mon, "Running") == 0 || nm > 0) {
        say(r, M_OK, "npu-monitor Running (pid %s), nputrace %s - nputrace is refused until "
            "'dyno npu-monitor --npu-monitor-stop' (%s%s)", nm ? mpids : "?", tr, DOC, EXCL);
    } else if (strcmp(tr, "Running") == 0 || strcmp(tr, "Ready") == 0 || nt > 0) {
        say(r, M_OK, "nputrace %s (pid %s), npu-monitor %s - npu-monitor is refused until the "
            "trace finishes (%s%s)", tr, nt ? tpids : "?", mon, DOC, EXCL);
    } else if (strcmp(mon, "Uninitialized") == 0) {
        say(r, M_OK, "npu-monitor Uninitialized, nputrace %s: no process has reported status yet, "
            "so npu-monitor commands stay ineffective until one does", tr);
    } else {
        say(r, M_OK, "npu-monitor %s, nputrace %s: either can be started", mon, tr);
    }
}

static double num_item(const cJSON *o, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(it) ? it->valuedouble : 0;
}

/* This daemon's per-session counters (`session_stats`, the plugin's PluginStats): one line
 * per process; any dropped record fails the check. */
static void check_session_stats(struct report *r, long long pid, const cJSON *s)
{
    double q = num_item(s, "dropped_queue"), d = num_item(s, "dropped_declined");
    double w = num_item(s, "dropped_write"), off = num_item(s, "dropped_offline");
    if (off > 0)
        say(r, M_FAIL, "pid %lld: %.0f metric datagrams dropped while the daemon was unreachable - fix: "
            "keep dynolog running (systemd Restart=always) or raise MSMONITOR_DATA_BACKLOG_BYTES", pid, off);
    /* each reason its own fix: a full buffer pool is not a full disk */
    if (d > 0) {
        /* the measured remedies (docs/troubleshooting.md#dropped-records): the buffer size and
         * the number of records; the interval and the filter change nothing */
        char knob[160] = "";
        if (r->local) {
            char *env = NULL;
            size_t len = read_environ(pid, &env), vlen = 0;
            const char *v = env ? doctor_environ_get(env, len, "MSMONITOR_TEST_BUFFER_SIZE", &vlen) : NULL;
            char ev[64];
            if (v)
                snprintf(knob, sizeof(knob), "; its environment has MSMONITOR_TEST_BUFFER_SIZE=%s, a test knob that "
                         "shrinks the buffers: unset it", doctor_tesc(v, vlen, ev, sizeof(ev)));
            free(env);
        }
        say(r, M_FAIL, "pid %lld: dropping %.0f%% of records: %.0f buffer requests declined (the 32-buffer pool "
            "is full)%s - fix: full-size buffers (no MSMONITOR_TEST_BUFFER_SIZE in the job's environment), else "
            "fewer --mspti-activity-kind; a shorter --report-interval-s or a --filter does not help; the job log "
            "shows 'Buffer allocation exhausted' (%sdropped-records)", pid,
            d + num_item(s, "consumed") > 0 ? 100.0 * d / (d + num_item(s, "consumed")) : 0.0, d, knob, DOC);
    }
    if (w > 0)
        say(r, M_FAIL, "pid %lld: %.0f records lost to write errors (a full disk?) - fix: free space under the "
            "--log-file directory or choose another one; check it with --log-dir (%sdisk-space)", pid, w, DOC);
    if (q > 0)
        say(r, M_FAIL, "pid %lld: %.0f records dropped at the full output queue - fix: a --filter or fewer "
            "kinds (%sdropped-records)", pid, q, DOC);
    if (q + d + w == 0 && off == 0)
        say(r, M_OK, "pid %lld: session consumed %.0f, kept %.0f, filtered %.0f, written %.0f, "
            "0 dropped", pid, num_item(s, "consumed"), num_item(s, "kept"),
            num_item(s, "filtered"), num_item(s, "written"));
}

/* Per-process msPTI library and session drop counters, if this daemon's status carries them
 * (`session_stats`; else any string field naming a library, any number field counting drops,
 * at any depth, so a daemon that reports them under other names is still read). */
static void scan_fields(struct report *r, long long pid, const cJSON *o, int depth, int *nlib,
                        int *ndrop)
{
    const cJSON *f;
    if (depth > 3)
        return;
    cJSON_ArrayForEach(f, o) {
        const char *k = f->string ? f->string : "";
        if (strcmp(k, "health") == 0)
            continue; /* check_health's */
        if (cJSON_IsObject(f) && strcmp(k, "session_stats") == 0) {
            (*ndrop)++;
            check_session_stats(r, pid, f);
        } else if (cJSON_IsObject(f)) {
            scan_fields(r, pid, f, depth + 1, nlib, ndrop);
        } else if (cJSON_IsArray(f)) {   /* e.g. a list of sessions, each with its counters */
            const cJSON *e;
            cJSON_ArrayForEach(e, f) {
                if (cJSON_IsObject(e))
                    scan_fields(r, pid, e, depth + 1, nlib, ndrop);
            }
        } else if (cJSON_IsString(f) && (has_word(k, "lib") || has_word(k, "backend"))) {
            const char *v = f->valuestring;
            (*nlib)++;
            if (!*v || strncmp(v, "not found", 9) == 0 || strncmp(v, "none", 4) == 0)
                say(r, M_FAIL, "pid %lld: %s %s - fix: CANN >= 9.0.0 loads msPTI itself; older CANN "
                    "needs LD_PRELOAD=<CANN>/cann/lib64/libmspti.so before the job starts (%sstatus-marks)",
                    pid, k, *v ? v : "empty (no library found)", DOC);
            else
                say(r, M_OK, "pid %lld: %s = %s", pid, k, v);
        } else if (cJSON_IsNumber(f) && (has_word(k, "drop") || has_word(k, "lost"))) {
            (*ndrop)++;
            if (f->valuedouble > 0)
                say(r, M_FAIL, "pid %lld: %s = %.0f records dropped - fix: fewer --mspti-activity-kind "
                    "(%sdropped-records)", pid, k, f->valuedouble, DOC);
            else
                say(r, M_OK, "pid %lld: %s = 0", pid, k);
        }
    }
}

static void check_sessions(struct report *r, const cJSON *procs, const struct opts *o)
{
    const cJSON *p;
    int nlib = 0, ndrop = 0;
    cJSON_ArrayForEach(p, procs) {
        if (cJSON_IsObject(p) && proc_selected(p, o))
            scan_fields(r, proc_pid(p), p, 0, &nlib, &ndrop);
    }
    if (nlib == 0)
        say(r, M_INFO, "msPTI/CUPTI library per process: not reported by this daemon (the job's "
            "log names the library it loaded)");
    if (ndrop == 0)
        say(r, M_INFO, "session drop counters: not reported (no session has reported yet, or "
            "this daemon does not carry them)");
}

/* Live health (docs/cli.md "Status marks"): every mark the daemon puts on a process
 * fails; drops are judged by check_session_stats with their own fixes. */
static void check_health(struct report *r, const cJSON *procs, const struct opts *o)
{
    const cJSON *p, *m;
    int seen = 0, marked = 0;

    cJSON_ArrayForEach(p, procs) {
        const cJSON *h = cJSON_IsObject(p) && proc_selected(p, o) ? cJSON_GetObjectItemCaseSensitive(p, "health")
                                                                     : NULL;
        if (!cJSON_IsObject(h))
            continue;
        seen++;
        cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(h, "marks")) {
            const char *code = str_item(m, "code"), *text = str_item(m, "text");
            if (!code || !text || strncmp(code, "dropping_", 9) == 0)
                continue;
            say(r, M_FAIL, "pid %lld: %s", proc_pid(p), text);
            marked++;
        }
    }
    if (seen == 0)
        say(r, M_INFO, "live health: not reported (no process has reported it yet, or an older daemon)");
    else if (marked == 0)
        say(r, M_OK, "live health of %d process%s: no marks (steps, records, filter, backend)", seen,
            seen == 1 ? "" : "es");
}

/* The socket files, and whose home they are in. */
static void check_sockets(struct report *r, const char *target)
{
    char dir[4096], path[4200];
    const char *env = getenv("MSMONITOR_SOCKET_DIR");
    const char *unix_path = NULL;
    struct passwd *pw = getpwuid(getuid());
    if (strncmp(target, HOSTS_UNIX_PREFIX, strlen(HOSTS_UNIX_PREFIX)) == 0 &&
        target[strlen(HOSTS_UNIX_PREFIX)])
        unix_path = target + strlen(HOSTS_UNIX_PREFIX);
    if (unix_path) {
        const char *slash = strrchr(unix_path, '/');
        snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - unix_path) : 1,
                 slash ? unix_path : ".");
    } else if (ipc_socket_dir(NULL, dir, sizeof(dir)) < 0) {
        say(r, M_FAIL, "cannot tell the socket directory (no passwd entry for uid %u) - fix: set "
            "MSMONITOR_SOCKET_DIR", (unsigned)getuid());
        return;
    }
    char where[4400], edir[1024], epath[1024];
    doctor_tesc(dir, strlen(dir), edir, sizeof(edir));
    if (unix_path)
        snprintf(where, sizeof(where), "next to %s", doctor_tesc(unix_path, strlen(unix_path), epath, sizeof(epath)));
    else if (env && *env)
        snprintf(where, sizeof(where), "in $MSMONITOR_SOCKET_DIR=%s", edir);
    else
        snprintf(where, sizeof(where), "in %s, the home of %s", edir, pw ? pw->pw_name : "this user");
    for (int i = 0; i < 2; i++) {
        const char *name = i == 0 ? NAMES_SOCK_FILE(NAMES_SOCK_CTL) : NAMES_SOCK_FILE(NAMES_SOCK_RPC);
        struct stat sb;
        if (i == 1 && unix_path)
            snprintf(path, sizeof(path), "%s", unix_path);
        else
            snprintf(path, sizeof(path), "%s/%s", strcmp(dir, "/") == 0 ? "" : dir, name);
        doctor_tesc(path, strlen(path), epath, sizeof(epath));
        if (lstat(path, &sb) == 0 && S_ISSOCK(sb.st_mode)) {
            struct passwd *owner = getpwuid(sb.st_uid);
            say(r, M_OK, "%s present %s (owner %s)", epath, where, owner ? owner->pw_name : "?");
        } else {
            say(r, M_FAIL, "%s missing %s - fix: start dynolog%s as the same user as the job "
                "(it creates its sockets in that user's home, or $MSMONITOR_SOCKET_DIR) (%sthe-socket-directory)",
                epath, where, i == 0 ? " with --enable_ipc_monitor" : "", DOC);
        }
    }
}

/* /proc/<pid>/environ of a process (at most ENVIRON_MAX bytes) into *ret (caller owns; NULL
 * when it cannot be read, errno set); returns its length. */
static size_t read_environ(long long pid, char **ret)
{
    char path[64];
    char *buf = NULL;
    size_t len = 0;
    int fd;

    *ret = NULL;
    snprintf(path, sizeof(path), "/proc/%lld/environ", pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    buf = malloc(ENVIRON_MAX + 1);
    if (buf) {
        ssize_t n;
        while (len < ENVIRON_MAX && (n = read(fd, buf + len, ENVIRON_MAX - len)) > 0)
            len += (size_t)n;
        buf[len] = '\0';
    } else {
        errno = ENOMEM;
    }
    close(fd);
    *ret = buf;
    return len;
}

/* The job's environment, read from /proc. */
static void check_env(struct report *r, long long pid)
{
    char path[64];
    char *buf = NULL;
    size_t len;

    snprintf(path, sizeof(path), "/proc/%lld/environ", pid);
    len = read_environ(pid, &buf);
    if (!buf) {
        if (errno == ENOENT)
            say(r, M_FAIL, "no process %lld on this node - fix: pass the pid of a running "
                "training process", pid);
        else
            say(r, M_INFO, "could not read %s (%s): MSMONITOR_USE_DAEMON not checked - run dyno "
                "doctor as the job's user or root", path, strerror(errno));
        return;
    }
    size_t vlen = 0;
    char eval[256];
    const char *val = doctor_environ_get(buf, len, "MSMONITOR_USE_DAEMON", &vlen);
    if (val)
        doctor_tesc(val, vlen, eval, sizeof(eval)); /* the job's bytes: shown, never obeyed */
    if (len == 0)
        say(r, M_INFO, "could not read %s (empty: no permission or a kernel thread): "
            "MSMONITOR_USE_DAEMON not checked", path);
    else if (val && vlen == 1 && val[0] == '1')
        say(r, M_OK, "pid %lld has MSMONITOR_USE_DAEMON=1", pid);
    else
        say(r, M_FAIL, "pid %lld %s%s%s - fix: export MSMONITOR_USE_DAEMON=1 before starting the "
            "job (it is read once at start-up) (%sthe-jobs-environment)", pid,
            val ? "has MSMONITOR_USE_DAEMON=" : "lacks MSMONITOR_USE_DAEMON", val ? eval : "",
            val ? " (must be 1)" : "", DOC);
    free(buf);
}

struct shm_file {
    char name[256];
    size_t len;
    dev_t dev;
    ino_t ino;
    bool live;
};

static void mark_live(struct shm_file *v, int n, dev_t dev, ino_t ino)
{
    for (int i = 0; i < n; i++) {
        if (v[i].ino == ino && v[i].dev == dev)
            v[i].live = true;
    }
}

/* A segment is live while some process has it open (fd) or mapped (maps). Returns the number
 * of processes that could not be inspected. */
static int scan_owners(struct shm_file *v, int n)
{
    DIR *proc = opendir("/proc");
    struct dirent *de;
    int hidden = 0;
    if (!proc)
        return -1;
    while ((de = readdir(proc))) {
        char path[300], line[4608];
        if (!isdigit((unsigned char)de->d_name[0]))
            continue;
        snprintf(path, sizeof(path), "/proc/%s/maps", de->d_name);
        FILE *f = fopen(path, "re");
        if (f) {
            while (fgets(line, sizeof(line), f)) {
                unsigned maj, min;
                unsigned long long ino;
                if (sscanf(line, "%*s %*s %*s %x:%x %llu", &maj, &min, &ino) == 3 && ino)
                    mark_live(v, n, makedev(maj, min), (ino_t)ino);
            }
            fclose(f);
        } else if (errno == EACCES) {
            hidden++;
        }
        snprintf(path, sizeof(path), "/proc/%s/fd", de->d_name);
        DIR *fds = opendir(path);
        if (!fds)
            continue;
        struct dirent *fe;
        while ((fe = readdir(fds))) {
            struct stat sb;
            if (fe->d_name[0] == '.')
                continue;
            if (fstatat(dirfd(fds), fe->d_name, &sb, 0) == 0)
                mark_live(v, n, sb.st_dev, sb.st_ino);
        }
        closedir(fds);
    }
    closedir(proc);
    return hidden;
}

static bool is_shm_file(const char *name)
{
    for (size_t i = 0; i < sizeof(shm_files) / sizeof(shm_files[0]); i++)
        if (strncmp(name, shm_files[i], strlen(shm_files[i])) == 0)
            return true;
    return false;
}

/* Leftover dyno-mode files (segments and their side files) with no live owner, and the exact
 * command. Returns the number of our files found (live or not). */
static int check_shm_dir(struct report *r, const char *dir)
{
    struct shm_file *files = calloc(SHM_MAX, sizeof(*files));   /* ~70 KiB: off the worker stack */
    DIR *d = files ? opendir(dir) : NULL;
    struct dirent *de;
    int n = 0, live = 0, hidden, others = 0;
    char edir[1024];
    doctor_tesc(dir, strlen(dir), edir, sizeof(edir));
    if (!d) {
        say(r, errno == ENOENT ? M_INFO : M_FAIL, "cannot list %s: %s", edir, strerror(errno));
        free(files);
        return 0;
    }
    while ((de = readdir(d)) && n < SHM_MAX) {
        struct stat sb;
        if (!is_shm_file(de->d_name) || fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISREG(sb.st_mode))
            continue;
        if (sb.st_uid != geteuid()) {
            others++; /* another user chose its name: never put it in a command for us to run */
            continue;
        }
        files[n].len = strlen(de->d_name);
        snprintf(files[n].name, sizeof(files[n].name), "%s", de->d_name);
        files[n].dev = sb.st_dev;
        files[n].ino = sb.st_ino;
        files[n].live = false;
        n++;
    }
    closedir(d);
    hidden = n ? scan_owners(files, n) : 0;
    struct cli_buf cmd;
    cli_buf_init(&cmd, 64u << 10);
    for (int i = 0; i < n; i++) {
        if (files[i].live) {
            live++;
            continue;
        }
        char full[4400];
        int fl = snprintf(full, sizeof(full), "%s/%s", strcmp(dir, "/") == 0 ? "" : dir, files[i].name);
        cli_buf_append(&cmd, " ", 1);
        doctor_shq(&cmd, full, fl > 0 && (size_t)fl < sizeof(full) ? (size_t)fl : 0);
    }
    if (n == live) {
        say(r, M_OK, "no leftover dyno-mode files in %s (%s; %d in use by live processes)", edir, SHM_PATTERNS,
            live);
    } else {
        /* processes whose /proc/<pid> this user may not read could hold one: as another user,
         * root would see them; as root (a sandbox, no CAP_SYS_PTRACE) nobody here can */
        char why[160] = "";
        if (hidden > 0 && geteuid() != 0)
            snprintf(why, sizeof(why), " (%d process%s could not be inspected: run as root to be sure)", hidden,
                     hidden == 1 ? "" : "es");
        else if (hidden > 0)
            snprintf(why, sizeof(why), " (%d process%s could not be inspected even as root, e.g. without "
                     "CAP_SYS_PTRACE)", hidden, hidden == 1 ? "" : "es");
        say(r, M_FAIL, "%d leftover dyno-mode file%s in %s (%s) with no live owner%s - fix: rm -f --%s "
            "(%sleftover-segments)", n - live, n - live == 1 ? "" : "s", edir, SHM_PATTERNS, why,
            cli_buf_str(&cmd), DOC);
    }
    if (others > 0)
        say(r, M_INFO, "%d dyno-mode file%s of other users in %s not named (not yours to remove: their owner or "
            "root can, after checking them)", others, others == 1 ? "" : "s", edir);
    cli_buf_fini(&cmd);
    free(files);
    return n;
}

/* The segments of this uid's jobs live in <dir>/msmonitor-<uid> when <dir> is shared
 * (docs/python.md, "Where the segment lives"): checked when it is there and ours. Returns
 * the number of our files in it, -1 when there is no such directory. */
static int check_shm_private(struct report *r, const char *dir, char *ret_sub, size_t cap)
{
    struct stat sb;

    if (snprintf(ret_sub, cap, "%s/" NAMES_SHM_PRIVATE_PREFIX "%u", strcmp(dir, "/") == 0 ? "" : dir,
                 (unsigned)geteuid()) >= (int)cap ||
        lstat(ret_sub, &sb) != 0 || !S_ISDIR(sb.st_mode) || sb.st_uid != geteuid())
        return -1;
    return check_shm_dir(r, ret_sub);
}

/* Where this user's segments are: the FAQ's `ls -la /dev/shm/DynamicProfileNpuShm*` looks in
 * the shared directory, but a job puts them in its uid's private directory under it. */
static void check_shm(struct report *r, const char *dir)
{
    char sub[4400], esub[1024], edir[1024];
    int n;

    struct stat sb;
    int here;

    here = check_shm_dir(r, dir);
    n = check_shm_private(r, dir, sub, sizeof(sub));
    doctor_tesc(dir, strlen(dir), edir, sizeof(edir));
    if (lstat(dir, &sb) == 0 && S_ISDIR(sb.st_mode) && sb.st_uid == geteuid() && !(sb.st_mode & 022)) {
        /* a directory of ours nobody else writes: the job uses it itself (docs/python.md) */
        say(r, M_INFO, "this user's dyno-mode segments are in %s itself: ls -la %s/ (%d file%s there) "
            "(%sleftover-segments)", edir, edir, here, here == 1 ? "" : "s", DOC);
        return;
    }
    if (n < 0) {
        doctor_tesc(sub, strlen(sub), esub, sizeof(esub));
        say(r, M_INFO, "no %s: no dyno-mode job of uid %u has used %s (segments live in that private "
            "directory, not in %s itself) (%sleftover-segments)", esub, (unsigned)geteuid(), edir, edir, DOC);
        return;
    }
    doctor_tesc(sub, strlen(sub), esub, sizeof(esub));
    say(r, M_INFO, "this user's dyno-mode segments are in %s/, not in %s itself: ls -la %s/ (%d file%s there) "
        "(%sleftover-segments)", esub, edir, esub, n, n == 1 ? "" : "s", DOC);
}

/* An output directory on a full disk gives empty or truncated DB/JSONL files. */
static void check_disk(struct report *r, const char *dir)
{
    struct statvfs vf;
    if (statvfs(dir, &vf) != 0) {
        say(r, M_FAIL, "log dir %s: %s - fix: create it or pass an existing directory to "
            "--log-file", dir, strerror(errno));
        return;
    }
    unsigned long long avail = (unsigned long long)vf.f_bavail * vf.f_frsize;
    unsigned long long total = (unsigned long long)vf.f_blocks * vf.f_frsize;
    double gib = (double)avail / (double)(1ull << 30);
    if (avail < DISK_MIN_FREE || (total && avail * 20 < total))
        say(r, M_FAIL, "log dir %s: only %.2f GiB free (%.0f%%) - fix: free space or choose "
            "another --log-file; SQLite rolls back a transaction when the disk is full (%sdisk-space)", dir,
            gib, total ? 100.0 * (double)avail / (double)total : 0.0, DOC);
    else
        say(r, M_OK, "log dir %s: %.1f GiB free (%.0f%%)", dir, gib,
            total ? 100.0 * (double)avail / (double)total : 0.0);
}

static void doctor_run_host(const struct cmd_req *req, const char *target, uint16_t port,
                            int timeout_s, struct cli_buf *out, bool *ret_failed, char *err,
                            size_t errcap)
{
    struct report r = { out, 0, 0, false };
    struct opts o;
    char where[1200], cerr[2048] = "";
    enum rpc_fail fail = RPC_OK;
    cJSON *ver = NULL, *st = NULL;
    bool local = target_is_local(target);
    r.local = local;

    if (read_opts(req->args, &o, err, errcap) < 0) {   /* validated in prepare already */
        *ret_failed = true;
        return;
    }
    if (strncmp(target, HOSTS_UNIX_PREFIX, strlen(HOSTS_UNIX_PREFIX)) == 0)
        snprintf(where, sizeof(where), "%s", target);
    else
        snprintf(where, sizeof(where), "%s:%u", target, (unsigned)port);

    /* 1. reachable, 2. same release */
    ver = call_json(req->tls, target, port, timeout_s, "{\"fn\":\"getVersion\"}", &fail, cerr, sizeof(cerr));
    if (!ver && fail != RPC_OK && fail != RPC_FAIL_NO_REPLY) {
        say(&r, M_FAIL, "daemon not reachable over RPC at %s: %s - fix: start it (systemctl start "
            "dynolog, or dynolog --enable_ipc_monitor) and check --hostname/--port", where, cerr);
    } else {
        const char *v = ver ? str_item(ver, "version") : NULL;
        say(&r, M_OK, "daemon reachable over RPC at %s", where);
        if (!v)
            say(&r, M_FAIL, "daemon did not report its version (%s) - fix: install dynolog of the "
                "same release as dyno %s (%sversions)", cerr[0] ? cerr : "no version in the reply",
                MSMON_VERSION, DOC);
        else if (strcmp(v, MSMON_VERSION) != 0)
            say(&r, M_FAIL, "versions differ: dyno %s, dynolog %s - fix: install dyno, dynolog and "
                "the wheel of one release; an older daemon silently ignores newer requests (%sversions)",
                MSMON_VERSION, v, DOC);
        else
            say(&r, M_OK, "dyno and dynolog are both version %s", v);

        /* 3. registrations, 4. state, 5. library/drops (from getStatus) */
        cerr[0] = '\0';
        st = call_json(req->tls, target, port, timeout_s, "{\"fn\":\"getStatus\"}", &fail, cerr, sizeof(cerr));
        const cJSON *procs = st ? cJSON_GetObjectItemCaseSensitive(st, "processes") : NULL;
        if (!st) {
            say(&r, M_FAIL, "daemon did not answer getStatus (%s) - fix: upgrade dynolog to this "
                "dyno's release (%sversions)", cerr, DOC);
        } else if (!cJSON_IsArray(procs)) {
            say(&r, M_FAIL, "status reply has no process list (an upstream daemon?) - fix: use "
                "this release's dynolog for per-process checks");
            check_state(&r, st);
        } else {
            struct doctor_ns_in ns = { st, o.has_pid, o.pid, NULL };
            o.node_pid = o.has_pid ? doctor_ns_node_pid(st, o.pid) : -1;
            doctor_ns_daemon(&ns, say_ns, &r);
            check_processes(&r, procs, &o);
            check_state(&r, st);
            check_sessions(&r, procs, &o);
            check_health(&r, procs, &o);
        }
    }

    if (local) {
        const char *shm = getenv("MSMONITOR_SHM_DIR");
        check_sockets(&r, target);
        if (st) {
            const char *up = strncmp(target, HOSTS_UNIX_PREFIX, strlen(HOSTS_UNIX_PREFIX)) == 0 &&
                                     target[strlen(HOSTS_UNIX_PREFIX)] ? target + strlen(HOSTS_UNIX_PREFIX) : NULL;
            char udir[4096];
            const char *slash = up ? strrchr(up, '/') : NULL;
            if (slash)
                snprintf(udir, sizeof(udir), "%.*s", (int)(slash - up), up);
            struct doctor_ns_in ns = { st, o.has_pid, o.pid, slash ? udir : NULL };
            doctor_ns_local(&ns, say_ns, &r);
        }
        if (o.has_pid)
            check_env(&r, o.pid);
        else
            say(&r, M_INFO, "no --pid given: the job's MSMONITOR_USE_DAEMON was not checked");
        check_shm(&r, "/dev/shm");
        if (shm && *shm && strcmp(shm, "/dev/shm") != 0)
            check_shm(&r, shm);
        if (o.log_dir)
            check_disk(&r, o.log_dir);
    } else {
        say(&r, M_INFO, "%s is not this node: socket, /proc, shm and disk checks skipped (run "
            "dyno doctor there)", target);
    }

    /* the one total: the host fails with it, no second line on stderr (cli.c: empty err) */
    cli_buf_printf(out, "doctor: %u checks, %u failed\n", r.checks, r.failed);
    if (r.failed) {
        *ret_failed = true;
        err[0] = '\0';
    }
    cJSON_Delete(ver);
    cJSON_Delete(st);
}

/* Never called: run_host replaces the single request + render. */
static void doctor_render(const struct cmd_req *req, const char *reply, size_t len,
                          const cJSON *json, struct cli_buf *out, bool *ret_failed, char *err,
                          size_t errcap)
{
    cmd_render_verbatim(req, reply, len, json, out, ret_failed, err, errcap);
}

const struct cli_cmd cmd_doctor = {
    .name = "doctor",
    .about = "Check this node against docs/troubleshooting.md (one line per check, with the fix)",
    .flags = doctor_flags,
    .nflags = NFLAGS,
    .prepare = doctor_prepare,
    .render = doctor_render,
    .run_host = doctor_run_host,
};
