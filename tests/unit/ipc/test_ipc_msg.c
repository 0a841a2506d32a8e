/* test_ipc_msg: the IPC datagram codec and addresses shared by the daemon and the plugin
 * (src/ipc/ipc_msg.c; docs/design/ipc.md): the worked example byte for byte, every drop
 * reason, exact tags, payload parsers with short and hostile lengths, socket names. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ipc/ipc_msg.h"

static void test_ipc_worked_example(void **state)
{
    (void)state;
    /* docs/design/ipc.md#datagrams worked example: req from 1234 with ancestors 1000 and 900 */
    uint8_t payload[28];
    struct ipc_req r = {.type = 3, .n = 3, .job_id = 0};
    int32_t pids[3] = {1234, 1000, 900};
    memcpy(payload, &r, 16);
    memcpy(payload + 16, pids, 12);
    uint8_t out[IPC_MAX_DATAGRAM];
    long n = ipc_msg_build(out, sizeof(out), "req", payload, sizeof(payload));
    assert_int_equal(n, 68);
    static const uint8_t expect_hdr[12] = {0x1c, 0, 0, 0, 0, 0, 0, 0, 'r', 'e', 'q', 0};
    assert_memory_equal(out, expect_hdr, 12);
    for (int k = 12; k < 40; k++)
        assert_int_equal(out[k], 0);
    static const uint8_t expect_pl[28] = {3, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                          0xd2, 4, 0, 0, 0xe8, 3, 0, 0, 0x84, 3, 0, 0};
    assert_memory_equal(out + 40, expect_pl, 28);

    struct ipc_view v;
    assert_int_equal(ipc_msg_parse(out, 68, 68, IPC_MAX_DATAGRAM, &v), IPC_OK);
    assert_int_equal(v.type, IPC_T_REQ);
    struct ipc_req h;
    int32_t got[IPC_REQ_MAX_PIDS];
    int used;
    assert_int_equal(ipc_parse_req(&v, &h, got, &used), 0);
    assert_int_equal(used, 3);
    assert_int_equal(got[2], 900);
}

static void test_ipc_drops(void **state)
{
    (void)state;
    uint8_t out[IPC_MAX_DATAGRAM + 100];
    struct ipc_view v;
    memset(out, 0, sizeof(out));
    assert_int_equal(ipc_msg_parse(out, 39, 39, IPC_MAX_DATAGRAM, &v), IPC_DROP_TOO_SMALL);
    assert_int_equal(ipc_msg_parse(out, 4136, 5000, IPC_MAX_DATAGRAM, &v), IPC_DROP_TOO_BIG);
    memset(out + 8, 'x', 32);
    assert_int_equal(ipc_msg_parse(out, 40, 40, IPC_MAX_DATAGRAM, &v), IPC_DROP_NO_NUL);
    long n = ipc_msg_build(out, sizeof(out), "ctxt", "abcd", 4);
    assert_int_equal(n, 44);
    uint64_t big = 100;
    memcpy(out, &big, 8);
    assert_int_equal(ipc_msg_parse(out, 44, 44, IPC_MAX_DATAGRAM, &v), IPC_DROP_TRUNCATED);
    /* size smaller than received: the first `size` bytes are used */
    uint64_t small = 2;
    memcpy(out, &small, 8);
    assert_int_equal(ipc_msg_parse(out, 44, 44, IPC_MAX_DATAGRAM, &v), IPC_OK);
    assert_int_equal(v.len, 2);
    /* exact tag match, not prefix */
    n = ipc_msg_build(out, sizeof(out), "reqx", NULL, 0);
    assert_int_equal(ipc_msg_parse(out, (size_t)n, (size_t)n, IPC_MAX_DATAGRAM, &v), IPC_OK);
    assert_int_equal(v.type, IPC_T_UNKNOWN);
    struct ipc_ctxt c;
    assert_int_equal(ipc_parse_ctxt(&v, &c), -EMSGSIZE);
}

static void test_ipc_addr(void **state)
{
    (void)state;
    struct sockaddr_un a;
    socklen_t len;
    assert_int_equal(ipc_addr_abstract(&a, &len, "dynolog", true), 0);
    assert_int_equal(len, 11);
    char name[64];
    assert_int_equal(ipc_client_name(name, sizeof(name)), 0);
    assert_int_equal(strlen(name), 52);
    assert_int_equal(name[16 + 14], '4');
    assert_true(strchr("89ab", name[16 + 19]) != NULL);
    char path[200];
    assert_int_equal(ipc_socket_path("/tmp/x/", "dynolog", path, sizeof(path)), 0);
    assert_string_equal(path, "/tmp/x/dynolog.sock");
    char longdir[120];
    memset(longdir, 'a', 100);
    longdir[0] = '/';
    longdir[100] = 0;
    assert_int_equal(ipc_socket_path(longdir, "dynolog", path, sizeof(path)), -ENAMETOOLONG);
}

