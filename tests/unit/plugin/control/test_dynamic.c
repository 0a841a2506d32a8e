/* test_dynamic: the dyno-mode handoff (shm_mode.c, shm_segment.c, job_key.c) against the conventions of
 * python/msmonitor/dynamic_profile.py — segment name and layout, creator election between
 * real processes, the stale rule and its exact text, the poller's line parsing, the
 * segment's layout (the daemon's text as delivered) and the job key rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../logcap.h"
#include "common/log.h"
#include "contract/kvtext.h"
#include "plugin/control/job_key.h"
#include "plugin/control/shm_segment.h"
#include "plugin/control/shm_mode.h"
#include "plugin/penv.h"

static char dir[] = "/tmp/pdyn_XXXXXX";

static int setup(void **state)
{
    (void)state;
    if (logcap_open() != 0)
        return -1;
    return mkdtemp(dir) ? 0 : -1;
}

/* Remove a directory and its files, one level of subdirectories deep (msmonitor_log/). */
static void rm_tree(const char *path, int depth)
{
    DIR *d = opendir(path);
    struct dirent *e;
    char p[512];

    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.' || snprintf(p, sizeof(p), "%s/%s", path, e->d_name) >= (int)sizeof(p))
            continue;
        if (unlink(p) != 0 && errno == EISDIR && depth > 0)
            rm_tree(p, depth - 1);
    }
    if (d)
        closedir(d);
    rmdir(path);
}

static int teardown(void **state)
{
    (void)state;
    rm_tree(dir, 1);
    logcap_close();
    return 0;
}

#define log_text logcap_text
#define log_clear logcap_clear

/* An environment for job_key_of: NULL-terminated name, value pairs. */
static const char *env_get(void *ctx, const char *name)
{
    for (const char *const *p = ctx; *p; p += 2)
        if (strcmp(p[0], name) == 0)
            return p[1];
    return NULL;
}

static void key_of(const char *const *env, pid_t ppid, pid_t pid, char *buf, char *src)
{
    const struct job_key_env e = { .get = env_get, .ctx = (void *)env };

    assert_int_equal(job_key_of(&e, ppid, pid, buf, 24, src, 160), 0);
    assert_int_equal(strlen(buf), 16);
}

