/*
 * The one allocator of hasp outside DPDK memory.
 *
 * All heap allocation goes through hasp_alloc()/hasp_free() (jemalloc
 * underneath when linked, like Redis's zmalloc), so that tests can count
 * allocations and inject failures, and so that a thread that must never
 * allocate (a dataplane lcore after start, the pure cores after init) can be
 * checked: allocations from a thread marked with hasp_alloc_forbid_thread()
 * still succeed but bump a counter that tests require to stay zero.
 */
#ifndef HASP_COMMON_ALLOC_H
#define HASP_COMMON_ALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hasp_alloc_stats {
	uint64_t alloc_count;     /* successful allocations */
	uint64_t free_count;      /* non-NULL frees */
	uint64_t failed_count;    /* injected or real failures */
	uint64_t forbidden_count; /* allocations on a forbidden thread */
};

/* Returns NULL on failure (real or injected). Size 0 returns NULL. */
void *hasp_alloc(size_t size) __attribute__((malloc, warn_unused_result));
/* Zeroed array allocation; NULL on overflow or failure. */
void *hasp_calloc(size_t count, size_t size) __attribute__((malloc, warn_unused_result));
/* Aligned allocation (O_DIRECT buffers); align is a power of two. */
void *hasp_alloc_aligned(size_t align, size_t size) __attribute__((malloc, warn_unused_result));
/* Frees what any of the above returned; NULL is ignored. */
void hasp_free(void *ptr);

/* Failure injection: after `count` more successful allocations, every
 * allocation fails until hasp_alloc_fail_never(). */
void hasp_alloc_fail_after(uint64_t count);
void hasp_alloc_fail_never(void);

/* Marks the calling thread as one that must not allocate (see above). */
void hasp_alloc_forbid_thread(bool forbid);

void hasp_alloc_stats_get(struct hasp_alloc_stats *stats);

#endif
