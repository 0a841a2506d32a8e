/* Unit tests of sender identity across pid namespaces (peer.c) and what is built on it: the
 * registry's node pids (equal container pids in two namespaces, --pids resolution), the data
 * router's speaks-for rule with a container's pid, and the PluginHealth pod fields. The
 * namespace cases make a real pid namespace (unshare(CLONE_NEWPID), root only; skipped else). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "contract/cjx.h"
#include "daemon/ipc/data_sink.h"
#include "daemon/ipc/health.h"
#include "daemon/ipc/peer.h"
#include "daemon/ipc/registry.h"
#include "daemon/ipc/status.h"

static void test_parse_stat(void **state)
{
    (void)state;
    int32_t ppid = 0;
    char st = 0;
    const char *t = "4242 (python3 (a) b) S 17 4242 4242 0 -1 4194560";
    assert_int_equal(peer_parse_stat(t, strlen(t), &ppid, &st), 0);
    assert_int_equal(ppid, 17);
    assert_int_equal(st, 'S');
    const char *z = "9 (x) Z 1 9";
    assert_int_equal(peer_parse_stat(z, strlen(z), &ppid, &st), 0);
    assert_int_equal(st, 'Z');
    assert_int_equal(peer_parse_stat("9 (x", 4, &ppid, &st), -EINVAL);
    assert_int_equal(peer_parse_stat("9 (x) S", 7, &ppid, &st), -EINVAL);
    assert_int_equal(peer_parse_stat("9 (x) S q", 9, &ppid, &st), -EINVAL);
    assert_int_equal(peer_parse_stat("9 (x) S 99999999999 1", 21, &ppid, &st), -EINVAL);
    /* the view's end, not the NUL */
    assert_int_equal(peer_parse_stat("9 (x) S 12 3", 9, &ppid, &st), 0);
    assert_int_equal(ppid, 1);
}

/* A child that sleeps until killed, with the given extra environment entry. */
static pid_t sleeper(const char *env)
{
    pid_t p = fork();
    if (p == 0) {
        char *argv[] = { "sleep", "600", NULL };
        char *envp[] = { (char *)env, NULL };
        execve("/bin/sleep", argv, envp);
        _exit(127);
    }
    return p;
}

static void reap(pid_t p)
{
    kill(p, SIGKILL);
    waitpid(p, NULL, 0);
}