static void test_shm_name(void **state)
{
    char buf[64], a[24], b[24], src[160];
    const char *torch1[] = { "MASTER_ADDR", "10.0.0.1", "MASTER_PORT", "29500", "WORLD_SIZE", "8", NULL };
    const char *torch2[] = { "MASTER_ADDR", "10.0.0.1", "MASTER_PORT", "29500", "TORCHELASTIC_RUN_ID", "", NULL };
    const char *torch3[] = { "MASTER_ADDR", "10.0.0.1", "MASTER_PORT", "29501", NULL };
    const char *torch4[] = { "MASTER_ADDR", "10.0.0.12", "MASTER_PORT", "9500", NULL };
    const char *named[] = { "MSMONITOR_JOB_KEY", "myjob", "MASTER_ADDR", "10.0.0.1", "MASTER_PORT", "29500", NULL };
    const char *none[] = { NULL };
    const char *emptyport[] = { "MASTER_ADDR", "x", "MASTER_PORT", "", NULL };
    const char *world[] = { "WORLD_SIZE", "4", "RANK", "1", NULL };
    const char *world1[] = { "WORLD_SIZE", "1", "RANK", "0", NULL };
    const char *pmix[] = { "PMIX_NAMESPACE", "prterun-node-123@1", "OMPI_COMM_WORLD_SIZE", "2", NULL };
    const char *pmi[] = { "PMI_SIZE", "2", NULL };
    const char *slurm1[] = { "SLURM_JOB_ID", "77", "SLURM_STEP_ID", "0", NULL };
    const char *slurm2[] = { "SLURM_JOB_ID", "77", "SLURM_STEP_ID", "1", NULL };
    const char *slurmbatch[] = { "SLURM_JOB_ID", "77", NULL };

    (void)state;
    key_of(torch1, 42, 100, a, src);
    assert_string_equal(src, "the launcher's MASTER_ADDR:MASTER_PORT");
    /* the same job from another rank (another parent, another pid): same key */
    key_of(torch2, 43, 101, b, src);
    assert_string_equal(a, b);
    /* a second job on the node: another port, another key */
    key_of(torch3, 42, 100, b, src);
    assert_string_not_equal(a, b);
    /* parts are separated: ("10.0.0.12", "9500") is not ("10.0.0.1", "29500") */
    key_of(torch4, 42, 100, b, src);
    assert_string_not_equal(a, b);
    /* the explicit key wins */
    key_of(named, 42, 100, b, src);
    assert_string_not_equal(a, b);
    assert_string_equal(src, "MSMONITOR_JOB_KEY");
    /* a single-process job is its own job: two of them from one shell never share a key */
    key_of(none, 42, 100, a, src);
    assert_string_equal(src, "this process (a single-process job)");
    key_of(none, 42, 101, b, src);
    assert_string_not_equal(a, b);
    key_of(emptyport, 42, 100, b, src);
    assert_string_equal(a, b);
    key_of(world1, 42, 100, b, src);
    assert_string_equal(a, b);
    /* several ranks without a launcher variable: the children of one launcher */
    key_of(world, 42, 100, a, src);
    key_of(world, 42, 101, b, src);
    assert_string_equal(a, b);
    assert_non_null(strstr(src, "the parent pid 42"));
    key_of(world, 43, 100, b, src);
    assert_string_not_equal(a, b);
    key_of(pmi, 42, 100, b, src);
    assert_string_equal(a, b);
    /* MPI and Slurm: their job's identity, whoever the parent */
    key_of(pmix, 42, 100, a, src);
    key_of(pmix, 43, 101, b, src);
    assert_string_equal(a, b);
    assert_string_equal(src, "PMIX_NAMESPACE");
    key_of(slurm1, 42, 100, a, src);
    key_of(slurm1, 43, 101, b, src);
    assert_string_equal(a, b);
    key_of(slurm2, 42, 100, b, src);
    assert_string_not_equal(a, b);
    key_of(slurmbatch, 42, 100, a, src); /* a batch script's processes: not one srun step */
    assert_string_equal(src, "this process (a single-process job)");
    {
        const struct job_key_env e = { .get = env_get, .ctx = (void *)none };
        assert_int_equal(job_key_of(&e, 42, 100, b, 16, src, sizeof(src)), -ENOSPC);
    }
    assert_int_equal(shmseg_name("0123456789abcdef", buf, sizeof(buf)), 0);
    assert_string_equal(buf, "DynamicProfileNpuShm-0123456789abcdef");
    assert_int_equal(shmseg_name("0123456789abcdef", buf, 20), -ENOSPC);
}

