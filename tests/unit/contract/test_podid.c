/* test_podid: the downward-API field rules and the two /proc parsers of contract/podid.c on the
 * cgroup paths that Kubernetes (cgroupfs and systemd drivers), docker, containerd, cri-o and
 * podman write, for cgroup v1 and v2, and on hostile texts. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "contract/podid.h"

#define CID "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define CID2 "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
#define UID "1b4e28ba-2fa1-11d2-883f-0016d3cca427"
#define UID_ "1b4e28ba_2fa1_11d2_883f_0016d3cca427"

static void parse(const char *text, int want_rc, const char *cid, const char *uid, const char *runtime)
{
    struct podid_cgroup cg;
    int rc = podid_cgroup_parse(text, strlen(text), &cg);
    assert_int_equal(rc, want_rc);
    assert_string_equal(cg.container_id, cid);
    assert_string_equal(cg.pod_uid, uid);
    assert_string_equal(cg.runtime, runtime);
}

static void test_cgroup_forms(void **state)
{
    (void)state;
    /* Kubernetes, cgroup v2, systemd driver, containerd */
    parse("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_ ".slice/cri-containerd-" CID
          ".scope\n", 0, CID, UID, "containerd");
    /* guaranteed QoS: no QoS slice */
    parse("0::/kubepods.slice/kubepods-pod" UID_ ".slice/crio-" CID ".scope\n", 0, CID, UID, "cri-o");
    /* Kubernetes, cgroup v1, cgroupfs driver (docker or containerd: the runtime is not in the path) */
    parse("12:memory:/kubepods/besteffort/pod" UID "/" CID "\n11:cpu,cpuacct:/kubepods/besteffort/pod" UID "/" CID
          "\n", 0, CID, UID, "");
    /* cgroup v1 with the systemd driver, one controller per line */
    parse("5:pids:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_ ".slice/docker-" CID
          ".scope\n0::/\n", 0, CID, UID, "docker");
    /* plain docker, v1 cgroupfs and v2 systemd */
    parse("4:cpu:/docker/" CID "\n", 0, CID, "", "docker");
    parse("0::/system.slice/docker-" CID ".scope\n", 0, CID, "", "docker");
    /* podman; its conmon is not the container */
    parse("0::/machine.slice/libpod-" CID ".scope/container\n", 0, CID, "", "podman");
    parse("0::/machine.slice/libpod-conmon-" CID ".scope\n", -ENOENT, "", "", "");
    /* a kind node: a docker container whose kubelet runs containerd containers: the deepest wins */
    parse("0::/system.slice/docker-" CID2 ".scope/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort."
          "slice/kubelet-kubepods-besteffort-pod" UID_ ".slice/cri-containerd-" CID ".scope\n", 0, CID, UID,
          "containerd");
    /* the pod's cgroup itself (a process in the pause container's parent): pod, no container */
    parse("0::/kubepods/burstable/pod" UID "\n", 0, "", UID, "");
    /* the unified line wins over v1 lines */
    parse("3:memory:/docker/" CID2 "\n0::/system.slice/docker-" CID ".scope\n", 0, CID, "", "docker");
    /* upper-case hex is read as lower case */
    parse("0::/docker/0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF\n", 0, CID, "", "docker");
    /* the bare host and a container with its own cgroup namespace say nothing */
    parse("0::/\n", -ENOENT, "", "", "");
    parse("0::/user.slice/user-1000.slice/session-3.scope\n12:memory:/user.slice\n", -ENOENT, "", "", "");
    /* a path may hold ':' */
    parse("0::/a:b/docker-" CID ".scope\n", 0, CID, "", "docker");
}

static void test_cgroup_hostile(void **state)
{
    (void)state;
    struct podid_cgroup cg;
    /* one digit short or long, a non-hex digit, a wrong separator */
    parse("0::/docker/" "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n", -ENOENT, "", "", "");
    parse("0::/docker/" CID "0\n", -ENOENT, "", "", "");
    parse("0::/docker/" "g123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n", -ENOENT, "", "", "");
    parse("0::/kubepods/pod1b4e28ba_2fa1_11d2_883f_0016d3cca427/x\n", -ENOENT, "", "", "");
    parse("0::/kubepods.slice/kubepods-pod1b4e28ba-2fa1-11d2-883f-0016d3cca427.slice\n", -ENOENT, "", "", "");
    parse("0::/x/docker-" CID ".scopex\n", -ENOENT, "", "", "");
    /* no line, no colon, empty input, NULL */
    parse("", -ENOENT, "", "", "");
    parse("garbage without colons " CID "\n", -ENOENT, "", "", "");
    assert_int_equal(podid_cgroup_parse(NULL, 5, &cg), -ENOENT);
    /* the view's end is respected: the id continues past len */
    const char *t = "0::/docker/" CID "\n";
    assert_int_equal(podid_cgroup_parse(t, strlen(t) - 2, &cg), -ENOENT);
    /* not NUL-terminated at len */
    char *buf = malloc(80);
    memcpy(buf, "0::/docker-", 11);
    memset(buf + 11, 'a', 69);
    assert_int_equal(podid_cgroup_parse(buf, 80, &cg), -ENOENT);
    free(buf);
}