static void test_same_namespace_and_cache(void **state)
{
    (void)state;
    struct peer_cache *c = NULL;
    struct peer_id id;
    struct peer_counters pc;
    struct podid_self me;
    struct podid_cgroup cg;
    pid_t child = sleeper("POD_NAME=trainer-x-0");

    assert_int_equal(peer_cache_create("/proc", 4, &c), 0);
    assert_int_equal(peer_lookup(c, (int32_t)getpid(), &id), 0);
    assert_int_equal(id.pid, getpid());
    assert_int_equal(id.ns_pid, getpid());
    assert_int_equal(id.depth, 0);
    assert_true(id.pidns == 0 || id.pidns == peer_own_pidns(c));
    assert_false(id.exited);
    assert_int_equal(peer_lookup(c, (int32_t)getpid(), &id), 0);
    peer_get_counters(c, &pc);
    assert_int_equal(pc.misses, 1);
    assert_int_equal(pc.hits, 1);
    /* a sender speaks for itself and a descendant, not for its parent */
    assert_int_equal(peer_lookup(c, (int32_t)getpid(), &id), 0);
    int32_t node = 0;
    assert_true(peer_speaks_for(c, &id, (int32_t)getpid(), &node));
    assert_int_equal(node, getpid());
    assert_true(peer_speaks_for(c, &id, (int32_t)child, &node));
    assert_int_equal(node, child);
    assert_false(peer_speaks_for(c, &id, (int32_t)getppid(), &node));
    assert_false(peer_speaks_for(c, &id, 0, &node));
    assert_false(peer_speaks_for(c, &id, -5, &node));
    /* a process that reports nothing is named by its environment (read once) */
    for (int i = 0; i < 2000; i++) { /* execve done: the environment is the new one */
        char path[64], buf[64] = "";
        snprintf(path, sizeof(path), "/proc/%d/environ", (int)child);
        int fd = open(path, O_RDONLY);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
        if (fd >= 0)
            close(fd);
        if (n > 0 && strncmp(buf, "POD_NAME=", 9) == 0)
            break;
        usleep(1000);
    }
    assert_int_equal(peer_self(c, (int32_t)child, &me, &cg), -ENOENT); /* no entry yet */
    assert_int_equal(peer_lookup(c, (int32_t)child, &id), 0);
    assert_int_equal(peer_self(c, (int32_t)child, &me, &cg), 0);
    assert_string_equal(me.v[PODID_POD], "trainer-x-0");
    /* a report wins; a hostname names no pod of a process on the node */
    struct podid_self rep = { 0 };
    assert_int_equal(podid_self_set(&rep, PODID_POD, "some-host", 9), 0);
    rep.pod_from_hostname = true;
    assert_int_equal(peer_set_self(c, (int32_t)child, &rep), 0);
    assert_int_equal(peer_self(c, (int32_t)child, &me, &cg), 0);
    assert_string_equal(me.v[PODID_POD], "");
    /* exit: gone at once (the pidfd), a zombie included; the entry answers once more */
    assert_false(peer_gone(c, (int32_t)child));
    kill(child, SIGKILL);
    siginfo_t si;
    waitid(P_PID, (id_t)child, &si, WEXITED | WNOWAIT); /* exited, not reaped: a zombie */
    assert_true(peer_gone(c, (int32_t)child));
    assert_int_equal(peer_lookup(c, (int32_t)child, &id), 0);
    assert_true(id.exited);
    waitpid(child, NULL, 0);
    assert_true(peer_gone(NULL, (int32_t)child));
    assert_int_equal(peer_gc(c), 1);
    assert_int_equal(peer_lookup(c, (int32_t)child, &id), -ESRCH);
    /* the cache is bounded: the least recently used entry makes room */
    pid_t kids[6];
    for (int i = 0; i < 6; i++) {
        kids[i] = sleeper("X=1");
        assert_int_equal(peer_lookup(c, (int32_t)kids[i], &id), 0);
    }
    peer_get_counters(c, &pc);
    assert_true(pc.entries <= 4 && pc.evicted >= 2);
    for (int i = 0; i < 6; i++)
        reap(kids[i]);
    assert_int_equal(peer_lookup(c, 0, &id), -EINVAL);
    peer_cache_destroy(c);
}

/* A pid namespace of its own: a holder that unshares, and its two children (inner pids 1 and 2;
 * 2 is 1's child). Their node pids come back through a pipe. false when not permitted. */
struct ns_kids {
    pid_t holder;
    int32_t node[2];
};

static void drop_ns(struct ns_kids *k);

static bool make_ns(struct ns_kids *k)
{
    int p[2];
    if (geteuid() != 0 || pipe(p) != 0)
        return false;
    k->holder = fork();
    if (k->holder == 0) {
        close(p[0]);
        if (unshare(CLONE_NEWPID) != 0)
            _exit(2);
        pid_t one = fork(); /* inner pid 1 */
        if (one == 0) {
            pid_t two = fork(); /* inner pid 2, a child of 1 */
            if (two == 0)
                for (;;)
                    pause();
            for (;;)
                pause();
        }
        int32_t n = (int32_t)one;
        (void)!write(p[1], &n, sizeof(n));
        for (;;)
            pause();
    }
    close(p[1]);
    int32_t one = 0;
    bool ok = read(p[0], &one, sizeof(one)) == sizeof(one) && one > 0;
    close(p[0]);
    if (!ok) {
        kill(k->holder, SIGKILL);
        waitpid(k->holder, NULL, 0);
        return false;
    }
    k->node[0] = one;
    k->node[1] = 0;
    /* the child of inner 1, from the node's side */
    for (int i = 0; i < 2000 && !k->node[1]; i++) {
        char path[64], buf[64] = "";
        snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)one, (int)one);
        FILE *f = fopen(path, "r");
        if (f) {
            if (fgets(buf, sizeof(buf), f))
                k->node[1] = (int32_t)strtol(buf, NULL, 10);
            fclose(f);
        }
        if (!k->node[1])
            usleep(1000);
    }
    if (!k->node[1])
        drop_ns(k);
    return k->node[1] > 0;
}

static void drop_ns(struct ns_kids *k)
{
    kill(k->node[0], SIGKILL); /* the namespace's init: the kernel takes the rest */
    kill(k->holder, SIGKILL);
    waitpid(k->holder, NULL, 0);
}

