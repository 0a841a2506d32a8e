/* fuzz_dyn_segment: what a rank does with the dyno-mode segment's bytes (docs/python.md):
 * dyn_shm_read on a whole mapped-size segment, then the nputrace window (tracewin_rule) and
 * its options (tracewin_parse) of whatever config came out. The first input byte picks the
 * rank (low 2 bits), the step and where ACTIVITIES_LOG_FILE points (always inside a private
 * sandbox: missing, a directory, a file, a symlink), since tracewin_parse creates directories.
 * Invariants: no fault; an armed window starts after the current step and stop >= start;
 * tracewin's log_dir is NUL-terminated inside the sandbox. */
#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "contract/kvtext.h"
#include "plugin/control/dynamic.h"
#include "plugin/control/tracewin.h"

const char *const fuzz_seeds[] = {
    "\x05{\"ACTIVITIES_ITERATIONS\": \"2\", \"ACTIVITIES_LOG_FILE\": \"/tmp/x\", \"PROFILE_START_STEP\": \"7\", \"is_valid\": true}",
    "\x01{\"PROFILE_IS_RANK\": \"true\", \"PROFILE_RANK_LIST\": \"0, 1,3\", \"ACTIVITIES_LOG_FILE\": \"d\", \"is_valid\": true}",
    "\x22{\"PROFILE_START_STEP\": \"-1\", \"ACTIVITIES_ITERATIONS\": \"2147483647\", \"PROFILE_ACTIVITIES\": \"CPU,NPU\", \"PROFILE_ANALYSE\": \"true\", \"PROFILE_EXPORT_TYPE\": \"db\", \"is_valid\": 1}",
    "\x40{\"NPU_MONITOR_START\": \"true\", \"NPU_MONITOR_STOP\": false, \"REPORT_INTERVAL_S\": 1.5, \"is_valid\": true}   ",
    "\x03{\"PROFILE_START_STEP\": \"x\", \"ACTIVITIES_ITERATIONS\": \" 3 \", \"is_valid\": true}\0\0\0",
    "\x04{\"a\": {\"nested\": 1}, \"is_valid\": true}",
    "\x7f{\"PROFILE_START_STEP\": \"99999999999\", \"k\": \"\\u0000\\u001b[2J\", \"is_valid\": \"yes\"}",
};
const size_t fuzz_nseeds = sizeof(fuzz_seeds) / sizeof(fuzz_seeds[0]);

static uint8_t *seg;
static char sandbox[64];
static size_t used; /* bytes of seg[4..] written by the previous input */

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path) == 0 ? 0 : 0; /* best effort */
}

static void cleanup(void)
{
    (void)nftw(sandbox, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static int setup(void)
{
    char p[128];
    FILE *f;

    seg = malloc(DYN_SHM_SIZE);
    snprintf(sandbox, sizeof(sandbox), "/tmp/fuzz_dyn_XXXXXX");
    if (!seg || !mkdtemp(sandbox))
        return -1;
    memset(seg, ' ', DYN_SHM_SIZE);
    snprintf(p, sizeof(p), "%s/dir", sandbox);
    (void)mkdir(p, 0700);
    snprintf(p, sizeof(p), "%s/file", sandbox);
    f = fopen(p, "w");
    if (f)
        fclose(f);
    snprintf(p, sizeof(p), "%s/link", sandbox);
    if (symlink("/", p) != 0)
        return -1;
    log_set_level(LOG_LVL_FATAL);
    atexit(cleanup);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const where[] = { "dir", "file", "link", "missing/sub" };
    struct kvtext kv;
    struct window_state t = { .phase = WINDOW_CLOSED, .start = -1, .stop = -1 };
    struct tracewin_cfg *c;
    char logf[128];
    bool valid;
    int32_t rank, step;
    int rc;

    if (!seg && setup() != 0)
        abort();
    if (size == 0)
        return 0;
    rank = data[0] & 3;
    step = (int32_t)(data[0] >> 2) - 2;
    data++;
    size--;
    if (size > DYN_SHM_SIZE - 4)
        size = DYN_SHM_SIZE - 4;
    memset(seg + 4, ' ', used);
    memcpy(seg + 4, data, size);
    used = size;
    rc = dyn_shm_read(seg, &kv, &valid);
    if (rc != 0 && kv.n != 0)
        abort();
    if (rc == 0) {
        for (size_t i = 0; i < kv.n; i++)
            if (strcmp(kv.keys[i], "ACTIVITIES_LOG_FILE") == 0) {
                snprintf(logf, sizeof(logf), "%s/%s", sandbox, where[(step + 2) & 3]);
                kv.values[i] = logf; /* never a directory outside the sandbox */
            }
        rc = tracewin_rule(&kv, rank, step, &t);
        if (rc != 1 && rc != 0 && rc != -EINVAL && rc != -ERANGE)
            abort();
        if (rc == 1 && (t.phase != WINDOW_ARMED || t.start <= step || t.stop < t.start))
            abort();
        c = malloc(sizeof(*c));
        if (c && tracewin_parse(&kv, c) == 0 &&
            (!memchr(c->log_dir, '\0', sizeof(c->log_dir)) || strncmp(c->log_dir, sandbox, strlen(sandbox)) != 0))
            abort();
        free(c);
    }
    kvtext_fini(&kv);
    return 0;
}
