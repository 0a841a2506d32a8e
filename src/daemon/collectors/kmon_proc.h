/* kmon_proc: parsers of the /proc files behind the host metrics (docs/design/daemon.md#host-metrics): uptime,
 * stat, net/dev, meminfo, loadavg, diskstats. Each takes a {ptr, len} view of the file text and
 * fills a plain struct; kmon_proc_read reads <root>/<rel> so tests run on fixture trees. */
#ifndef MSMON_DAEMON_KMON_PROC_H
#define MSMON_DAEMON_KMON_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KMON_FILE_MAX (256 * 1024) /* cap on one /proc file; a longer one is an error */
#define KMON_MAX_IFACES 256
#define KMON_MAX_DISKS 256
#define KMON_NAME_CAP 16           /* names of 16 or more characters are skipped (docs/design/daemon.md#host-metrics) */
#define KMON_DISK_NAME_CAP 32

/* Reads <root>/<rel> into buf (NUL-terminated) with a cap of cap-1 bytes. Returns the length,
 * -errno when unreadable, -EFBIG when longer than the cap. */
long kmon_proc_read(const char *root, const char *rel, char *buf, size_t cap);
/* true when <root>/<rel> exists (the /sys/block/<dev> test for whole disks). */
bool kmon_proc_exists(const char *root, const char *rel);

/* /proc/uptime: first field truncated to whole seconds. */
int kmon_parse_uptime(const char *s, size_t len, uint64_t *ret_secs);

/* /proc/stat, aggregate "cpu" line: u n s i w x y z g gn (missing trailing fields = 0; at
 * least the first four are required). */
enum { KC_U, KC_N, KC_S, KC_I, KC_W, KC_X, KC_Y, KC_Z, KC_G, KC_GN, KC_COUNT };
struct kmon_cpu {
    uint64_t t[KC_COUNT];
};
int kmon_parse_stat(const char *s, size_t len, struct kmon_cpu *ret);
/* The per-core "cpu<N>" lines of /proc/stat (per-core utilisation), in file order. */
#define KMON_MAX_CORES 1024
struct kmon_core {
    uint32_t id;
    struct kmon_cpu c;
};
int kmon_parse_stat_cores(const char *s, size_t len, struct kmon_core *ret, size_t cap, size_t *ret_n);

/* /proc/net/dev: one entry per interface line, in file order. */
enum { KN_RX_BYTES, KN_RX_PACKETS, KN_RX_ERRS, KN_RX_DROP, KN_TX_BYTES, KN_TX_PACKETS, KN_TX_ERRS,
       KN_TX_DROP, KN_COUNT };
struct kmon_netif {
    char name[KMON_NAME_CAP];
    uint64_t c[KN_COUNT];
};
/* Skips interfaces with names of 16+ characters and (when prefixes is non-NULL) names without
 * one of the comma-listed prefixes. At most cap entries; *ret_n is the count. */
int kmon_parse_netdev(const char *s, size_t len, const char *prefixes, struct kmon_netif *ret,
                      size_t cap, size_t *ret_n);

/* /proc/meminfo (kB). has_* says whether the key was present. */
enum { KM_TOTAL, KM_FREE, KM_AVAILABLE, KM_BUFFERS, KM_CACHED, KM_SWAP_TOTAL, KM_SWAP_FREE, KM_COUNT };
struct kmon_mem {
    uint64_t kb[KM_COUNT];
    bool has[KM_COUNT];
};
int kmon_parse_meminfo(const char *s, size_t len, struct kmon_mem *ret);

/* /proc/loadavg: "l1 l5 l15 running/total lastpid". */
struct kmon_load {
    double l1, l5, l15;
    uint64_t running, total;
};
int kmon_parse_loadavg(const char *s, size_t len, struct kmon_load *ret);

/* /proc/diskstats: reads and writes completed, sectors read and written, ms doing I/O. */
enum { KD_READS, KD_SECT_READ, KD_WRITES, KD_SECT_WRITTEN, KD_IO_MS, KD_COUNT };
struct kmon_disk {
    char name[KMON_DISK_NAME_CAP];
    uint64_t c[KD_COUNT];
};
/* All devices of the file (the whole-disk and loop/ram filter is the caller's: it needs the
 * root). Names of 32+ characters are skipped. */
int kmon_parse_diskstats(const char *s, size_t len, struct kmon_disk *ret, size_t cap, size_t *ret_n);

#endif