static void test_segment_dir(void **state)
{
    char shared[300], squat[340], xdg[300], got[400], want[400];
    struct stat st;

    (void)state;
    assert_int_equal(shmseg_dir(dir, NULL, NULL, got, sizeof(got)), 0);
    assert_string_equal(got, dir);
    snprintf(shared, sizeof(shared), "%s/shared", dir);
    assert_int_equal(mkdir(shared, 0700), 0);
    assert_int_equal(chmod(shared, 01777), 0);
    assert_int_equal(shmseg_dir(shared, NULL, NULL, got, sizeof(got)), 0);
    snprintf(want, sizeof(want), "%s/msmonitor-%u", shared, (unsigned)geteuid());
    assert_string_equal(got, want);
    assert_int_equal(lstat(got, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0700);
    assert_int_equal(rmdir(got), 0);
    /* world-writable without the sticky bit: anyone could rename our directory away */
    assert_int_equal(chmod(shared, 0777), 0);
    log_clear();
    assert_true(shmseg_dir(shared, NULL, NULL, got, sizeof(got)) < 0);
    assert_non_null(strstr(log_text(), "lets others replace entries in it"));
    assert_int_equal(chmod(shared, 01777), 0);
    if (geteuid() != 0) {
        rmdir(shared);
        return; /* the squat needs a second uid */
    }
    /* another uid made msmonitor-<uid> first (0777): refused, the job moves to XDG_RUNTIME_DIR */
    snprintf(squat, sizeof(squat), "%s/msmonitor-%u", shared, (unsigned)geteuid());
    assert_int_equal(mkdir(squat, 0777), 0);
    assert_int_equal(chmod(squat, 0777), 0);
    assert_int_equal(chown(squat, 65534, 65534), 0);
    snprintf(xdg, sizeof(xdg), "%s/xdg", dir);
    assert_int_equal(mkdir(xdg, 0700), 0);
    log_clear();
    assert_int_equal(shmseg_dir(shared, xdg, NULL, got, sizeof(got)), 0);
    snprintf(want, sizeof(want), "%s/msmonitor", xdg);
    assert_string_equal(got, want);
    assert_non_null(strstr(log_text(), "owned by uid 65534"));
    assert_non_null(strstr(log_text(), "have its owner or root remove it"));
    assert_non_null(strstr(log_text(), "the job's segment lives in"));
    /* no XDG_RUNTIME_DIR: the socket directory */
    assert_int_equal(shmseg_dir(shared, NULL, xdg, got, sizeof(got)), 0);
    snprintf(want, sizeof(want), "%s/msmonitor-shm", xdg);
    assert_string_equal(got, want);
    /* nothing left */
    assert_true(shmseg_dir(shared, NULL, NULL, got, sizeof(got)) < 0);
    rmdir(want);
    snprintf(want, sizeof(want), "%s/msmonitor", xdg);
    rmdir(want);
    rmdir(xdg);
    rmdir(squat);
    rmdir(shared);
}

/* A segment someone else made, or one that others may write, is never attached. */
static void test_untrusted_segment_refused(void **state)
{
    char path[300], err[1024];
    int fd = -1;
    bool creator = false;

    (void)state;
    snprintf(path, sizeof(path), "%s/DynamicProfileNpuShm-squat", dir);
    fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, SHMSEG_SIZE), 0);
    assert_int_equal(fchmod(fd, 0666), 0);
    close(fd);
    fd = -1;
    assert_int_equal(shmseg_attach(path, 60, &fd, &creator, err, sizeof(err)), -EPERM);
    assert_int_equal(fd, -1);
    assert_non_null(strstr(err, "mode 0666"));
    assert_non_null(strstr(err, "fix: remove it"));
    if (geteuid() == 0) {
        assert_int_equal(chmod(path, 0600), 0);
        assert_int_equal(chown(path, 65534, 65534), 0);
        assert_int_equal(shmseg_attach(path, 60, &fd, &creator, err, sizeof(err)), -EPERM);
        assert_non_null(strstr(err, "owned by uid 65534"));
    }
    unlink(path);
}

static void test_stale_message(void **state)
{
    char buf[1024];

    (void)state;
    assert_int_equal(shmseg_stale_message("/dev/shm/DynamicProfileNpuShm2025061408", buf, sizeof(buf)), 0);
    assert_string_equal(buf, "There may exist shared memory before this task. If no job is using it, run "
                             "`rm -f /dev/shm/DynamicProfileNpuShm*` (see `ls -la /dev/shm/DynamicProfileNpuShm*`). "
                             "Please remove: /dev/shm/DynamicProfileNpuShm2025061408");
    /* os.path.dirname() rules: no directory -> ".", trailing slashes of the head removed */
    assert_int_equal(shmseg_stale_message("X", buf, sizeof(buf)), 0);
    assert_non_null(strstr(buf, "`rm -f ./DynamicProfileNpuShm*`"));
    assert_int_equal(shmseg_stale_message("/tmp/a//X", buf, sizeof(buf)), 0);
    assert_non_null(strstr(buf, "`rm -f /tmp/a/DynamicProfileNpuShm*`"));
    assert_non_null(strstr(buf, "Please remove: /tmp/a//X"));
    assert_int_equal(shmseg_stale_message("/X", buf, sizeof(buf)), 0);
    assert_non_null(strstr(buf, "`rm -f //DynamicProfileNpuShm*`"));
    assert_int_equal(shmseg_stale_message("/dev/shm/X", buf, 40), -ENOSPC);
}

