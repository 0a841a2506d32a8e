/* Unit tests of the kernel monitor: each /proc parser on literal text (good and malformed),
 * then whole cycles on the fixture trees under fixtures/kmon (t0 -> t1 through a symlink the
 * test re-points): first-cycle contents, exact CPU formulas, network and disk deltas with new,
 * vanished, wrapped and over-long entries, the prefix filter and unreadable files. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "daemon/collectors/kmon.h"
#include "daemon/collectors/kmon_proc.h"

#ifndef FIXTURES
#error "FIXTURES must name tests/unit/daemon/fixtures/kmon"
#endif

#define S(x) x, sizeof(x) - 1

static void test_parse_uptime(void **state)
{
    uint64_t u = 0;
    (void)state;
    assert_int_equal(kmon_parse_uptime(S("12345.67 2345.11\n"), &u), 0);
    assert_int_equal(u, 12345);
    assert_int_equal(kmon_parse_uptime(S("7 1\n"), &u), 0);
    assert_int_equal(u, 7);
    assert_int_equal(kmon_parse_uptime(S("12x.5 1\n"), &u), -EINVAL);
    assert_int_equal(kmon_parse_uptime(S("-1.5 1\n"), &u), -EINVAL);
    assert_int_equal(kmon_parse_uptime(S(""), &u), -EINVAL);
}

static void test_parse_stat(void **state)
{
    struct kmon_cpu c;
    (void)state;
    assert_int_equal(kmon_parse_stat(S("cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 9 9 9 9\n"), &c), 0);
    for (int i = 0; i < KC_COUNT; i++)
        assert_int_equal(c.t[i], (uint64_t)i + 1);
    /* old kernels: fewer fields, the rest 0 */
    assert_int_equal(kmon_parse_stat(S("cpu 1 2 3 4\n"), &c), 0);
    assert_int_equal(c.t[KC_I], 4);
    assert_int_equal(c.t[KC_GN], 0);
    assert_int_equal(kmon_parse_stat(S("cpu 1 2 3\n"), &c), -EINVAL);
    assert_int_equal(kmon_parse_stat(S("cpu 1 2 x 4\n"), &c), -EINVAL);
    assert_int_equal(kmon_parse_stat(S("cpu0 1 2 3 4\nintr 5\n"), &c), -ENOENT);
    struct kmon_core cores[2];
    size_t n = 0;
    assert_int_equal(kmon_parse_stat_cores(S("cpu 1 2 3 4\ncpu0 1 2 3 4 5\ncpu17 6 7 8 9\nintr 5\n"),
                                           cores, 2, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(cores[0].id, 0);
    assert_int_equal(cores[0].c.t[KC_W], 5);
    assert_int_equal(cores[1].id, 17);
    assert_int_equal(cores[1].c.t[KC_I], 9);
    assert_int_equal(kmon_parse_stat_cores(S("cpu0 1 2 3 4\ncpu1 1 2 3 4\ncpu2 1 2 3 4\n"), cores, 2, &n),
                     -ENOSPC);
    assert_int_equal(kmon_parse_stat_cores(S("cpux 1 2 3 4\n"), cores, 2, &n), -EINVAL);
    assert_int_equal(kmon_parse_stat_cores(S("cpu3 1 2\n"), cores, 2, &n), -EINVAL);
}

static void test_parse_netdev(void **state)
{
    struct kmon_netif n[4];
    size_t cnt = 0;
    static const char text[] =
        "Inter-|   Receive |  Transmit\n face |bytes packets|bytes packets\n"
        "  eth0:1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n"
        "    lo: 10 20 30 40 0 0 0 0 50 60 70 80 0 0 0 0\n"
        "abcdefghijklmnop: 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1\n";
    (void)state;
    assert_int_equal(kmon_parse_netdev(S(text), NULL, n, 4, &cnt), 0);
    assert_int_equal(cnt, 2); /* the 16-character name is skipped */
    assert_string_equal(n[0].name, "eth0");
    assert_int_equal(n[0].c[KN_RX_BYTES], 1);
    assert_int_equal(n[0].c[KN_RX_DROP], 4);
    assert_int_equal(n[0].c[KN_TX_BYTES], 9);
    assert_int_equal(n[0].c[KN_TX_DROP], 12);
    assert_string_equal(n[1].name, "lo");
    assert_int_equal(n[1].c[KN_TX_PACKETS], 60);
    assert_int_equal(kmon_parse_netdev(S(text), "eth,en", n, 4, &cnt), 0);
    assert_int_equal(cnt, 1);
    assert_string_equal(n[0].name, "eth0");
    assert_int_equal(kmon_parse_netdev(S(text), NULL, n, 1, &cnt), -ENOSPC);
    assert_int_equal(kmon_parse_netdev(S("  eth0: 1 2 3\n"), NULL, n, 4, &cnt), -EINVAL);
    assert_int_equal(kmon_parse_netdev(S("  eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 z\n"), NULL, n, 4, &cnt),
                     -EINVAL);
}

static void test_parse_meminfo_loadavg(void **state)
{
    struct kmon_mem m;
    struct kmon_load l;
    (void)state;
    assert_int_equal(kmon_parse_meminfo(S("MemTotal: 100 kB\nMemAvailable: 40 kB\nSwapFree: 3 kB\n"), &m), 0);
    assert_int_equal(m.kb[KM_TOTAL], 100);
    assert_int_equal(m.kb[KM_AVAILABLE], 40);
    assert_true(m.has[KM_SWAP_FREE]);
    assert_false(m.has[KM_CACHED]);
    assert_int_equal(kmon_parse_meminfo(S("MemFree: 1 kB\n"), &m), -ENOENT);
    assert_int_equal(kmon_parse_meminfo(S("MemTotal: big kB\n"), &m), -EINVAL);
    assert_int_equal(kmon_parse_loadavg(S("0.50 1.25 2.00 3/456 7890\n"), &l), 0);
    assert_true(l.l1 == 0.5 && l.l5 == 1.25 && l.l15 == 2.0);
    assert_int_equal(l.running, 3);
    assert_int_equal(l.total, 456);
    assert_int_equal(kmon_parse_loadavg(S("0.5 1 2 3 4\n"), &l), -EINVAL);
    assert_int_equal(kmon_parse_loadavg(S("0.5 1 2 3/x 4\n"), &l), -EINVAL);
    assert_int_equal(kmon_parse_loadavg(S("0.5 nan 2 3/4 4\n"), &l), -EINVAL);
}

static void test_parse_diskstats(void **state)
{
    struct kmon_disk d[2];
    size_t n = 0;
    (void)state;
    assert_int_equal(kmon_parse_diskstats(S("   8 0 sda 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15\n\n"
                                            " 259 0 nvme0n1 10 0 20 0 30 0 40 0 0 50 0\n"), d, 2, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(d[0].name, "sda");
    assert_int_equal(d[0].c[KD_READS], 1);
    assert_int_equal(d[0].c[KD_SECT_READ], 3);
    assert_int_equal(d[0].c[KD_WRITES], 5);
    assert_int_equal(d[0].c[KD_SECT_WRITTEN], 7);
    assert_int_equal(d[0].c[KD_IO_MS], 10);
    assert_int_equal(d[1].c[KD_IO_MS], 50);
    assert_int_equal(kmon_parse_diskstats(S("   8 0 sda 1 2 3\n"), d, 2, &n), -EINVAL);
    assert_int_equal(kmon_parse_diskstats(S("   x 0 sda 1 2 3 4 5 6 7 8 9 10 11\n"), d, 2, &n), -EINVAL);
}

/* ---- whole cycles on the fixture trees ---- */

struct tree {
    char dir[64];
    char link[96];
};

static void tree_point(struct tree *t, const char *snap)
{
    char target[512];
    snprintf(target, sizeof(target), "%s/%s", FIXTURES, snap);
    unlink(t->link);
    assert_int_equal(symlink(target, t->link), 0);
}

static void tree_init(struct tree *t, const char *snap)
{
    snprintf(t->dir, sizeof(t->dir), "/tmp/kmonXXXXXX");
    assert_non_null(mkdtemp(t->dir));
    snprintf(t->link, sizeof(t->link), "%s/root", t->dir);
    tree_point(t, snap);
}

static void tree_fini(struct tree *t)
{
    unlink(t->link);
    rmdir(t->dir);
}

static const struct sink_kv *get(const struct sink_record *r, const char *key)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->kv[i].key, key) == 0)
            return &r->kv[i];
    return NULL;
}

