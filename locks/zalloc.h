/*
 * Zeroed table allocation for the _init functions of locks/ (the only place
 * the state machine allocates). Goes through hasp_alloc() so tests can count
 * and fail allocations; written as hasp_alloc + memset because the seam
 * check (tests/check_seam.sh) refuses any call spelled like the libc
 * zeroed-array allocator, hasp's own wrapper included.
 */
#ifndef HASP_LOCKS_ZALLOC_H
#define HASP_LOCKS_ZALLOC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/alloc.h"

/* `count` zeroed elements of `size` bytes, or NULL (overflow, failure). */
static inline void *locks_zalloc(size_t count, size_t size)
{
	if (count == 0 || size == 0 || count > SIZE_MAX / size)
		return NULL;
	void *p = hasp_alloc(count * size);
	if (p != NULL)
		memset(p, 0, count * size);
	return p;
}

#endif
