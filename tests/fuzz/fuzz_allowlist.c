/* fuzz_allowlist: the daemon's --allowed_log_dirs check with roots set, on the canonical text
 * it hands out (cfgcanon, then rpc_check_log_dirs). A private tree: <tmp>/ok is the root,
 * <tmp>/ok/link points to <tmp>/out. The first input byte's low bit picks npu-monitor ('0')
 * or trace ('1') rules; '@' in the rest stands for <tmp>.
 * Invariants: a refusal is one line; an accepted log file, walked component by component the
 * way the kernel would (`..` after the symlink leaves ok), lies at or below <tmp>/ok. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/pathnorm.h"
#include "contract/cfgcanon.h"
#include "contract/cfgkeys.h"
#include "contract/kvtext.h"
#include "daemon/rpc/rpc_methods.h"

const char *const fuzz_seeds[] = {
    "0NPU_MONITOR_START=true\nNPU_MONITOR_LOG_FILE=@/ok/run/db\n",
    "1ACTIVITIES_LOG_FILE=@/ok/link/../../out/t.json\n",
    "1ACTIVITIES_LOG_FILE=@/ok/../out/t.json\n",
    "1ACTIVITIES_LOG_FILE=@/ok/link/t.json\n",
    "1ACTIVITIES_LOG_FILE=@/ok/./a/../b.json\nACTIVITIES_DURATION_MSECS=1\n",
    "0NPU_MONITOR_LOG_FILE=relative/db\n",
    "1PROFILE_START_STEP=1\n",
    "1ACTIVITIES_LOG_FILE=@/ok/t.json\nACTIVITIES_LOG_FILE=/etc/x.json#=",
};
const size_t fuzz_nseeds = sizeof(fuzz_seeds) / sizeof(fuzz_seeds[0]);

static char tmp[256];
static struct pathnorm_roots roots;

static void cleanup(void)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/ok/link", tmp);
    unlink(p);
    snprintf(p, sizeof(p), "%s/ok", tmp);
    rmdir(p);
    snprintf(p, sizeof(p), "%s/out", tmp);
    rmdir(p);
    rmdir(tmp);
}

static void setup(void)
{
    char p[512], err[256];
    snprintf(tmp, sizeof(tmp), "/tmp/fuzz_allow.%d", (int)getpid());
    snprintf(p, sizeof(p), "%s/ok", tmp);
    if ((mkdir(tmp, 0700) != 0 && errno != EEXIST) || (mkdir(p, 0700) != 0 && errno != EEXIST))
        abort();
    snprintf(p, sizeof(p), "%s/out", tmp);
    if (mkdir(p, 0700) != 0 && errno != EEXIST)
        abort();
    snprintf(p, sizeof(p), "%s/ok/link", tmp);
    if (symlink("../out", p) != 0 && errno != EEXIST)
        abort();
    char *real = realpath(tmp, NULL);
    if (!real)
        abort();
    snprintf(tmp, sizeof(tmp), "%s", real);
    free(real);
    snprintf(p, sizeof(p), "%s/ok", tmp);
    if (pathnorm_roots_parse(p, &roots, err, sizeof(err)) != 0)
        abort();
    atexit(cleanup);
}

/* Would any component of path, outside our tree, be a symlink on this machine? Then the
 * kernel's answer depends on the machine, and the oracle below does not apply. */
static int foreign_links(const char *path)
{
    char pre[PATHNORM_MAX];
    size_t n = strlen(path);
    if (n >= sizeof(pre))
        return 1;
    for (size_t i = 1; i <= n; i++) {
        if (i < n && path[i] != '/')
            continue;
        memcpy(pre, path, i);
        pre[i] = '\0';
        if (strncmp(pre, tmp, strlen(tmp)) == 0)
            return 0;
        struct stat st;
        if (lstat(pre, &st) == 0 && S_ISLNK(st.st_mode))
            return 1;
    }
    return 0;
}

/* The kernel's walk, knowing the one symlink of our tree. */
static int inside(const char *path)
{
    char cur[PATHNORM_MAX * 2] = "", link[600], ok[600];
    snprintf(link, sizeof(link), "%s/ok/link", tmp);
    snprintf(ok, sizeof(ok), "%s/ok", tmp);
    for (const char *s = path; *s;) {
        while (*s == '/')
            s++;
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 0)
            break;
        if (n == 2 && s[0] == '.' && s[1] == '.') {
            char *slash = strrchr(cur, '/');
            if (slash)
                *slash = '\0';
        } else if (!(n == 1 && s[0] == '.')) {
            size_t l = strlen(cur);
            if (l + 1 + n >= sizeof(cur))
                return 1; /* too long for the resolver anyway */
            cur[l] = '/';
            memcpy(cur + l + 1, s, n);
            cur[l + 1 + n] = '\0';
            if (strcmp(cur, link) == 0)
                snprintf(cur, sizeof(cur), "%s/out", tmp);
        }
        s += n;
    }
    size_t ol = strlen(ok);
    return strncmp(cur, ok, ol) == 0 && (cur[ol] == '\0' || cur[ol] == '/');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    char *text = NULL, *canon = NULL, why[PATHNORM_MAX * 2 + 256];
    size_t clen = 0, n = 0;
    struct kvtext kv;
    if (!ready) {
        setup();
        ready = 1;
    }
    log_set_level(LOG_LVL_FATAL);
    if (size == 0)
        return 0;
    int trace = data[0] & 1;
    /* '@' stands for the tree, so seeds and mutations aim at it */
    text = malloc(size * (strlen(tmp) + 1) + 1);
    if (!text)
        abort();
    for (size_t i = 1; i < size; i++) {
        if (data[i] == '@') {
            memcpy(text + n, tmp, strlen(tmp));
            n += strlen(tmp);
        } else {
            text[n++] = (char)data[i];
        }
    }
    if (cfgcanon_text(text, n, &canon, &clen, why, sizeof(why)) != 0)
        goto out;
    int rc = rpc_check_log_dirs(&roots, canon, clen, trace, why, sizeof(why));
    if (rc != 0) {
        if (rc != -EACCES || strchr(why, '\n'))
            abort();
        goto out;
    }
    if (kvtext_parse(canon, clen, &kv) != 0)
        abort();
    const char *files[2] = { kvtext_get(&kv, CFGKEY_NPU_MONITOR_LOG_FILE),
                             kvtext_get(&kv, CFGKEY_ACTIVITIES_LOG_FILE) };
    if (trace && !(files[1] && files[1][0]))
        abort(); /* a trace must name its file when roots are set */
    for (int i = 0; i < 2; i++) {
        if (!files[i] || !files[i][0])
            continue;
        if (files[i][0] != '/' || (!foreign_links(files[i]) && !inside(files[i]))) {
            fprintf(stderr, "fuzz_allowlist: accepted '%s' outside %s/ok\n", files[i], tmp);
            abort();
        }
    }
    kvtext_fini(&kv);
out:
    free(canon);
    free(text);
    return 0;
}
