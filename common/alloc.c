/*
 * hasp_alloc(): counted allocation with failure injection. The counters are
 * atomics because node threads (control, storage, lcores) share them; the
 * cost is irrelevant because nothing on the hot path allocates.
 */
#include "common/alloc.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#ifndef NDEBUG
#include <execinfo.h>
#endif

#define FAIL_NEVER UINT64_MAX

static _Atomic uint64_t alloc_count;
static _Atomic uint64_t free_count;
static _Atomic uint64_t failed_count;
static _Atomic uint64_t forbidden_count;
static _Atomic uint64_t fail_budget = FAIL_NEVER;
static _Thread_local bool thread_forbidden;

/* True when this allocation must fail by injection. */
static bool alloc_injected_failure(void)
{
	uint64_t budget = atomic_load_explicit(&fail_budget, memory_order_relaxed);
	while (budget != FAIL_NEVER) {
		if (budget == 0)
			return true;
		if (atomic_compare_exchange_weak(&fail_budget, &budget, budget - 1))
			return false;
	}
	return false;
}

/* Debug builds: HASP_ALLOC_FORBID_TRACE=1 in the environment prints a
 * backtrace to stderr for each allocation on a forbidden thread, to find
 * the site (addr2line -f -e <binary> <offset>) when alloc_forbidden moves. */
static void alloc_forbidden_trace(void)
{
#ifndef NDEBUG
	static const char msg[] = "hasp_alloc on a forbidden thread:\n";
	const char *env = getenv("HASP_ALLOC_FORBID_TRACE");
	void *frames[32];

	if (env == NULL || env[0] != '1')
		return;
	(void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
	backtrace_symbols_fd(frames, backtrace(frames, 32), STDERR_FILENO);
#endif
}

static void *alloc_account(void *ptr)
{
	if (ptr == NULL) {
		atomic_fetch_add_explicit(&failed_count, 1, memory_order_relaxed);
		return NULL;
	}
	atomic_fetch_add_explicit(&alloc_count, 1, memory_order_relaxed);
	if (thread_forbidden) {
		atomic_fetch_add_explicit(&forbidden_count, 1, memory_order_relaxed);
		alloc_forbidden_trace();
	}
	return ptr;
}

void *hasp_alloc(size_t size)
{
	if (size == 0 || alloc_injected_failure())
		return alloc_account(NULL);
	return alloc_account(malloc(size));
}

void *hasp_calloc(size_t count, size_t size)
{
	/* Refuse an overflowing product here rather than rely on calloc(). */
	if (count == 0 || size == 0 || count > SIZE_MAX / size || alloc_injected_failure())
		return alloc_account(NULL);
	return alloc_account(calloc(count, size));
}

void *hasp_alloc_aligned(size_t align, size_t size)
{
	void *ptr = NULL;

	if (size == 0 || (align & (align - 1)) != 0 || alloc_injected_failure())
		return alloc_account(NULL);
	if (align < sizeof(void *))
		align = sizeof(void *);
	if (posix_memalign(&ptr, align, size) != 0)
		ptr = NULL;
	return alloc_account(ptr);
}

void hasp_free(void *ptr)
{
	if (ptr == NULL)
		return;
	atomic_fetch_add_explicit(&free_count, 1, memory_order_relaxed);
	free(ptr);
}

void hasp_alloc_fail_after(uint64_t count)
{
	atomic_store(&fail_budget, count);
}

void hasp_alloc_fail_never(void)
{
	atomic_store(&fail_budget, FAIL_NEVER);
}

void hasp_alloc_forbid_thread(bool forbid)
{
	thread_forbidden = forbid;
}

void hasp_alloc_stats_get(struct hasp_alloc_stats *stats)
{
	stats->alloc_count = atomic_load(&alloc_count);
	stats->free_count = atomic_load(&free_count);
	stats->failed_count = atomic_load(&failed_count);
	stats->forbidden_count = atomic_load(&forbidden_count);
}
