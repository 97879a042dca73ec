/*
 * bench_json's jansson reader (see bench_json.c): parse, look up, free.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

uint64_t bench_json_read_jansson(const char *text, size_t len, bool list);
void bench_json_jansson_count_allocs(uint64_t *counter);

static uint64_t *allocs;

static void *count_malloc(size_t size)
{
	(*allocs)++;
	return malloc(size);
}

/* Counts jansson's allocations into *counter from now on. */
void bench_json_jansson_count_allocs(uint64_t *counter)
{
	allocs = counter;
	json_set_alloc_funcs(count_malloc, free);
}

uint64_t bench_json_read_jansson(const char *text, size_t len, bool list)
{
	json_error_t err;
	uint64_t v = 0;
	json_t *doc = json_loadb(text, len, 0, &err);
	if (doc == NULL)
		abort();
	json_t *result = json_object_get(doc, "result");
	if (!list) {
		v = (uint64_t)json_integer_value(json_object_get(result, "term"));
	} else {
		json_t *arr = json_object_get(result, "locks");
		for (size_t i = 0; i < json_array_size(arr); i++)
			v += (uint64_t)json_integer_value(json_object_get(json_array_get(arr, i), "token"));
	}
	json_decref(doc);
	return v;
}