/* Every tag maps to its type and back; anything else (prefix, case, empty) is unknown. */
static void test_ipc_tags(void **state)
{
    (void)state;
    static const struct { const char *tag; enum ipc_type t; } known[] = {
        {"ctxt", IPC_T_CTXT}, {"req", IPC_T_REQ}, {"npuTraceStatus", IPC_T_TRACE_STATUS},
        {"npuMonitorStatus", IPC_T_MONITOR_STATUS}, {"data", IPC_T_DATA},
    };
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
        assert_int_equal(ipc_type_from_tag(known[i].tag), known[i].t);
        assert_string_equal(ipc_type_tag(known[i].t), known[i].tag);
    }
    static const char *const bad[] = {"re", "Req", "data ", "", "npuTraceStatu", "reqx", "DATA"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(ipc_type_from_tag(bad[i]), IPC_T_UNKNOWN);
    assert_int_equal(ipc_type_from_tag(""), IPC_T_UNKNOWN);
    assert_string_equal(ipc_type_tag(IPC_T_UNKNOWN), "");
    assert_string_equal(ipc_type_tag((enum ipc_type)99), "");
    /* every drop reason has its own text (the daemon's log line names it) */
    const char *seen[5];
    for (int d = IPC_OK; d <= IPC_DROP_TRUNCATED; d++) {
        seen[d] = ipc_drop_reason_str((enum ipc_drop)d);
        assert_true(strlen(seen[d]) > 0);
        for (int e = 0; e < d; e++)
            assert_string_not_equal(seen[d], seen[e]);
    }
    assert_string_equal(ipc_drop_reason_str(IPC_DROP_TOO_BIG), "exceeds max size");
}

/* Building refuses what it cannot frame: a tag with no room for its NUL, a payload larger
 * than the buffer (also when len + header would wrap). A 31-byte tag is the longest. */
static void test_ipc_build_limits(void **state)
{
    (void)state;
    uint8_t out[IPC_MAX_DATAGRAM];
    char tag[40];
    memset(tag, 't', 31);
    tag[31] = '\0';
    long n = ipc_msg_build(out, sizeof(out), tag, "x", 1);
    assert_int_equal(n, 41);
    struct ipc_view v;
    assert_int_equal(ipc_msg_parse(out, 41, 41, IPC_MAX_DATAGRAM, &v), IPC_OK);
    assert_int_equal(strlen(v.type_str), 31);
    tag[31] = 't';
    tag[32] = '\0';
    assert_int_equal(ipc_msg_build(out, sizeof(out), tag, "x", 1), -EINVAL);
    assert_int_equal(ipc_msg_build(out, 39, "data", NULL, 0), -ENOSPC);
    assert_int_equal(ipc_msg_build(out, 40, "data", NULL, 0), 40);
    assert_int_equal(ipc_msg_build(out, 44, "data", "abcde", 5), -ENOSPC);
    static uint8_t big[IPC_MAX_PAYLOAD];
    assert_int_equal(ipc_msg_build(out, sizeof(out), "data", big, SIZE_MAX), -ENOSPC);
    assert_int_equal(ipc_msg_build(out, sizeof(out), "data", big, IPC_MAX_PAYLOAD), IPC_MAX_DATAGRAM);
}

/* Parsing never trusts header.size: a size larger than what arrived (up to 2^64-1) is
 * truncation; a datagram the kernel cut (got < real length) or larger than the cap is
 * refused before anything is read from it. */
