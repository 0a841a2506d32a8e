/* bench_cluster: the cluster view's figures next to baselines measured in the same run:
 *   1. the slow-rank merge (slowrank_merge, with the wait/transfer split) for 1000 ranks x 100
 *      synchronised steps vs the pre-split wall-only merge (legacy_merge.c) and one qsort of
 *      the same 100k step times;
 *   2. daemon memory of the step windows for 1000 ranks (RSS growth) vs the bare store;
 *   3. getStatus fan-out to 64 loopback daemons  vs one daemon (needs argv[1] = dynolog, and
 *      argv[2] = dyno for the whole command; run inside tests/e2e/run_netns.sh so 127.0.0.2-65
 *      and the port are ours). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli_gather.h"
#include "cli/cmd_steps.h"
#include "legacy_merge.h"
#include "cli/hosts.h"
#include "cli/rpc_client.h"
#include "contract/cjx.h"
#include "daemon/ipc/steps.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t xr(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int dcmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void bench_merge(void)
{
    enum { R = 1000, S = 100 };
    struct slowrank_sample *s = malloc(sizeof(*s) * R * S);
    struct slowrank_in *in = calloc(R, sizeof(*in));
    double *w = malloc(sizeof(*w) * R * S);
    for (int r = 0; r < R; r++) {
        in[r] = (struct slowrank_in){ "127.0.0.2", r, 1000 + r, 0, &s[r * S], S };
        for (int k = 0; k < S; k++) {
            /* synchronised: every rank waits for rank 517's 20 % longer compute from step 51 */
            uint64_t c = 12000000 + xr() % 200000, t = 2000000, wt = xr() % 500000;
            bool slow = k >= 50;
            if (r == 517 && slow)
                c = c * 12 / 10;
            else if (slow)
                wt += 2400000;
            s[r * S + k] = (struct slowrank_sample){ k + 1, 12500000 + t + 300000 + (slow ? 2400000 : 0), c,
                                                     wt + t, 0, 300000, wt, t };
            w[r * S + k] = (double)s[r * S + k].wall;
        }
    }
    struct slowrank_rule rule = SLOWRANK_RULE_DEFAULT;
    struct slowrank_result res;
    double best = 1e9, base = 1e9, old = 1e9;
    for (int it = 0; it < 5; it++) {
        double t0 = now_s();
        slowrank_merge(in, R, &rule, &res);
        double t1 = now_s();
        if (t1 - t0 < best)
            best = t1 - t0;
        if (it == 4)
            printf("merge: %zu slow rank(s) found (rank %d, %s)\n", res.nslow,
                   res.nslow ? in[res.slow[0].rank_index].rank : -1,
                   res.nslow ? slowrank_cause_name(res.slow[0].cause) : "-");
        slowrank_result_fini(&res);
        t0 = now_s();
        legacy_merge(in, R, &rule, &res);
        t1 = now_s();
        if (t1 - t0 < old)
            old = t1 - t0;
        if (it == 4)
            printf("merge (before the split, wall only): %zu slow rank(s) found\n", res.nslow);
        slowrank_result_fini(&res);
        double *c = malloc(sizeof(*c) * R * S);
        memcpy(c, w, sizeof(*c) * R * S);
        t0 = now_s();
        qsort(c, R * S, sizeof(*c), dcmp);
        t1 = now_s();
        free(c);
        if (t1 - t0 < base)
            base = t1 - t0;
    }
    printf("dyno steps merge, 1000 ranks x 100 steps, with wait/transfer: %.1f ms (baseline: today's wall-only "
           "merge: %.1f ms; one qsort of the 100000 step times: %.1f ms)\n",
           best * 1e3, old * 1e3, base * 1e3);
    free(s);
    free(in);
    free(w);
}

static long rss_kib(void)
{
    long pages = 0, res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return -1;
    if (fscanf(f, "%ld %ld", &pages, &res) != 2)
        res = 0;
    fclose(f);
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static void bench_memory(void)
{
    long before = rss_kib();
    struct steps_store *st = NULL;
    if (steps_create(&st) != 0)
        return;
    long bare = rss_kib();
    char buf[4096];
    for (int r = 0; r < 1000; r++) {
        for (int b = 0; b < STEPS_WINDOW / 16; b++) {
            int n = snprintf(buf, sizeof(buf), "{\"deviceId\":-1,\"duration\":1,\"kind\":\"StepSummary\",\"pid\":%d,"
                             "\"rank\":%d,\"steps\":[", 1000 + r, r);
            for (int k = 0; k < 16; k++)
                n += snprintf(buf + n, sizeof(buf) - (size_t)n, "%s{\"comm\":2000000,\"compute\":12000000,"
                              "\"host\":300000,\"memcpy\":0,\"start\":%d,\"step\":%d,\"wall\":14300000}",
                              k ? "," : "", b * 16 + k, b * 16 + k + 1);
            n += snprintf(buf + n, sizeof(buf) - (size_t)n, "],\"timestamp\":1}");
            cJSON *msg = NULL;
            if (cjx_parse(buf, (size_t)n, 10, &msg) == 0)
                steps_take(st, NULL, msg, 1, 1, NULL);
            cJSON_Delete(msg);
        }
    }
    long after = rss_kib();
    size_t nr;
    uint64_t a, b;
    steps_counters(st, &nr, &a, &b);
    printf("daemon step windows, %zu ranks x %d steps: RSS +%ld KiB (%.1f KiB/rank; baseline: empty store +%ld KiB, "
           "process %ld KiB)\n", nr, STEPS_WINDOW, after - bare, (double)(after - bare) / (double)nr, bare - before,
           before);
    steps_destroy(st);
}

static double run_dyno(const char *dyno, const char *hosts, const char *port)
{
    double t0 = now_s();
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr))
            _exit(126);
        execl(dyno, dyno, "--hostname", hosts, "--port", port, "status", "--json", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? now_s() - t0 : -1;
}

