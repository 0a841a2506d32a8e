/* plog: creates the plugin's log directory and per-process file once and points the shared
 * logger (common/log.h) at it. The host process's stderr only sees ERROR lines and the
 * one-line notice of where the log goes (the plugin is a guest: quiet by default). */
#include "plugin/plog.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/logesc.h"
#include "plugin/penv.h"

static pthread_once_t plog_once = PTHREAD_ONCE_INIT;
static char plog_file[PATH_MAX];

static void plog_stderr(const char *text)
{
    ssize_t w = write(2, text, strlen(text));
    (void)w;
}

static int plog_make_dir(char *dir, size_t cap)
{
    const char *base = penv_get(PENV_LOG_PATH);
    char cwd[PATH_MAX];
    int n;

    if (!base || !base[0]) {
        if (!getcwd(cwd, sizeof(cwd)))
            return -errno;
        base = cwd;
    }
    n = snprintf(dir, cap, "%s/msmonitor_log", base);
    if (n < 0 || (size_t)n >= cap)
        return -ENAMETOOLONG;
    if (mkdir(dir, 0750) != 0 && errno != EEXIST)
        return -errno;
    /* a msmonitor_log planted as a symlink (or owned by someone else) would send a root
     * rank's log wherever the planter likes */
    struct stat st;
    if (lstat(dir, &st) != 0)
        return -errno;
    if (!S_ISDIR(st.st_mode) || (st.st_uid != geteuid() && st.st_uid != 0))
        return -EPERM;
    return access(dir, W_OK | X_OK) == 0 ? 0 : -errno;
}

static void plog_do_init(void)
{
    char dir[PATH_MAX] = "", line[PATH_MAX + 128];
    enum log_level lvl = LOG_LVL_INFO;
    const char *lvl_text = penv_get(PENV_LOG_LEVEL);
    struct tm tm;
    time_t now = time(NULL);
    int fd, n;

    /* Remote config values reach our lines (docs/security.md, "Local: the rank trusts only
     * its daemon"): escaped, like the daemon's, both on stderr and in the file. */
    log_set_escape(1);
    if (lvl_text && lvl_text[0] && log_parse_level(lvl_text, &lvl) != 0) {
        char esc[128];
        snprintf(line, sizeof(line), "[WARNING] [%d] invalid MSMONITOR_LOG_LEVEL '%s', using INFO\n",
                 (int)getpid(), logesc(lvl_text, strlen(lvl_text), esc, sizeof(esc)));
        plog_stderr(line);
        lvl = LOG_LVL_INFO;
    }
    log_set_level(lvl);

    if (plog_make_dir(dir, sizeof(dir)) != 0)
        goto invalid;
    localtime_r(&now, &tm);
    n = snprintf(plog_file, sizeof(plog_file), "%s/msmonitor_%04d%02d%02d-%02d%02d%02d.%d.log", dir,
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                 (int)getpid());
    if (n < 0 || (size_t)n >= sizeof(plog_file))
        goto invalid;
    /* O_NOFOLLOW + O_EXCL: never through a planted symlink; a file that already exists (same
     * second, same pid) is appended to only when it is a regular file of ours, and is never
     * chmod'ed: fchmod only the file we just created */
    fd = open(plog_file, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0640);
    if (fd >= 0) {
        (void)fchmod(fd, 0640); /* umask may have narrowed it; never widen beyond 0640 */
    } else if (errno == EEXIST) {
        struct stat st;
        fd = open(plog_file, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
        if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid())) {
            close(fd);
            fd = -1;
        }
    }
    if (fd < 0)
        goto invalid;
    snprintf(line, sizeof(line), "[INFO] [%d] msMonitor log will record to %s\n", (int)getpid(), dir);
    plog_stderr(line);
    log_set_file(fd, LOG_LVL_ERROR);
    return;

invalid:
    plog_file[0] = '\0';
    snprintf(line, sizeof(line), "[ERROR] LOG_PATH: %s of Msmonitor is invalid.\n", dir);
    plog_stderr(line);
}

void plog_init(void)
{
    pthread_once(&plog_once, plog_do_init);
}

const char *plog_path(void)
{
    return plog_file;
}