static uint64_t get_u(const struct sink_record *r, const char *key)
{
    const struct sink_kv *kv = get(r, key);
    if (!kv)
        fail_msg("missing %s", key);
    assert_int_equal(kv->type, SINK_UINT);
    return kv->u;
}

/* Doubles compared as the JSON logger prints them ("%.3f"). */
static void assert_pct(const struct sink_record *r, const char *key, const char *want)
{
    const struct sink_kv *kv = get(r, key);
    char buf[32];
    if (!kv)
        fail_msg("missing %s", key);
    assert_int_equal(kv->type, SINK_DOUBLE);
    snprintf(buf, sizeof(buf), "%.3f", kv->d);
    assert_string_equal(buf, want);
}

static struct kmon *make(struct tree *t, bool extended, const char *filter)
{
    struct kmon *k = NULL;
    struct kmon_cfg cfg = { t->link, extended, filter != NULL, filter, 100 };
    assert_int_equal(kmon_create(&cfg, &k), 0);
    return k;
}

static void test_first_cycle(void **state)
{
    struct tree t;
    struct sink_record r;
    (void)state;
    tree_init(&t, "t0");
    struct kmon *k = make(&t, false, NULL);
    assert_int_equal(kmon_sample(k, 1, 1000000000ull, &r), 0);
    /* uptime only: every other upstream metric is a delta */
    assert_int_equal(r.n, 1);
    assert_int_equal(get_u(&r, "uptime"), 12345);
    assert_null(r.device);
    assert_int_equal(r.pid, SINK_NO_PID);
    kmon_destroy(k);

    k = make(&t, true, NULL);
    assert_int_equal(kmon_sample(k, 1, 1000000000ull, &r), 0);
    /* uptime + 8 memory + 5 load, no disk deltas yet */
    assert_int_equal(r.n, 14);
    assert_int_equal(get_u(&r, "mem_total_kb"), 16000000);
    assert_int_equal(get_u(&r, "mem_free_kb"), 4000000);
    assert_int_equal(get_u(&r, "mem_available_kb"), 12000000);
    assert_int_equal(get_u(&r, "mem_buffers_kb"), 100000);
    assert_int_equal(get_u(&r, "mem_cached_kb"), 2000000);
    assert_int_equal(get_u(&r, "mem_swap_total_kb"), 1000000);
    assert_int_equal(get_u(&r, "mem_swap_free_kb"), 900000);
    assert_pct(&r, "mem_used_pct", "25.000");
    assert_pct(&r, "load_1m", "0.500");
    assert_pct(&r, "load_5m", "1.250");
    assert_pct(&r, "load_15m", "2.000");
    assert_int_equal(get_u(&r, "procs_running"), 3);
    assert_int_equal(get_u(&r, "procs_total"), 456);
    assert_null(get(&r, "cpu_util"));
    assert_null(get(&r, "rx_bytes.eth0"));
    assert_null(get(&r, "disk_reads.sda"));
    kmon_destroy(k);
    tree_fini(&t);
}