static void bench_fanout(const char *dynolog, const char *dyno)
{
    enum { N = 64 };
    pid_t pids[N];
    char dirs[N][64];
    int port = 20000 + (int)(getpid() % 20000);
    char ports[16], addr[N][32];
    snprintf(ports, sizeof(ports), "%d", port);
    fflush(stdout); /* the children must not inherit (and flush) our buffered lines */
    for (int i = 0; i < N; i++) {
        snprintf(addr[i], sizeof(addr[i]), "127.0.0.%d", i + 2);
        snprintf(dirs[i], sizeof(dirs[i]), "/tmp/bcl.XXXXXX");
        if (!mkdtemp(dirs[i]))
            return;
        pids[i] = fork();
        if (pids[i] == 0) {
            setenv("HOME", dirs[i], 1);
            setenv("MSMONITOR_SOCKET_DIR", dirs[i], 1);
            if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr))
                _exit(126);
            execl(dynolog, dynolog, "--port", ports, "--rpc_bind_address", addr[i], "--enable_ipc_monitor",
                  (char *)NULL);
            _exit(127);
        }
    }
    struct hosts h, one;
    hosts_init(&h);
    hosts_init(&one);
    char err[256];
    for (int i = 0; i < N; i++)
        hosts_add_list(&h, addr[i], strlen(addr[i]), err, sizeof(err));
    hosts_add_list(&one, addr[0], strlen(addr[0]), err, sizeof(err));
    static const char body[] = "{\"fn\":\"getStatus\"}";
    struct cli_reply r[N];
    struct cli_targets t = { &h, (uint16_t)port, 5, 32, NULL }, t1 = { &one, (uint16_t)port, 5, 32, NULL };
    /* wait until every daemon answers */
    for (int tries = 0; tries < 200; tries++) {
        cli_gather(&t, body, sizeof(body) - 1, r);
        int ok = 0;
        for (int i = 0; i < N; i++)
            ok += !r[i].failed;
        cli_gather_fini(r, N);
        if (ok == N)
            break;
        usleep(50000);
    }
    double best = 1e9, base = 1e9;
    int ok = 0;
    for (int it = 0; it < 10; it++) {
        double t0 = now_s();
        cli_gather(&t, body, sizeof(body) - 1, r);
        double t2 = now_s();
        ok = 0;
        for (int i = 0; i < N; i++)
            ok += !r[i].failed;
        cli_gather_fini(r, N);
        if (t2 - t0 < best)
            best = t2 - t0;
        t0 = now_s();
        cli_gather(&t1, body, sizeof(body) - 1, r);
        t2 = now_s();
        cli_gather_fini(r, 1);
        if (t2 - t0 < base)
            base = t2 - t0;
    }
    printf("status fan-out to %d loopback daemons (--parallel 32): %.1f ms, %d replied (baseline: one daemon %.2f ms)\n",
           N, best * 1e3, ok, base * 1e3);
    if (dyno) {
        double b64 = 1e9, b1 = 1e9;
        for (int it = 0; it < 5; it++) {
            fflush(stdout);
            double x = run_dyno(dyno, "127.0.0.[2-65]", ports), y = run_dyno(dyno, "127.0.0.2", ports);
            if (x >= 0 && x < b64)
                b64 = x;
            if (y >= 0 && y < b1)
                b1 = y;
        }
        printf("`dyno --hostname 127.0.0.[2-65] status --json` (process start to exit, merged): %.1f ms "
               "(baseline: the same for one host %.1f ms)\n", b64 * 1e3, b1 * 1e3);
    }
    for (int i = 0; i < N; i++)
        kill(pids[i], SIGTERM);
    for (int i = 0; i < N; i++) {
        waitpid(pids[i], NULL, 0);
        char cmd[4200];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dirs[i]);
        if (system(cmd) != 0)
            break;
    }
    hosts_fini(&h);
    hosts_fini(&one);
}

int main(int argc, char **argv)
{
    bench_merge();
    bench_memory();
    if (argc > 1)
        bench_fanout(argv[1], argc > 2 ? argv[2] : NULL);
    else
        printf("status fan-out: skipped (pass the dynolog [and dyno] paths; run inside tests/e2e/run_netns.sh)\n");
    return 0;
}
