/*
 * Names of the shared enums, for logs, the CLI and test failure messages,
 * and the map between reply statuses and libhasp's error codes.
 */
#include "hasp/types.h"

#include "hasp/errors.h"

const char *hasp_status_name(uint32_t status)
{
	static const char *const names[HASP_STATUS_COUNT] = {
		[HASP_STATUS_OK] = "OK",
		[HASP_STATUS_GRANTED] = "GRANTED",
		[HASP_STATUS_QUEUED] = "QUEUED",
		[HASP_STATUS_BUSY] = "BUSY",
		[HASP_STATUS_NOT_HOLDER] = "NOT_HOLDER",
		[HASP_STATUS_NOT_LEADER] = "NOT_LEADER",
		[HASP_STATUS_NOT_FOUND] = "NOT_FOUND",
		[HASP_STATUS_COMPARE_FAILED] = "COMPARE_FAILED",
		[HASP_STATUS_SESSION_EXPIRED] = "SESSION_EXPIRED",
		[HASP_STATUS_LEASE_EXPIRED] = "LEASE_EXPIRED",
		[HASP_STATUS_FULL] = "FULL",
		[HASP_STATUS_BAD_REQUEST] = "BAD_REQUEST",
		[HASP_STATUS_BAD_VERSION] = "BAD_VERSION",
		[HASP_STATUS_BAD_OPCODE] = "BAD_OPCODE",
		[HASP_STATUS_BAD_NAME] = "BAD_NAME",
		[HASP_STATUS_BAD_TTL] = "BAD_TTL",
		[HASP_STATUS_TOO_LARGE] = "TOO_LARGE",
		[HASP_STATUS_UNAVAILABLE] = "UNAVAILABLE",
		[HASP_STATUS_OVERLOADED] = "OVERLOADED",
		[HASP_STATUS_FORBIDDEN] = "FORBIDDEN",
	};
	if (status >= HASP_STATUS_COUNT || names[status] == 0)
		return "?";
	return names[status];
}

int hasp_status_error(uint32_t status)
{
	switch (status) {
	case HASP_STATUS_OK:
	case HASP_STATUS_GRANTED:
		return 0;
	case HASP_STATUS_BUSY:
		return -HASP_EBUSY;
	case HASP_STATUS_NOT_HOLDER:
		return -HASP_ENOTHOLDER;
	case HASP_STATUS_NOT_FOUND:
		return -HASP_ENOENT;
	case HASP_STATUS_COMPARE_FAILED:
		return -HASP_ECOMPARE;
	case HASP_STATUS_SESSION_EXPIRED:
		return -HASP_ESESSION;
	case HASP_STATUS_LEASE_EXPIRED:
		return -HASP_ELEASE;
	case HASP_STATUS_FULL:
		return -HASP_EFULL;
	case HASP_STATUS_FORBIDDEN:
		return -HASP_EFORBIDDEN;
	case HASP_STATUS_BAD_REQUEST:
		return -HASP_EREFUSED;
	case HASP_STATUS_BAD_VERSION:
		return -HASP_EVERSION;
	case HASP_STATUS_BAD_OPCODE:
		return -HASP_EOPCODE;
	case HASP_STATUS_BAD_NAME:
		return -HASP_ENAME;
	case HASP_STATUS_BAD_TTL:
		return -HASP_ERANGE;
	case HASP_STATUS_TOO_LARGE:
		return -HASP_ETOOBIG;
	case HASP_STATUS_NOT_LEADER:
		return -HASP_ENOTLEADER;
	case HASP_STATUS_QUEUED:
	case HASP_STATUS_UNAVAILABLE:
	case HASP_STATUS_OVERLOADED:
		return -HASP_EAGAIN;
	default:
		return -HASP_ECORRUPT;
	}
}

int hasp_error_status(int error)
{
	switch (error < 0 ? -error : error) {
	case 0:
		return HASP_STATUS_OK;
	case HASP_EBUSY:
		return HASP_STATUS_BUSY;
	case HASP_ENOTHOLDER:
		return HASP_STATUS_NOT_HOLDER;
	case HASP_ENOENT:
		return HASP_STATUS_NOT_FOUND;
	case HASP_ECOMPARE:
		return HASP_STATUS_COMPARE_FAILED;
	case HASP_ESESSION:
		return HASP_STATUS_SESSION_EXPIRED;
	case HASP_ELEASE:
		return HASP_STATUS_LEASE_EXPIRED;
	case HASP_EFULL:
		return HASP_STATUS_FULL;
	case HASP_EFORBIDDEN:
		return HASP_STATUS_FORBIDDEN;
	case HASP_EREFUSED:
		return HASP_STATUS_BAD_REQUEST;
	default:
		return -1;
	}
}
