/*
 * Fuzz target: the classifier on arbitrary frames. The first byte picks the
 * checksum hints (so the offload paths are explored too); the rest is the
 * frame, copied into an exact-size heap buffer so ASan catches any read or
 * in-place write past its end. Checks the one-outcome-per-frame accounting
 * and that replies fit in the frame.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "dataplane/classify.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct classify_config cfg = {
		.mac = { { 0x02, 0x77, 0, 0, 0, 0x01 } },
		.ip = 0x0ac76301u,
		.ports = { 7700, 7701 },
		.port_count = 2,
	};
	struct classify_hints hints = { CLASSIFY_CSUM_UNKNOWN, CLASSIFY_CSUM_UNKNOWN };
	struct classify_result res;
	struct dp_stats stats = { 0 };

	if (size < 1)
		return 0;
	hints.ip_csum = (enum classify_csum)(data[0] % 3);
	hints.l4_csum = (enum classify_csum)((data[0] / 3) % 3);
	data++;
	size--;
	uint8_t *frame = malloc(size > 0 ? size : 1);
	if (frame == NULL)
		return 0;
	memcpy(frame, data, size);
	classify_frame(&cfg, frame, size, &hints, &res, &stats);
	HASP_ASSERT(stats.rx_frames == 1);
	HASP_ASSERT(dp_stats_rx_outcomes(&stats) == 1);
	HASP_ASSERT(res.verdict != CLASSIFY_REPLY || res.reply_size <= size);
	if (res.verdict == CLASSIFY_UDP) {
		HASP_ASSERT(res.udp.payload >= frame);
		HASP_ASSERT(res.udp.payload + res.udp.payload_size <= frame + size);
	}
	free(frame);
	return 0;
}