static void test_second_cycle(void **state)
{
    struct tree t;
    struct sink_record r;
    (void)state;
    tree_init(&t, "t0");
    struct kmon *k = make(&t, true, NULL);
    kmon_sample(k, 1, 1000000000ull, &r);
    tree_point(&t, "t1");
    assert_int_equal(kmon_sample(k, 2, 3000000000ull, &r), 0); /* 2000 ms later */
    assert_int_equal(r.time_ns, 2);
    assert_int_equal(get_u(&r, "uptime"), 12347);
    /* Δ u n s i w x y z = 300 10 100 500 50 10 10 20 -> total 1000; g 30, gn 2 */
    assert_pct(&r, "cpu_util", "50.000");
    assert_pct(&r, "cpu_u", "30.000");
    assert_pct(&r, "cpu_s", "10.000");
    assert_pct(&r, "cpu_i", "50.000");
    assert_pct(&r, "cpu_guest", "3.000");
    assert_pct(&r, "cpu_guest_nice", "0.200");
    assert_int_equal(get_u(&r, "cpu_u_ms"), 3000);
    assert_int_equal(get_u(&r, "cpu_n_ms"), 100);
    assert_int_equal(get_u(&r, "cpu_s_ms"), 1000);
    assert_int_equal(get_u(&r, "cpu_w_ms"), 500);
    assert_int_equal(get_u(&r, "cpu_x_ms"), 100);
    assert_int_equal(get_u(&r, "cpu_y_ms"), 100);
    assert_int_equal(get_u(&r, "cpu_z_ms"), 200);
    assert_int_equal(get_u(&r, "cpu_guest_ms"), 300);
    assert_int_equal(get_u(&r, "cpu_guest_nice_ms"), 20);
    /* per core: cpu0 Δ total 500, idle 250; cpu1 total 500, idle 100; cpu2 is new (hotplug) */
    assert_pct(&r, "cpu_core_util.cpu0", "50.000");
    assert_pct(&r, "cpu_core_util.cpu1", "80.000");
    assert_null(get(&r, "cpu_core_util.cpu2"));
    /* network: eth0 (name touching its first number) deltas */
    assert_int_equal(get_u(&r, "rx_bytes.eth0"), 1500);
    assert_int_equal(get_u(&r, "rx_packets.eth0"), 15);
    assert_int_equal(get_u(&r, "rx_errors.eth0"), 1);
    assert_int_equal(get_u(&r, "rx_drops.eth0"), 2);
    assert_int_equal(get_u(&r, "tx_bytes.eth0"), 2000);
    assert_int_equal(get_u(&r, "tx_packets.eth0"), 20);
    assert_int_equal(get_u(&r, "tx_errors.eth0"), 0);
    assert_int_equal(get_u(&r, "tx_drops.eth0"), 1);
    assert_int_equal(get_u(&r, "rx_bytes.lo"), 100);
    /* eth1's rx_bytes went backwards (wrap): 0; its packets still count */
    assert_int_equal(get_u(&r, "rx_bytes.eth1"), 0);
    assert_int_equal(get_u(&r, "rx_packets.eth1"), 10);
    assert_int_equal(get_u(&r, "tx_bytes.eth1"), 20);
    /* ens5 is new: 0 for every counter; docker0 vanished; 16-character names never appear */
    assert_int_equal(get_u(&r, "rx_bytes.ens5"), 0);
    assert_int_equal(get_u(&r, "tx_packets.ens5"), 0);
    assert_null(get(&r, "rx_bytes.docker0"));
    assert_null(get(&r, "rx_bytes.abcdefghijklmnop"));
    assert_int_equal(get_u(&r, "tx_bytes.enp3s0"), 20);
    /* disks: whole devices only; sda at 25 % of 2000 ms */
    assert_int_equal(get_u(&r, "disk_reads.sda"), 50);
    assert_int_equal(get_u(&r, "disk_writes.sda"), 60);
    assert_int_equal(get_u(&r, "disk_read_bytes.sda"), 1000 * 512);
    assert_int_equal(get_u(&r, "disk_write_bytes.sda"), 100 * 512);
    assert_int_equal(get_u(&r, "disk_io_ms.sda"), 500);
    assert_pct(&r, "disk_util.sda", "25.000");
    /* nvme0n1: reads went backwards -> 0; 2500 ms of I/O in 2000 ms caps at 100 % */
    assert_int_equal(get_u(&r, "disk_reads.nvme0n1"), 0);
    assert_int_equal(get_u(&r, "disk_writes.nvme0n1"), 10);
    assert_int_equal(get_u(&r, "disk_write_bytes.nvme0n1"), 80 * 512);
    assert_int_equal(get_u(&r, "disk_io_ms.nvme0n1"), 2500);
    assert_pct(&r, "disk_util.nvme0n1", "100.000");
    /* sdb appeared: zeros */
    assert_int_equal(get_u(&r, "disk_reads.sdb"), 0);
    assert_pct(&r, "disk_util.sdb", "0.000");
    assert_null(get(&r, "disk_reads.sda1"));  /* a partition: no /sys/block/sda1 */
    assert_null(get(&r, "disk_reads.loop0"));
    assert_null(get(&r, "disk_reads.ram0"));
    assert_int_equal(get_u(&r, "mem_free_kb"), 3000000);
    assert_pct(&r, "mem_used_pct", "50.000");
    assert_int_equal(get_u(&r, "procs_running"), 5);
    /* 1 uptime + 15 cpu + 2 cores + 8 x 5 interfaces (lo eth0 eth1 ens5 enp3s0) + 6 x 3 disks
     * + 13 memory and load */
    assert_int_equal(r.n, 1 + 15 + 2 + 8 * 5 + 6 * 3 + 13);
    /* a third identical snapshot: every delta 0, CPU skipped (Δtotal = 0) */
    assert_int_equal(kmon_sample(k, 3, 4000000000ull, &r), 0);
    assert_null(get(&r, "cpu_util"));
    assert_null(get(&r, "cpu_core_util.cpu0"));
    assert_int_equal(get_u(&r, "rx_bytes.eth0"), 0);
    assert_pct(&r, "disk_util.sda", "0.000");
    assert_int_equal(kmon_cycles(k), 3);
    kmon_destroy(k);
    tree_fini(&t);
}

