/*
 * hasp_strerror(): the message half of the X-macro table in errors.h.
 */
#include "hasp/errors.h"

static int error_abs(int code)
{
	return code < 0 ? -code : code;
}

const char *hasp_strerror(int code)
{
	switch (error_abs(code)) {
	case 0:
		return "success";
#define HASP_ERROR_MSG(name, value, msg) \
	case value:                      \
		return msg;
		HASP_ERROR_TABLE(HASP_ERROR_MSG)
#undef HASP_ERROR_MSG
	}
	return "unknown error";
}

const char *hasp_strerror_name(int code)
{
	switch (error_abs(code)) {
	case 0:
		return "OK";
#define HASP_ERROR_NAME(name, value, msg) \
	case value:                       \
		return #name;
		HASP_ERROR_TABLE(HASP_ERROR_NAME)
#undef HASP_ERROR_NAME
	}
	return "EUNKNOWN";
}
