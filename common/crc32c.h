/*
 * CRC32C (Castagnoli), the checksum of WAL records, snapshots and Raft
 * messages. Uses the SSE4.2 crc32 instruction when the CPU has it and a
 * table otherwise; both give identical results (a unit test checks).
 */
#ifndef HASP_COMMON_CRC32C_H
#define HASP_COMMON_CRC32C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Extends `crc` (0 to start) over `size` bytes. Chaining calls over split
 * buffers gives the same result as one call over the whole. */
uint32_t crc32c_extend(uint32_t crc, const void *data, size_t size);

static inline uint32_t crc32c(const void *data, size_t size)
{
	return crc32c_extend(0, data, size);
}

/* The portable implementation, exposed for tests and for CPUs without SSE4.2. */
uint32_t crc32c_extend_sw(uint32_t crc, const void *data, size_t size);

/* True when crc32c_extend() uses the hardware instruction. */
bool crc32c_hw_available(void);

#endif
