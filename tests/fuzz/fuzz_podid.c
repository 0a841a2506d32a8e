/* fuzz_podid: the attribution parsers (contract/podid.c) on bytes a hostile process controls:
 * a /proc/<pid>/cgroup text (cgroup names are chosen by whoever may create them), a status
 * text's NSpid line, a /proc/<pid>/stat line (the command name is the process's), and
 * downward-API values. They must never read past the view, and what they
 * accept must keep its promises: a container id is 64 lower-case hex digits, a pod UID is
 * 8-4-4-4-12 lower-case hex, NSpid values are 1..INT32_MAX within the cap, and a name that
 * passes podid_valid holds only [A-Za-z0-9._-]. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "contract/podid.h"
#include "daemon/ipc/peer.h"

const char *const fuzz_seeds[] = {
    "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1b4e28ba_2fa1_11d2_883f_0016d3cca427.slice/"
    "cri-containerd-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope\n",
    "12:memory:/kubepods/besteffort/pod1b4e28ba-2fa1-11d2-883f-0016d3cca427/"
    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n0::/\n",
    "4:cpu:/docker/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n",
    "0::/machine.slice/libpod-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope\n",
    "Name:\tpython3\nNSpid:\t31337\t7\nPPid:\t1\n",
    "trainer-a-0",
    "4242 (python3 (a) b) S 17 4242 4242 0 -1 4194560\n",
};
const size_t fuzz_nseeds = sizeof(fuzz_seeds) / sizeof(fuzz_seeds[0]);

static void check_hex(const char *s, size_t want)
{
    size_t n = strnlen(s, want + 1);
    if (n != 0 && n != want)
        __builtin_trap();
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') || (want == 36 && s[i] == '-')))
            __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* an exact-size copy, so reading past the view is an ASan report */
    char *t = malloc(size ? size : 1);
    struct podid_cgroup cg;
    struct podid_self self;
    int32_t v[4];
    size_t n = 0;

    if (!t)
        return 0;
    memcpy(t, data, size);
    if (podid_cgroup_parse(t, size, &cg) == 0 && !cg.container_id[0] && !cg.pod_uid[0])
        __builtin_trap();
    check_hex(cg.container_id, 64);
    check_hex(cg.pod_uid, 36);
    if (podid_nspid_parse(t, size, v, 4, &n) == 0) {
        if (n < 1 || n > 4)
            __builtin_trap();
        for (size_t i = 0; i < n; i++)
            if (v[i] < 1)
                __builtin_trap();
    }
    int32_t ppid = -1;
    char state = 0;
    if (peer_parse_stat(t, size, &ppid, &state) == 0 && ppid < 0)
        __builtin_trap();
    for (int f = 0; f < PODID_NFIELDS; f++) {
        if (podid_self_set(&self, (enum podid_field)f, t, size) != 0)
            continue;
        size_t k = strlen(self.v[f]);
        if (k != size || k > podid_cap((enum podid_field)f))
            __builtin_trap();
        for (size_t i = 0; i < k; i++) {
            char c = self.v[f][i];
            if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' ||
                  c == '-' || c == '_'))
                __builtin_trap();
        }
    }
    free(t);
    return 0;
}