static void test_ipc_parse_hostile_sizes(void **state)
{
    (void)state;
    uint8_t out[IPC_MAX_DATAGRAM];
    struct ipc_view v;
    long n = ipc_msg_build(out, sizeof(out), "data", "{}", 2);
    assert_int_equal(n, 42);
    uint64_t huge = UINT64_MAX;
    memcpy(out, &huge, 8);
    assert_int_equal(ipc_msg_parse(out, 42, 42, IPC_MAX_DATAGRAM, &v), IPC_DROP_TRUNCATED);
    assert_null(v.payload);
    uint64_t two = 2;
    memcpy(out, &two, 8);
    assert_int_equal(ipc_msg_parse(out, 42, 43, IPC_MAX_DATAGRAM, &v), IPC_DROP_TOO_BIG); /* MSG_TRUNC */
    assert_int_equal(ipc_msg_parse(out, 42, 42, 41, &v), IPC_DROP_TOO_BIG);
    assert_int_equal(ipc_msg_parse(out, 42, 42, 42, &v), IPC_OK);
    assert_int_equal(v.type, IPC_T_DATA);
    assert_int_equal(v.len, 2);
    assert_memory_equal(v.payload, "{}", 2);
    assert_string_equal(v.type_str, "data");
    /* bytes after the tag's NUL are not part of the tag */
    memcpy(out + 8 + 5, "junk", 4);
    assert_int_equal(ipc_msg_parse(out, 42, 42, IPC_MAX_DATAGRAM, &v), IPC_OK);
    assert_int_equal(v.type, IPC_T_DATA);
}

/* Payload parsers: status and ctxt need their whole struct; req clamps n to the daemon's 16
 * pids, treats a negative n as none, and needs the pids it uses to be present. */
static void test_ipc_payload_parsers(void **state)
{
    (void)state;
    uint8_t out[IPC_MAX_DATAGRAM];
    struct ipc_view v;
    struct ipc_status st = {.status = IPC_STATUS_RUNNING, .current_step = 7, .start_step = 5, .stop_step = 9,
                            .pid = 4242, .job_id = -3};
    long n = ipc_msg_build(out, sizeof(out), "npuMonitorStatus", &st, sizeof(st));
    assert_int_equal(ipc_msg_parse(out, (size_t)n, (size_t)n, IPC_MAX_DATAGRAM, &v), IPC_OK);
    assert_int_equal(v.type, IPC_T_MONITOR_STATUS);
    struct ipc_status got;
    assert_int_equal(ipc_parse_status(&v, &got), 0);
    assert_int_equal(got.current_step, 7);
    assert_int_equal(got.pid, 4242);
    assert_int_equal(got.job_id, -3);
    v.len = sizeof(st) - 1;
    assert_int_equal(ipc_parse_status(&v, &got), -EMSGSIZE);

    struct ipc_ctxt c = {.npu = 1, .pid = 77, .job_id = 5}, cg;
    n = ipc_msg_build(out, sizeof(out), "ctxt", &c, sizeof(c));
    assert_int_equal(ipc_msg_parse(out, (size_t)n, (size_t)n, IPC_MAX_DATAGRAM, &v), IPC_OK);
    assert_int_equal(ipc_parse_ctxt(&v, &cg), 0);
    assert_int_equal(cg.pid, 77);

    /* req: 20 pids claimed and present, 16 used */
    uint8_t payload[16 + 4 * 20];
    struct ipc_req r = {.type = IPC_REQ_ACTIVITIES, .n = 20, .job_id = 0};
    int32_t pids[20], used[IPC_REQ_MAX_PIDS];
    int nused = -1;
    struct ipc_req h;
    for (int i = 0; i < 20; i++)
        pids[i] = 1000 + i;
    memcpy(payload, &r, 16);
    memcpy(payload + 16, pids, sizeof(pids));
    n = ipc_msg_build(out, sizeof(out), "req", payload, sizeof(payload));
    assert_int_equal(ipc_msg_parse(out, (size_t)n, (size_t)n, IPC_MAX_DATAGRAM, &v), IPC_OK);
    assert_int_equal(ipc_parse_req(&v, &h, used, &nused), 0);
    assert_int_equal(nused, IPC_REQ_MAX_PIDS);
    assert_int_equal(used[15], 1015);
    /* n claims more pids than arrived */
    r.n = 3;
    memcpy(payload, &r, 16);
    v.len = 16 + 8;
    assert_int_equal(ipc_parse_req(&v, &h, used, &nused), -EMSGSIZE);
    /* negative n: none */
    r.n = -5;
    memcpy(payload, &r, 16);
    n = ipc_msg_build(out, sizeof(out), "req", payload, 16);
    assert_int_equal(ipc_msg_parse(out, (size_t)n, (size_t)n, IPC_MAX_DATAGRAM, &v), IPC_OK);
    assert_int_equal(ipc_parse_req(&v, &h, used, &nused), 0);
    assert_int_equal(nused, 0);
    v.len = 15;
    assert_int_equal(ipc_parse_req(&v, &h, used, &nused), -EMSGSIZE);
}

/* Addresses: abstract names with and without the trailing NUL (Kineto's @dynolog has
 * none), paths with their NUL counted, printable forms for logs, the socket directory. */
