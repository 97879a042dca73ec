/*
 * bench_json's json-c reader (see bench_json.c): parse, look up, free.
 */
#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

uint64_t bench_json_read_jsonc(const char *text, size_t len, bool list);

uint64_t bench_json_read_jsonc(const char *text, size_t len, bool list)
{
	uint64_t v = 0;
	struct json_tokener *tok = json_tokener_new();
	struct json_object *doc = json_tokener_parse_ex(tok, text, (int)len);
	struct json_object *result, *x, *arr;
	if (doc == NULL || !json_object_object_get_ex(doc, "result", &result))
		abort();
	if (!list) {
		if (!json_object_object_get_ex(result, "term", &x))
			abort();
		v = (uint64_t)json_object_get_int64(x);
	} else {
		if (!json_object_object_get_ex(result, "locks", &arr))
			abort();
		for (size_t i = 0; i < json_object_array_length(arr); i++) {
			if (!json_object_object_get_ex(json_object_array_get_idx(arr, i), "token", &x))
				abort();
			v += (uint64_t)json_object_get_int64(x);
		}
	}
	json_object_put(doc);
	json_tokener_free(tok);
	return v;
}