static void test_other_namespace(void **state)
{
    (void)state;
    struct ns_kids k;
    struct peer_cache *c = NULL;
    struct peer_id one, two;
    int32_t node = 0;

    if (!make_ns(&k)) {
        skip();
        return;
    }
    assert_int_equal(peer_cache_create("/proc", 0, &c), 0);
    assert_int_equal(peer_lookup(c, k.node[0], &one), 0);
    assert_int_equal(one.depth, 1);
    assert_int_equal(one.ns_pid, 1);
    assert_int_equal(peer_lookup(c, k.node[1], &two), 0);
    assert_int_equal(two.ns_pid, 2);
    assert_true(one.pidns != 0 && one.pidns == two.pidns && one.pidns != peer_own_pidns(c));
    /* in the sender's namespace: itself, its descendant (found by the node's walk), nothing else */
    assert_true(peer_speaks_for(c, &one, 1, &node));
    assert_int_equal(node, k.node[0]);
    assert_true(peer_speaks_for(c, &one, 2, &node));
    assert_int_equal(node, k.node[1]);
    assert_false(peer_speaks_for(c, &two, 1, &node));        /* its parent */
    assert_false(peer_speaks_for(c, &one, 3, &node));        /* nobody */
    assert_false(peer_speaks_for(c, &one, (int32_t)getpid(), &node)); /* a node pid is not its own */
    /* the node's numbers of a container process's lineage */
    int32_t lin[4];   /* as many as the process sent: its container's pids stop at its init */
    assert_int_equal(peer_lineage(c, k.node[1], lin, 2), 2);
    assert_int_equal(lin[0], k.node[1]);
    assert_int_equal(lin[1], k.node[0]);
    peer_cache_destroy(c);
    drop_ns(&k);
}

static size_t fixed_lineage(void *arg, int32_t node, int32_t *ret, size_t cap)
{
    (void)arg;
    ret[0] = node;
    return cap > 0 ? 1 : 0;
}

