/*
 * The history of a node simulation run as JSON lines in the real-cluster
 * suite's format (tests/fault/checker.py, load()), kept in memory: the
 * digest of the bytes is what "same seed, same run" compares.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "tests/nodesim/nodesim.h"

struct nodesim_history {
	char *buf;
	size_t used, size;
	uint64_t records;
};

void nodesim_grow(void **items, uint32_t count, uint32_t *size, size_t elem, uint32_t first)
{
	if (count < *size)
		return;
	uint32_t n = *size ? *size * 2 : first;
	void *grown = hasp_calloc(n, elem);
	HASP_ASSERT(grown != NULL);
	if (count > 0)
		memcpy(grown, *items, count * elem);
	hasp_free(*items);
	*items = grown;
	*size = n;
}

struct nodesim_history *nodesim_history_new(void)
{
	struct nodesim_history *h = hasp_calloc(1, sizeof(*h));
	HASP_ASSERT(h != NULL);
	h->size = 1u << 16;
	h->buf = hasp_alloc(h->size);
	HASP_ASSERT(h->buf != NULL);
	return h;
}

void nodesim_history_free(struct nodesim_history *h)
{
	if (h == NULL)
		return;
	hasp_free(h->buf);
	hasp_free(h);
}

static void reserve(struct nodesim_history *h, size_t more)
{
	if (h->used + more < h->size)
		return;
	size_t size = h->size;
	while (h->used + more >= size)
		size *= 2;
	char *b = hasp_alloc(size);
	HASP_ASSERT(b != NULL);
	memcpy(b, h->buf, h->used);
	hasp_free(h->buf);
	h->buf = b;
	h->size = size;
}

void nodesim_history_add(struct nodesim_history *h, uint64_t t, const char *proc, const char *fmt,
			 ...)
{
	char body[512];
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(body, sizeof(body), fmt, ap);
	va_end(ap);
	HASP_ASSERT(n > 0 && (size_t)n < sizeof(body));
	reserve(h, (size_t)n + 96);
	int m = snprintf(h->buf + h->used, h->size - h->used, "{\"t\": %llu, \"proc\": \"%s\", %s}\n",
			 (unsigned long long)t, proc, body);
	HASP_ASSERT(m > 0 && (size_t)m < h->size - h->used);
	h->used += (size_t)m;
	h->records++;
}

uint64_t nodesim_history_digest(const struct nodesim_history *h)
{
	uint64_t x = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < h->used; i++) {
		x ^= (uint8_t)h->buf[i];
		x *= 0x100000001b3ull;
	}
	return x;
}

uint64_t nodesim_history_records(const struct nodesim_history *h)
{
	return h->records;
}

int nodesim_history_write(const struct nodesim_history *h, const char *path)
{
	FILE *f = fopen(path, "w");
	if (f == NULL)
		return -1;
	size_t w = fwrite(h->buf, 1, h->used, f);
	int rc = fclose(f);
	return w == h->used && rc == 0 ? 0 : -1;
}