static void test_ipc_addresses(void **state)
{
    (void)state;
    struct sockaddr_un a;
    socklen_t len;
    char s[256], dir[256];
    assert_int_equal(ipc_addr_abstract(&a, &len, "dynolog", false), 0);
    assert_int_equal(len, sizeof(sa_family_t) + 1 + 7);
    assert_int_equal(a.sun_path[0], '\0');
    assert_memory_equal(a.sun_path + 1, "dynolog", 7);
    ipc_addr_str(&a, len, s, sizeof(s));
    assert_string_equal(s, "@dynolog");
    assert_int_equal(ipc_addr_abstract(&a, &len, "dynolog", true), 0);
    ipc_addr_str(&a, len, s, sizeof(s));
    assert_string_equal(s, "@dynolog@");
    char longname[120];
    memset(longname, 'n', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    assert_int_equal(ipc_addr_abstract(&a, &len, longname, true), -ENAMETOOLONG);

    assert_int_equal(ipc_addr_path(&a, &len, "/tmp/d/dynolog.sock"), 0);
    assert_int_equal(len, sizeof(sa_family_t) + strlen("/tmp/d/dynolog.sock") + 1);
    ipc_addr_str(&a, len, s, sizeof(s));
    assert_string_equal(s, "/tmp/d/dynolog.sock");
    assert_int_equal(ipc_addr_path(&a, &len, ""), -ENAMETOOLONG);
    assert_int_equal(ipc_addr_path(&a, &len, longname), -ENAMETOOLONG);

    /* an unnamed peer, and control bytes escaped in a hostile peer name */
    ipc_addr_str(&a, sizeof(sa_family_t), s, sizeof(s));
    assert_string_equal(s, "(unnamed)");
    assert_int_equal(ipc_addr_abstract(&a, &len, "a\nb\x7f", false), 0);
    ipc_addr_str(&a, len, s, sizeof(s));
    assert_string_equal(s, "@a\\x0ab\\x7f");
    ipc_addr_str(&a, len, s, 4); /* a short buffer stays terminated */
    assert_true(strlen(s) < 4);

    /* directory: the flag, else MSMONITOR_SOCKET_DIR, else the passwd home (never HOME) */
    setenv("MSMONITOR_SOCKET_DIR", "/env/dir", 1);
    setenv("HOME", "/not/this", 1);
    assert_int_equal(ipc_socket_dir("/flag/dir", dir, sizeof(dir)), 0);
    assert_string_equal(dir, "/flag/dir");
    assert_int_equal(ipc_socket_dir(NULL, dir, sizeof(dir)), 0);
    assert_string_equal(dir, "/env/dir");
    assert_int_equal(ipc_socket_dir("", dir, sizeof(dir)), 0);
    assert_string_equal(dir, "/env/dir");
    assert_int_equal(ipc_socket_dir(NULL, dir, 4), -ENAMETOOLONG);
    unsetenv("MSMONITOR_SOCKET_DIR");
    int rc = ipc_socket_dir(NULL, dir, sizeof(dir));
    if (rc == 0)
        assert_string_not_equal(dir, "/not/this");
    else
        assert_int_equal(rc, -ENOENT);
    /* paths: trailing slashes folded, 106 bytes at most */
    assert_int_equal(ipc_socket_path("/a", "dyno", s, sizeof(s)), 0);
    assert_string_equal(s, "/a/dyno.sock");
    assert_int_equal(ipc_socket_path("/a//", "dyno", s, sizeof(s)), 0);
    assert_string_equal(s, "/a/dyno.sock");
    assert_int_equal(ipc_socket_path("/a", "dyno", s, 8), -ENAMETOOLONG);
}

/* Client names are unique per call (UUIDv4 after the fixed prefix). */
static void test_ipc_client_names(void **state)
{
    (void)state;
    char a[64], b[64];
    assert_int_equal(ipc_client_name(a, sizeof(a)), 0);
    assert_int_equal(ipc_client_name(b, sizeof(b)), 0);
    assert_memory_equal(a, "dynoconfigclient", 16);
    assert_string_not_equal(a, b);
    assert_int_not_equal(ipc_client_name(a, 52), 0); /* no room for the NUL */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ipc_worked_example), cmocka_unit_test(test_ipc_drops),
        cmocka_unit_test(test_ipc_addr),           cmocka_unit_test(test_ipc_tags),
        cmocka_unit_test(test_ipc_build_limits),   cmocka_unit_test(test_ipc_parse_hostile_sizes),
        cmocka_unit_test(test_ipc_payload_parsers), cmocka_unit_test(test_ipc_addresses),
        cmocka_unit_test(test_ipc_client_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