static void test_env_parsing(void **state)
{
    char why[256];

    (void)state;
    log_clear();
    assert_false(shm_mode_use_daemon(NULL, NULL, NULL, 0));
    assert_true(shm_mode_use_daemon("1", NULL, NULL, 0));
    assert_true(shm_mode_use_daemon(" 1 ", NULL, NULL, 0));
    assert_false(shm_mode_use_daemon("2", "1", NULL, 0)); /* ours wins over the alias */
    assert_null(strstr(log_text(), "deprecated"));
    assert_false(shm_mode_use_daemon("yes", NULL, NULL, 0));
    assert_non_null(strstr(log_text(), "MSMONITOR_USE_DAEMON='yes' value not valid, will be set to 0 !"));
    assert_true(shm_mode_use_daemon(NULL, "1", NULL, 0));
    assert_non_null(strstr(log_text(), "KINETO_USE_DAEMON is deprecated, use MSMONITOR_USE_DAEMON"));
    /* with a buffer the warning goes to the caller (the Python module prints it) */
    log_clear();
    assert_false(shm_mode_use_daemon("yes", NULL, why, sizeof(why)));
    assert_string_equal(why, "Environment variable MSMONITOR_USE_DAEMON='yes' value not valid, will be set to 0 !");
    assert_null(strstr(log_text(), "not valid"));
    assert_true(shm_mode_use_daemon("1", NULL, why, sizeof(why)));
    assert_string_equal(why, "");

    assert_true(shm_mode_poll_interval(NULL) == 2.0);
    assert_true(shm_mode_poll_interval("0.3") == 0.3);
    assert_true(shm_mode_poll_interval("50") == 50.0);
    assert_true(shm_mode_poll_interval("0.05") == 2.0);
    assert_true(shm_mode_poll_interval("nan") == 2.0);
    assert_true(shm_mode_poll_interval("x") == 2.0);
    assert_int_equal(shm_mode_stale_seconds(NULL), 60);
    assert_int_equal(shm_mode_stale_seconds("0"), 0);
    assert_int_equal(shm_mode_stale_seconds(" 5 "), 5);
    assert_int_equal(shm_mode_stale_seconds("-1"), 60);
    assert_int_equal(shm_mode_stale_seconds("1.5"), 60);
}

static void test_config_text(void **state)
{
    const char text[] = "\n            NPU_MONITOR_START = true \n"
                        "LOG_FILE=/a=b\n"
                        "no separator\n"
                        "K=1\r\n"
                        "K=2\n"
                        "\tEMPTY=\n"
                        "            REQUEST_TRACE_ID=7\n";
    struct kvtext kv;

    (void)state;
    assert_int_equal(kvtext_parse(text, strlen(text), &kv), 0);
    assert_int_equal(kv.n, 4);
    assert_string_equal(kvtext_get(&kv, "NPU_MONITOR_START"), "true");
    assert_null(kvtext_get(&kv, "LOG_FILE")); /* three parts: lost, like torch_npu */
    assert_string_equal(kvtext_get(&kv, "K"), "2");
    assert_string_equal(kvtext_get(&kv, "EMPTY"), "");
    assert_string_equal(kvtext_get(&kv, "REQUEST_TRACE_ID"), "7");
    kvtext_fini(&kv);
    assert_int_equal(kvtext_parse("nothing here", 12, &kv), 0);
    assert_int_equal(kv.n, 0);
    kvtext_fini(&kv);
}

static void test_config_text_key_cap(void **state)
{
    size_t cap = (KVTEXT_MAX_KEYS + 1) * 16, len = 0;
    char *text = malloc(cap);
    struct kvtext kv;

    (void)state;
    for (int i = 0; i <= KVTEXT_MAX_KEYS; i++)
        len += (size_t)snprintf(text + len, cap - len, "K%d=v\n", i);
    assert_int_equal(kvtext_parse(text, len, &kv), -E2BIG);
    kvtext_fini(&kv);
    free(text);
}

