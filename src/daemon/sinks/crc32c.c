/* crc32c: one 256-entry table built on first use (the loop thread is the only caller, and the
 * build is idempotent, so a racing second builder would write the same values). */
#include "daemon/sinks/crc32c.h"

#include <stdbool.h>

static uint32_t table[256];
static bool built;

static void build(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1u ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        table[i] = c;
    }
    built = true;
}

uint32_t crc32c(const void *data, size_t n)
{
    const uint8_t *p = data;
    uint32_t c = 0xFFFFFFFFu;
    if (!built)
        build();
    for (size_t i = 0; i < n; i++)
        c = table[(c ^ p[i]) & 0xFFu] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

uint32_t crc32c_masked(const void *data, size_t n)
{
    uint32_t c = crc32c(data, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}