static void test_nspid(void **state)
{
    (void)state;
    int32_t v[4];
    size_t n = 0;
    const char *one = "Name:\tpython3\nTgid:\t4242\nNSpid:\t4242\nPPid:\t1\n";
    assert_int_equal(podid_nspid_parse(one, strlen(one), v, 4, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(v[0], 4242);
    const char *two = "Name:\tx\nNSpid:\t31337\t7\nNSpgid:\t1\n";
    assert_int_equal(podid_nspid_parse(two, strlen(two), v, 4, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(v[0], 31337);
    assert_int_equal(v[1], 7);
    const char *first = "NSpid:\t9 8 1";   /* first line, no newline at the end */
    assert_int_equal(podid_nspid_parse(first, strlen(first), v, 4, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(v[2], 1);
    /* the tag must start a line; no line; malformed; too deep */
    const char *mid = "Name:\tNSpid:\t5\n";
    assert_int_equal(podid_nspid_parse(mid, strlen(mid), v, 4, &n), -ENOENT);
    assert_int_equal(podid_nspid_parse("Pid:\t1\n", 7, v, 4, &n), -ENOENT);
    assert_int_equal(podid_nspid_parse("NSpid:\t\n", 8, v, 4, &n), -EINVAL);
    assert_int_equal(podid_nspid_parse("NSpid:\t12x\n", 11, v, 4, &n), -EINVAL);
    assert_int_equal(podid_nspid_parse("NSpid:\t0\n", 9, v, 4, &n), -EINVAL);
    assert_int_equal(podid_nspid_parse("NSpid:\t99999999999\n", 19, v, 4, &n), -EINVAL);
    assert_int_equal(podid_nspid_parse("NSpid:\t-3\n", 10, v, 4, &n), -EINVAL);
    assert_int_equal(podid_nspid_parse("NSpid:\t1 2 3 4 5\n", 17, v, 4, &n), -E2BIG);
    /* the view's end: "NSpid:\t12" cut after the 1 */
    assert_int_equal(podid_nspid_parse("NSpid:\t12\n", 8, v, 4, &n), 0);
    assert_int_equal(v[0], 1);
}

static const char *fake_env(const char *name)
{
    if (strcmp(name, "POD_NAME") == 0)
        return "trainer-a-0";
    if (strcmp(name, "POD_NAMESPACE") == 0)
        return "ml\x1b[31m";      /* refused: an escape sequence */
    if (strcmp(name, "NODE_NAME") == 0)
        return "node01.cluster";
    return NULL;
}

static const char *no_pod_env(const char *name)
{
    return strcmp(name, "CONTAINER_NAME") == 0 ? "trainer" : NULL;
}

static void test_fields(void **state)
{
    (void)state;
    struct podid_self s;
    char big[300];

    assert_string_equal(podid_env(PODID_POD), "POD_NAME");
    assert_string_equal(podid_env(PODID_CONTAINER), "CONTAINER_NAME");
    assert_string_equal(podid_key(PODID_NAMESPACE), "pod_namespace");
    assert_string_equal(podid_status_key(PODID_POD), "name");
    assert_int_equal(podid_cap(PODID_NAMESPACE), 63);
    assert_string_equal(podid_env((enum podid_field)99), "");
    assert_true(podid_valid(PODID_POD, "trainer-a-0", 11));
    assert_true(podid_valid(PODID_POD, "Worker_1.local", 14));
    assert_false(podid_valid(PODID_POD, "-x", 2));
    assert_false(podid_valid(PODID_POD, "x-", 2));
    assert_false(podid_valid(PODID_POD, "", 0));
    assert_false(podid_valid(PODID_POD, "a b", 3));
    assert_false(podid_valid(PODID_POD, "a/b", 3));
    assert_false(podid_valid(PODID_POD, "a\nb", 3));
    assert_false(podid_valid(PODID_POD, "caf\xc3\xa9", 5));
    memset(big, 'a', sizeof(big));
    assert_true(podid_valid(PODID_POD, big, 253));
    assert_false(podid_valid(PODID_POD, big, 254));
    assert_true(podid_valid(PODID_NAMESPACE, big, 63));
    assert_false(podid_valid(PODID_NAMESPACE, big, 64));

    assert_int_equal(podid_self_from(&s, fake_env, "ignored-host"), 1);
    assert_string_equal(s.v[PODID_POD], "trainer-a-0");
    assert_string_equal(s.v[PODID_NAMESPACE], "");
    assert_string_equal(s.v[PODID_NODE], "node01.cluster");
    assert_string_equal(s.v[PODID_CONTAINER], "");
    assert_false(s.pod_from_hostname);
    /* without POD_NAME nothing else is taken: a stray CONTAINER_NAME describes no pod */
    assert_int_equal(podid_self_from(&s, no_pod_env, "ctr-b"), 0);
    assert_string_equal(s.v[PODID_POD], "ctr-b");
    assert_true(s.pod_from_hostname);
    assert_string_equal(s.v[PODID_CONTAINER], "");
    assert_int_equal(podid_self_from(&s, no_pod_env, "bad host"), 0);
    assert_string_equal(s.v[PODID_POD], "");
    assert_false(s.pod_from_hostname);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cgroup_forms),
        cmocka_unit_test(test_cgroup_hostile),
        cmocka_unit_test(test_nspid),
        cmocka_unit_test(test_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
