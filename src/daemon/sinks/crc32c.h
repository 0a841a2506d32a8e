/* crc32c: CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) and the TFRecord masking of
 * docs/design/outputs.md#tensorboard, for the TensorBoard logger. Table-driven, no hardware dependency. */
#ifndef MSMON_DAEMON_CRC32C_H
#define MSMON_DAEMON_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* crc32c of data[0..n) ("123456789" -> 0xE3069283). */
uint32_t crc32c(const void *data, size_t n);
/* ((c >> 15) | (c << 17)) + 0xa282ead8 with c = crc32c(data). */
uint32_t crc32c_masked(const void *data, size_t n);

#endif
