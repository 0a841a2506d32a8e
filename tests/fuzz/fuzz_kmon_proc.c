/* fuzz_kmon_proc: every /proc parser of the kernel monitor must never read past the text,
 * loop, or report more entries (or longer names) than its caps, whatever the bytes. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "daemon/collectors/kmon_proc.h"

const char *const fuzz_seeds[] = {
    "12345.67 2345.11\n",
    "cpu  1000 10 500 8000 100 20 30 40 50 5\ncpu0 500 5 250 4000 50 10 15 20 25 2\nintr 1\n",
    "Inter-|   Receive |  Transmit\n face |bytes|bytes\n  eth0:1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n",
    "MemTotal: 16000000 kB\nMemAvailable: 12000000 kB\n",
    "0.50 1.25 2.00 3/456 7890\n",
    "   8       0 sda 100 5 2000 30 200 6 4000 50 0 300 80 0 0 0 0\n",
};
const size_t fuzz_nseeds = sizeof(fuzz_seeds) / sizeof(fuzz_seeds[0]);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct kmon_netif nif[8];
    static struct kmon_disk disks[8];
    static struct kmon_core cores[8];
    const char *s = (const char *)data;
    uint64_t up;
    struct kmon_cpu cpu;
    struct kmon_mem mem;
    struct kmon_load load;
    size_t n = 0;

    (void)kmon_parse_uptime(s, size, &up);
    (void)kmon_parse_stat(s, size, &cpu);
    if (kmon_parse_stat_cores(s, size, cores, 8, &n) == 0 && n > 8)
        __builtin_trap();
    if (kmon_parse_netdev(s, size, NULL, nif, 8, &n) == 0) {
        if (n > 8)
            __builtin_trap();
        for (size_t i = 0; i < n; i++)
            if (strnlen(nif[i].name, KMON_NAME_CAP) >= KMON_NAME_CAP || nif[i].name[0] == '\0')
                __builtin_trap();
    }
    (void)kmon_parse_netdev(s, size, "eth,en", nif, 8, &n);
    (void)kmon_parse_meminfo(s, size, &mem);
    (void)kmon_parse_loadavg(s, size, &load);
    if (kmon_parse_diskstats(s, size, disks, 8, &n) == 0) {
        if (n > 8)
            __builtin_trap();
        for (size_t i = 0; i < n; i++)
            if (strnlen(disks[i].name, KMON_DISK_NAME_CAP) >= KMON_DISK_NAME_CAP)
                __builtin_trap();
    }
    return 0;
}
