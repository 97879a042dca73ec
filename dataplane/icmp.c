/*
 * ICMP echo request validation and in-place reply (see icmp.h).
 */
#include "dataplane/icmp.h"

#include "common/assert.h"
#include "dataplane/csum.h"
#include "dataplane/netbytes.h"

enum icmp_parse_result icmp_parse(const uint8_t *msg, size_t msg_size)
{
	HASP_ASSERT(msg != NULL || msg_size == 0);
	if (msg_size < ICMP_HDR_SIZE)
		return ICMP_PARSE_TRUNCATED;
	if (msg_size > 65535 || csum_fold(csum_add(0, msg, msg_size)) != 0)
		return ICMP_PARSE_BAD_CSUM;
	if (msg[0] != ICMP_TYPE_ECHO_REQUEST || msg[1] != 0)
		return ICMP_PARSE_OTHER;
	return ICMP_PARSE_ECHO_REQUEST;
}

void icmp_echo_reply_in_place(uint8_t *msg, size_t msg_size)
{
	HASP_ASSERT(msg != NULL && msg_size >= ICMP_HDR_SIZE);
	HASP_ASSERT(msg[0] == ICMP_TYPE_ECHO_REQUEST);
	/* Recompute rather than patch incrementally: messages are small and a
	 * full sum cannot carry a wrong checksum forward. */
	msg[0] = ICMP_TYPE_ECHO_REPLY;
	put_be16(msg + 2, 0);
	put_be16(msg + 2, csum_fold(csum_add(0, msg, msg_size)));
	HASP_DASSERT(csum_fold(csum_add(0, msg, msg_size)) == 0);
}
