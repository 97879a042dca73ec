/*
 * CRC32C, reflected polynomial 0x82F63B78. The hardware path feeds 8 bytes
 * per crc32q; the table path is byte-at-a-time, which is only used on CPUs
 * without SSE4.2 and in the cross-check test.
 */
#include "common/crc32c.h"

#include <string.h>

#define CRC32C_POLY_REFLECTED 0x82F63B78u

static uint32_t crc_table[256];
static bool crc_hw;

__attribute__((constructor)) static void crc32c_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1u) ? (c >> 1) ^ CRC32C_POLY_REFLECTED : c >> 1;
		crc_table[i] = c;
	}
#if defined(__x86_64__)
	__builtin_cpu_init();
	crc_hw = __builtin_cpu_supports("sse4.2");
#endif
}

uint32_t crc32c_extend_sw(uint32_t crc, const void *data, size_t size)
{
	const uint8_t *p = data;

	crc = ~crc;
	while (size-- > 0)
		crc = crc_table[(crc ^ *p++) & 0xffu] ^ (crc >> 8);
	return ~crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc32c_extend_hw(uint32_t crc, const void *data,
								    size_t size)
{
	const uint8_t *p = data;
	uint64_t c = ~crc;

	while (size >= 8) {
		uint64_t word;
		memcpy(&word, p, sizeof(word));
		c = __builtin_ia32_crc32di(c, word);
		p += 8;
		size -= 8;
	}
	while (size-- > 0)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return ~(uint32_t)c;
}
#endif

uint32_t crc32c_extend(uint32_t crc, const void *data, size_t size)
{
#if defined(__x86_64__)
	if (crc_hw)
		return crc32c_extend_hw(crc, data, size);
#endif
	return crc32c_extend_sw(crc, data, size);
}

bool crc32c_hw_available(void)
{
	return crc_hw;
}
