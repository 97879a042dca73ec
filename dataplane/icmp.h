/*
 * ICMP echo (RFC 792): the node answers ping so operators and tests can see
 * that the dataplane is alive; every other ICMP type is counted and dropped.
 *
 *   offset size field (after the IPv4 header)
 *   0      1    type: 8 echo request, 0 echo reply
 *   1      1    code: 0
 *   2      2    checksum over the whole ICMP message
 *   4      2    identifier  (echoed)
 *   6      2    sequence    (echoed)
 *   8      ...  data        (echoed)
 */
#ifndef HASP_DATAPLANE_ICMP_H
#define HASP_DATAPLANE_ICMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ICMP_HDR_SIZE 8u
#define ICMP_TYPE_ECHO_REPLY 0u
#define ICMP_TYPE_ECHO_REQUEST 8u

enum icmp_parse_result {
	ICMP_PARSE_ECHO_REQUEST = 0,
	ICMP_PARSE_TRUNCATED, /* fewer than 8 bytes */
	ICMP_PARSE_BAD_CSUM,
	ICMP_PARSE_OTHER,     /* a valid message that is not an echo request */
};

/* Validates the ICMP message `msg` (the IPv4 payload, exactly). */
enum icmp_parse_result icmp_parse(const uint8_t *msg, size_t msg_size);

/* Turns the echo request `msg` into the echo reply in place: type 0 and the
 * checksum adjusted; identifier, sequence and data unchanged. */
void icmp_echo_reply_in_place(uint8_t *msg, size_t msg_size);

#endif
