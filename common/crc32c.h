/*
 * crc32c.h - CRC-32C (Castagnoli), the checksum of iSCSI, ext4 and RoCE's
 * ICRC family, for the transport's optional message checksums
 * (GX_CHECKSUM). Uses the SSE4.2 instruction where the CPU has it.
 */
#ifndef GX_CRC32C_H
#define GX_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/** CRC-32C of `len` bytes, continuing from `crc` (start with 0). */
uint32_t gx_crc32c(uint32_t crc, const void *buf, size_t len);

#endif