static void test_registry_node_pids(void **state)
{
    (void)state;
    struct registry *r = NULL;
    char *cfg;
    size_t len, n = 0, nc = 0;
    int32_t inner[1] = { 4 }, *out = NULL, *cand = NULL, amb = 0;
    struct reg_who a = { 40001, 111, fixed_lineage, NULL }, b = { 40002, 222, fixed_lineage, NULL };
    struct reg_leaf *leaves = NULL;

    assert_int_equal(registry_create("node", &r), 0);
    /* two containers whose processes are both pid 4 in their namespaces: two processes */
    assert_int_equal(registry_poll_who(r, 0, &a, 0, inner, 1, 3, REG_ORIGIN_MSMON, 1, &cfg, &len), 0);
    assert_int_equal(registry_poll_who(r, 0, &b, 0, inner, 1, 3, REG_ORIGIN_MSMON, 1, &cfg, &len), 0);
    assert_int_equal(registry_poll_who(r, 0, &a, 0, inner, 1, 3, REG_ORIGIN_MSMON, 2, &cfg, &len), 0);
    assert_int_equal(registry_count(r), 2);
    assert_int_equal(registry_leaves(r, &leaves, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(leaves[0].pid + leaves[1].pid, 40001 + 40002);
    assert_int_equal(leaves[0].ns_pid, 4);
    free(leaves);
    /* a node pid stays; a container pid of two namespaces is ambiguous, with the candidates */
    int32_t want_node[1] = { 40002 };
    assert_int_equal(registry_resolve_pids(r, 0, want_node, 1, &out, &n, &amb, &cand, &nc), 0);
    assert_int_equal(n, 1);
    assert_int_equal(out[0], 40002);
    free(out);
    assert_int_equal(registry_resolve_pids(r, 0, inner, 1, &out, &n, &amb, &cand, &nc), -EEXIST);
    assert_int_equal(amb, 4);
    assert_int_equal(nc, 2);
    assert_int_equal(cand[0], 40001);
    assert_int_equal(cand[1], 40002);
    free(cand);
    /* one namespace's pid becomes its node pid; configs reach by node pid */
    int32_t inner7[1] = { 7 };
    struct reg_who c7 = { 40007, 333, fixed_lineage, NULL };
    assert_int_equal(registry_poll_who(r, 0, &c7, 0, inner7, 1, 3, REG_ORIGIN_MSMON, 3, &cfg, &len), 0);
    assert_int_equal(registry_resolve_pids(r, 0, inner7, 1, &out, &n, &amb, &cand, &nc), 0);
    assert_int_equal(n, 1);
    assert_int_equal(out[0], 40007);
    struct reg_set_result res;
    assert_int_equal(registry_set_config(r, 0, out, n, "A=1", 3, 10, NULL, NULL, "t", &res), 0);
    assert_int_equal(res.n_matched, 1);
    assert_int_equal(res.matched[0], 40007);
    reg_set_result_fini(&res);
    free(out);
    struct reg_cfg_entry *o = NULL;
    assert_int_equal(registry_outcomes(r, "t", &o, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(o[0].pid, 40007);
    assert_int_equal(o[0].ns_pid, 7);
    free(o);
    registry_destroy(r);
}

static void test_data_sender_in_container(void **state)
{
    (void)state;
    struct data_router dr;
    struct status_table *st = NULL;
    struct status_entry *e = NULL;
    size_t n = 0;
    const char *own = "{\"backend\":\"mspti\",\"config_age_ms\":-1,\"deviceId\":-1,\"duration\":0,\"fallback\":\"\","
                      "\"kind\":\"PluginHealth\",\"library\":\"\",\"mode\":\"dyno\",\"name\":\"health\",\"pid\":6,"
                      "\"pod_name\":\"trainer-a-0\",\"pod_namespace\":\"ml\",\"rank\":1,\"step\":3,\"step_age_ms\":1,"
                      "\"step_period_ms\":50,\"steps\":3,\"steps_since_config\":0,\"timestamp\":1}";
    const char *other = "{\"backend\":\"mspti\",\"config_age_ms\":-1,\"deviceId\":-1,\"duration\":0,\"fallback\":\"\","
                        "\"kind\":\"PluginHealth\",\"library\":\"\",\"mode\":\"dyno\",\"name\":\"health\",\"pid\":41230,"
                        "\"rank\":1,\"step\":3,\"step_age_ms\":1,\"step_period_ms\":50,\"steps\":3,"
                        "\"steps_since_config\":0,\"timestamp\":1}";
    struct data_sender s = { 41230, 6 }; /* node pid 41230 is pid 6 in its container */

    assert_int_equal(status_create(&st), 0);
    data_router_init(&dr);
    dr.st = st;
    /* the container's own pid: accepted, kept under the node's */
    assert_int_equal(data_handle_sender(&dr, own, strlen(own), 1, &s), 0);
    /* naming the node's pid (or anyone else) is another process's: refused */
    assert_int_equal(data_handle_sender(&dr, other, strlen(other), 1, &s), 0);
    assert_int_equal(dr.spoofed, 1);
    assert_int_equal(status_list(st, &e, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(e[0].pid, 41230);
    assert_int_equal(e[0].ns_pid, 6);
    assert_int_equal(e[0].health.rank, 1);
    free(e);
    data_router_fini(&dr);
    status_destroy(st);
}

static void test_health_pod_fields(void **state)
{
    (void)state;
    struct podid_self p;
    cJSON *m = NULL;
    const char *t = "{\"pod_name\":\"trainer-a-0\",\"pod_namespace\":\"ml\\u001b[31m\",\"node_name\":\"n1\","
                    "\"container_name\":7,\"hostname\":\"ignored\"}";
    assert_int_equal(cjx_parse(t, strlen(t), 8, &m), 0);
    assert_int_equal(health_parse_pod(m, &p), 2); /* an escape sequence, a number */
    assert_string_equal(p.v[PODID_POD], "trainer-a-0");
    assert_string_equal(p.v[PODID_NAMESPACE], "");
    assert_string_equal(p.v[PODID_NODE], "n1");
    assert_string_equal(p.v[PODID_CONTAINER], "");
    assert_false(p.pod_from_hostname);
    cJSON_Delete(m);
    const char *h = "{\"hostname\":\"ctr-1\"}";
    assert_int_equal(cjx_parse(h, strlen(h), 8, &m), 0);
    assert_int_equal(health_parse_pod(m, &p), 0);
    assert_string_equal(p.v[PODID_POD], "ctr-1");
    assert_true(p.pod_from_hostname);
    cJSON_Delete(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_stat),
        cmocka_unit_test(test_same_namespace_and_cache),
        cmocka_unit_test(test_other_namespace),
        cmocka_unit_test(test_registry_node_pids),
        cmocka_unit_test(test_data_sender_in_container),
        cmocka_unit_test(test_health_pod_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