static void test_shm_roundtrip(void **state)
{
    uint8_t *shm = malloc(SHMSEG_SIZE);
    const char *text = "\n            NPU_MONITOR_START=true\n            REQUEST_TRACE_ID=7\n";
    char *got = NULL, *big;
    size_t len = 0;
    int32_t aligned = 0;

    (void)state;
    memset(shm, ' ', SHMSEG_SIZE);
    memset(shm, 0, 4);
    assert_int_equal(shmseg_time(shm), 0);
    assert_int_equal(shmseg_read(shm, &got, &len, &aligned), -ENODATA); /* freshly initialised segment */

    /* the daemon's text as delivered, the aligned step before it, the time last */
    assert_int_equal(shmseg_write(shm, text, strlen(text), 45, 0x01020304u), 0);
    assert_memory_equal(shm, "\x04\x03\x02\x01", 4); /* uint32 little-endian */
    assert_memory_equal(shm + SHMSEG_ALIGNED, "\x2d\x00\x00\x00", 4);
    assert_memory_equal(shm + SHMSEG_TEXT, text, strlen(text));
    assert_int_equal(shm[SHMSEG_TEXT + strlen(text)], ' ');
    assert_int_equal(shm[SHMSEG_SIZE - 1], ' ');
    assert_int_equal(shmseg_time(shm), 0x01020304u);
    assert_int_equal(shmseg_read(shm, &got, &len, &aligned), 0);
    assert_int_equal(aligned, 45);
    assert_int_equal(len, strlen(text)); /* the padding cut */
    assert_memory_equal(got, text, len);
    assert_int_equal(got[len], '\0');
    free(got);

    /* A shorter config overwrites the tail of a longer one with spaces; -1: none aligned. */
    assert_int_equal(shmseg_write(shm, "A=1", 3, -1, 5), 0);
    assert_int_equal(shmseg_read(shm, &got, &len, &aligned), 0);
    assert_string_equal(got, "A=1");
    assert_int_equal(aligned, -1);
    free(got);

    /* NUL padding (a segment another writer zeroed) reads like spaces. */
    memset(shm + SHMSEG_TEXT, '\0', SHMSEG_SIZE - SHMSEG_TEXT);
    memcpy(shm + SHMSEG_TEXT, "a=b", 3);
    assert_int_equal(shmseg_read(shm, &got, &len, &aligned), 0);
    assert_string_equal(got, "a=b");
    free(got);

    big = malloc(SHMSEG_SIZE);
    memset(big, 'x', SHMSEG_SIZE);
    assert_int_equal(shmseg_write(shm, big, SHMSEG_SIZE - SHMSEG_TEXT + 1, -1, 9), -E2BIG);
    assert_int_equal(shmseg_time(shm), 5); /* untouched */
    assert_int_equal(shmseg_write(shm, big, SHMSEG_SIZE - SHMSEG_TEXT, -1, 9), 0);
    free(big);
    free(shm);
}

static void seg_path(char *buf, size_t cap, const char *name)
{
    assert_true(snprintf(buf, cap, "%s/%s", dir, name) < (int)cap);
}

static int count_tmp_files(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".tmp"))
            n++;
    closedir(d);
    return n;
}

static void test_attach_or_create(void **state)
{
    char path[256], err[1024];
    int fd1 = -1, fd2 = -1;
    bool c1 = false, c2 = true;
    struct stat st;
    uint8_t head[8], tail[4];

    (void)state;
    seg_path(path, sizeof(path), "DynamicProfileNpuShm2025061408");
    assert_int_equal(shmseg_attach(path, 60, &fd1, &c1, err, sizeof(err)), 0);
    assert_true(c1);
    assert_int_equal(fstat(fd1, &st), 0);
    assert_int_equal(st.st_size, SHMSEG_SIZE);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(pread(fd1, head, sizeof(head), 0), sizeof(head));
    assert_memory_equal(head, "\0\0\0\0\xff\xff\xff\xff", 8); /* no time, aligned step -1 */
    assert_int_equal(pread(fd1, tail, sizeof(tail), SHMSEG_SIZE - 4), 4);
    assert_memory_equal(tail, "    ", 4);
    assert_int_equal(count_tmp_files(), 0);

    assert_int_equal(shmseg_attach(path, 60, &fd2, &c2, err, sizeof(err)), 0);
    assert_false(c2);
    close(fd2);
    close(fd1);
    unlink(path);

    /* Wrong size: refused, not resized. */
    fd1 = open(path, O_CREAT | O_WRONLY, 0600);
    assert_int_equal(write(fd1, "abc", 3), 3);
    close(fd1);
    assert_int_equal(shmseg_attach(path, 60, &fd2, &c2, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "size 3, expected 1048576"));
    unlink(path);

    /* A symlink is never followed. */
    assert_int_equal(symlink("/etc/passwd", path), 0);
    assert_int_equal(shmseg_attach(path, 60, &fd2, &c2, err, sizeof(err)), -ELOOP);
    unlink(path);
}

