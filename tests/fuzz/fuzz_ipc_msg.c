/* fuzz_ipc_msg: the datagram codec must never read past the buffer or accept a header whose
 * size exceeds what arrived, whatever the bytes. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ipc/ipc_msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ipc_view v;
    enum ipc_drop d = ipc_msg_parse(data, size, size, IPC_MAX_DATAGRAM, &v);
    if (d != IPC_OK)
        return 0;
    if (v.payload + v.len > data + size)
        __builtin_trap();
    struct ipc_ctxt c;
    struct ipc_status s;
    struct ipc_req r;
    int32_t pids[IPC_REQ_MAX_PIDS];
    int n = 0;
    (void)ipc_parse_ctxt(&v, &c);
    (void)ipc_parse_status(&v, &s);
    if (ipc_parse_req(&v, &r, pids, &n) == 0 && (n < 0 || n > IPC_REQ_MAX_PIDS))
        __builtin_trap();
    return 0;
}