static void test_nic_filter(void **state)
{
    struct tree t;
    struct sink_record r;
    (void)state;
    tree_init(&t, "t0");
    struct kmon *k = make(&t, false, "eth,en");
    kmon_sample(k, 1, 1, &r);
    tree_point(&t, "t1");
    kmon_sample(k, 2, 2, &r);
    assert_null(get(&r, "rx_bytes.lo"));
    assert_int_equal(get_u(&r, "rx_bytes.eth0"), 1500);
    assert_int_equal(get_u(&r, "rx_bytes.ens5"), 0);
    assert_int_equal(get_u(&r, "rx_bytes.enp3s0"), 10);
    assert_int_equal(r.n, 1 + 15 + 8 * 4);
    kmon_destroy(k);
    tree_fini(&t);
}

static void test_bad_and_missing_files(void **state)
{
    struct tree t;
    struct sink_record r;
    (void)state;
    tree_init(&t, "bad");
    struct kmon *k = make(&t, true, NULL);
    /* every file malformed: nothing reported, nothing crashes */
    assert_int_equal(kmon_sample(k, 1, 1, &r), 0);
    assert_int_equal(r.n, 0);
    assert_int_equal(kmon_sample(k, 2, 2, &r), 0);
    assert_int_equal(r.n, 0);
    /* the deltas restart from the first good snapshot: t0 is a "first" cycle again */
    tree_point(&t, "t0");
    kmon_sample(k, 3, 1000000000ull, &r);
    assert_null(get(&r, "cpu_util"));
    assert_null(get(&r, "rx_bytes.eth0"));
    tree_point(&t, "t1");
    kmon_sample(k, 4, 3000000000ull, &r);
    assert_pct(&r, "cpu_util", "50.000");
    assert_pct(&r, "disk_util.sda", "25.000");
    kmon_destroy(k);
    /* a root without /proc at all */
    unlink(t.link);
    assert_int_equal(symlink("/nonexistent-kmon-root", t.link), 0);
    k = make(&t, true, NULL);
    assert_int_equal(kmon_sample(k, 1, 1, &r), 0);
    assert_int_equal(r.n, 0);
    kmon_destroy(k);
    tree_fini(&t);
}

static void test_read_cap(void **state)
{
    char buf[8];
    (void)state;
    assert_int_equal(kmon_proc_read(FIXTURES "/t0", "proc/uptime", buf, sizeof(buf)), -EFBIG);
    assert_int_equal(kmon_proc_read(FIXTURES "/t0", "proc/nope", buf, sizeof(buf)), -ENOENT);
    char big[64];
    assert_int_equal(kmon_proc_read(FIXTURES "/t0/", "/proc/uptime", big, sizeof(big)), 17);
    assert_string_equal(big, "12345.67 2345.11\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_uptime),     cmocka_unit_test(test_parse_stat),
        cmocka_unit_test(test_parse_netdev),     cmocka_unit_test(test_parse_meminfo_loadavg),
        cmocka_unit_test(test_parse_diskstats),  cmocka_unit_test(test_first_cycle),
        cmocka_unit_test(test_second_cycle),     cmocka_unit_test(test_nic_filter),
        cmocka_unit_test(test_bad_and_missing_files), cmocka_unit_test(test_read_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