/* The stale rule compares the attaching process's /proc/<pid> ctime with the file's: a child
 * started after the file was written sees it as stale with a threshold of 0 s, and as live
 * with the default 60 s. */
static int attach_in_child(const char *path, long stale_s, char *err, size_t errcap)
{
    int pfd[2], status;
    pid_t pid;
    ssize_t n;

    assert_int_equal(pipe(pfd), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char e[1024];
        int fd;
        bool creator;
        int rc = shmseg_attach(path, stale_s, &fd, &creator, e, sizeof(e));
        if (write(pfd[1], e, strlen(e)) < 0)
            _exit(100);
        _exit(rc == 0 ? (creator ? 1 : 0) : 10 - rc);
    }
    close(pfd[1]);
    n = read(pfd[0], err, errcap - 1);
    err[n > 0 ? n : 0] = '\0';
    close(pfd[0]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void test_stale_rule(void **state)
{
    char path[256], err[1024], want[1024];
    int fd;
    bool creator = false;

    (void)state;
    seg_path(path, sizeof(path), "DynamicProfileNpuShm2020010100");
    /* A live creator (this process, holding the creator lock). */
    assert_int_equal(shmseg_attach(path, 60, &fd, &creator, err, sizeof(err)), 0);
    assert_true(creator);
    usleep(20000);
    assert_int_equal(attach_in_child(path, 0, err, sizeof(err)), 10 + ESTALE);
    assert_int_equal(shmseg_stale_message(path, want, sizeof(want)), 0);
    assert_string_equal(err, want);
    assert_int_equal(access(path, F_OK), 0); /* never removed by an attaching rank */
    assert_int_equal(attach_in_child(path, 60, err, sizeof(err)), 0); /* attached, not creator */
    close(fd);
    unlink(path);
}

/* A segment whose creator is gone (its creator lock free: killed job, or a file nobody
 * created through us) is taken over whatever its age: the rank becomes the creator, the
 * text and time are reset, one WARNING says so. Its own creator lock then protects it. */
static void test_takeover(void **state)
{
    char path[256], err[1024];
    uint8_t head[8];
    int fd;

    (void)state;
    seg_path(path, sizeof(path), "DynamicProfileNpuShm2020010102");
    fd = open(path, O_CREAT | O_RDWR, 0600);
    assert_int_equal(ftruncate(fd, SHMSEG_SIZE), 0);
    assert_int_equal(pwrite(fd, "\x05\0\0\0{\"x\": 1}", 12, 0), 12);
    close(fd);
    usleep(20000);
    log_clear();
    assert_int_equal(attach_in_child(path, 0, err, sizeof(err)), 1); /* creator by takeover */
    assert_non_null(strstr(log_text(), "took over"));
    fd = open(path, O_RDONLY);
    assert_int_equal(pread(fd, head, sizeof(head), 0), sizeof(head));
    assert_memory_equal(head, "\0\0\0\0\xff\xff\xff\xff", 8); /* re-initialised */
    close(fd);
    /* The child exited: its lock went with it, so the next one takes over again. */
    assert_int_equal(attach_in_child(path, 60, err, sizeof(err)), 1);
    unlink(path);
}

/* Several processes racing for one name: exactly one creator, everyone attached. Every
 * contender keeps its segment (and the creator its lock) until all of them have tried: a
 * creator that exited early would free its lock and a later rank would rightly take over,
 * so the test synchronises on "all attached", never on a hold time. */
static void test_creator_election(void **state)
{
    enum { N = 6 };
    char path[256];
    int go[2], done[2], release[2], creators = 0, attached = 0;
    pid_t pids[N];

    (void)state;
    seg_path(path, sizeof(path), "DynamicProfileNpuShm2020010101");
    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(done), 0);
    assert_int_equal(pipe(release), 0);
    for (int i = 0; i < N; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            char c, e[512];
            int fd;
            bool creator;
            close(go[1]);
            close(done[0]);
            close(release[1]);
            if (read(go[0], &c, 1) != 0)
                _exit(100);
            srand((unsigned)getpid());
            if (shmseg_attach(path, 60, &fd, &creator, e, sizeof(e)) != 0)
                _exit(50);
            c = creator ? 'c' : 'a';
            if (write(done[1], &c, 1) != 1)
                _exit(101);
            close(done[1]); /* EOF for the parent once every child reported or died */
            if (read(release[0], &c, 1) != 0) /* EOF: every contender has tried */
                _exit(102);
            _exit(creator ? 1 : 0);
        }
    }
    close(go[0]);
    close(done[1]);
    close(release[0]);
    close(go[1]); /* EOF releases every child at once */
    for (int got = 0; got < N;) {
        char c[N];
        ssize_t n = read(done[0], c, sizeof(c));
        if (n <= 0)
            break; /* every child died or reported: the exit statuses below say which */
        got += (int)n;
    }
    close(done[0]);
    close(release[1]);
    for (int i = 0; i < N; i++) {
        int status;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        assert_true(WIFEXITED(status));
        if (WEXITSTATUS(status) == 1)
            creators++;
        else if (WEXITSTATUS(status) == 0)
            attached++;
    }
    assert_int_equal(creators, 1);
    assert_int_equal(attached, N - 1);
    assert_int_equal(count_tmp_files(), 0);
    unlink(path);
}

/* LeakSanitizer hook (sanitizer/lsan_interface.h): the fork()ed child below exits through
 * exit() on purpose (to run the atexit finalizer); its copy of the parent's heap, with the
 * parent's threads gone, only yields false leak reports. */
static volatile int in_forked_child;
#define RACE_STEPS 2000

/* A training thread's steps as the Python module takes them: the wait-free step, else the one
 * that may wait. */
static void *race_stepper(void *arg)
{
    (void)arg;
    for (int i = 0; i < RACE_STEPS; i++)
        if (!shm_mode_step_nowait())
            assert_int_equal(shm_mode_step(), 0);
    return NULL;
}

int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void) { return in_forked_child; }

/* The whole life cycle in this process (no daemon: the poller's registration fails and the
 * thread ends): init creates the segment, a fork()ed child neither re-joins nor removes it
 * at its exit(), finalize of the joining process unlinks it. */
static void test_lifecycle_and_fork(void **state)
{
    char nosock[300], name[64], path[400], steps[500];
    struct stat sst;
    int status, sfd;
    pid_t pid;

    (void)state;
    assert_true(snprintf(nosock, sizeof(nosock), "%s/nosock", dir) < (int)sizeof(nosock));
    assert_int_equal(mkdir(nosock, 0700), 0);
    setenv("MSMONITOR_SOCKET_DIR", nosock, 1);
    setenv("MSMONITOR_SHM_DIR", dir, 1);
    setenv("MSMONITOR_LOG_PATH", dir, 1); /* the plugin log lands in the temp dir */
    unsetenv("MSMONITOR_USE_DAEMON");
    unsetenv("KINETO_USE_DAEMON");
    for (const char *const *v = (const char *const[]){ "MSMONITOR_JOB_KEY", "MASTER_PORT", "PMIX_NAMESPACE",
                                                        "OMPI_MCA_ess_base_jobid", "SLURM_STEP_ID", "WORLD_SIZE",
                                                        "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", NULL };
         *v; v++)
        unsetenv(*v);
    penv_reload();
    assert_int_equal(shm_mode_init(-1, 0), -ENOTSUP);
    assert_int_equal(shm_mode_step(), 0);
    assert_int_equal(shm_mode_step_nowait(), 1);
    setenv("MSMONITOR_USE_DAEMON", "1", 1);
    penv_reload();
    {
        const char *none[] = { NULL };
        char key[24];
        key_of(none, getppid(), getpid(), key, steps);
        assert_int_equal(shmseg_name(key, name, sizeof(name)), 0);
    }
    /* a side file others may write is refused (and left alone), the job still joins */
    assert_true(snprintf(steps, sizeof(steps), "%s/msmonitor_steps.%s", dir, name) < (int)sizeof(steps));
    sfd = open(steps, O_RDWR | O_CREAT | O_EXCL, 0600);
    assert_true(sfd >= 0);
    assert_int_equal(fchmod(sfd, 0666), 0);
    close(sfd);
    assert_int_equal(shm_mode_init(-1, 0), 0);
    assert_int_equal(shm_mode_init(-1, 0), 0); /* idempotent */
    assert_true(snprintf(path, sizeof(path), "%s/%s", dir, name) < (int)sizeof(path));
    assert_int_equal(access(path, F_OK), 0);
    assert_int_equal(stat(steps, &sst), 0);
    assert_int_equal(sst.st_mode & 0777, 0666);
    assert_int_equal(sst.st_size, 0); /* never truncated nor sized by the rank */
    for (int i = 0; i < 3; i++)
        assert_int_equal(shm_mode_step(), 0);
    /* a step that needs no wait goes without one; a new config in the segment needs one:
     * nothing is done until shm_mode_step applies it, so steps stay exact */
    {
        struct shm_mode_info di;
        int fd = open(path, O_RDWR);
        const char *stop = "NPU_MONITOR_START=false\nNPU_MONITOR_STOP=true";
        uint8_t *shm;
        assert_true(fd >= 0);
        shm = mmap(NULL, SHMSEG_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        assert_true(shm != MAP_FAILED);
        close(fd);
        shm_mode_get_info(&di);
        assert_int_equal(di.step, 4);
        assert_int_equal(shm_mode_step_nowait(), 1);
        shm_mode_get_info(&di);
        assert_int_equal(di.step, 5);
        assert_int_equal(shmseg_write(shm, stop, strlen(stop), -1, (uint32_t)time(NULL)), 0);
        assert_int_equal(shm_mode_step_nowait(), 0);
        shm_mode_get_info(&di);
        assert_int_equal(di.step, 5);
        assert_int_equal(shm_mode_step(), 0);
        shm_mode_get_info(&di);
        assert_int_equal(di.step, 6);
        assert_int_equal(shm_mode_step_nowait(), 1); /* applied: the next step goes without waiting */
        shm_mode_get_info(&di);
        assert_int_equal(di.step, 7);
        munmap(shm, SHMSEG_SIZE);
    }
    /* another thread in the state (info() holds its lock) makes the wait-free step fall back
     * to the one that waits: every step counts once, whichever took it */
    {
        struct shm_mode_info di;
        int32_t before;
        pthread_t t;
        shm_mode_get_info(&di);
        before = di.step;
        assert_int_equal(pthread_create(&t, NULL, race_stepper, NULL), 0);
        for (int i = 0; i < RACE_STEPS; i++)
            shm_mode_get_info(&di);
        assert_int_equal(pthread_join(t, NULL), 0);
        shm_mode_get_info(&di);
        assert_int_equal(di.step, before + RACE_STEPS);
    }
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        in_forked_child = 1;
        int rc = shm_mode_init(-1, 0);
        shm_mode_step();
        if (shm_mode_step_nowait() != 1) /* a no-op here */
            exit(2);
        exit(rc == -ECHILD ? 0 : 1); /* runs shm_mode_finalize via atexit: must be a no-op */
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(access(path, F_OK), 0);
    shm_mode_finalize();
    assert_int_equal(access(path, F_OK), -1);
    shm_mode_finalize(); /* idempotent */
    assert_int_equal(access(steps, F_OK), 0); /* not ours: not removed */
    unlink(steps);
    rmdir(nosock);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shm_name),          cmocka_unit_test(test_stale_message),
        cmocka_unit_test(test_segment_dir),       cmocka_unit_test(test_untrusted_segment_refused),
        cmocka_unit_test(test_env_parsing),       cmocka_unit_test(test_config_text),
        cmocka_unit_test(test_config_text_key_cap),
        cmocka_unit_test(test_shm_roundtrip),     cmocka_unit_test(test_attach_or_create),
        cmocka_unit_test(test_stale_rule),        cmocka_unit_test(test_takeover),
        cmocka_unit_test(test_creator_election),
        cmocka_unit_test(test_lifecycle_and_fork),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
