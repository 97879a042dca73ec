/*
 * The control plane's JSON writer and reader: escaping, commas, overflow,
 * and that what the writer produces the reader parses back.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "control/json.h"
#include "hasp/errors.h"
#include "tests/test_util.h"

static void test_json_writer_places_commas_and_nests(void **state)
{
	(void)state;
	char buf[256];
	struct json_writer w;
	json_init(&w, buf, sizeof(buf));
	json_object_begin(&w);
	json_kv_u64(&w, "a", 1);
	json_kv_i64(&w, "b", -2);
	json_key(&w, "c");
	json_array_begin(&w);
	json_bool(&w, true);
	json_null(&w);
	json_object_begin(&w);
	json_object_end(&w);
	json_array_begin(&w);
	json_array_end(&w);
	json_array_end(&w);
	json_kv_str(&w, "d", "x");
	json_object_end(&w);
	size_t n = json_finish(&w);
	assert_int_equal(n, strlen(buf));
	assert_string_equal(buf, "{\"a\":1,\"b\":-2,\"c\":[true,null,{},[]],\"d\":\"x\"}");
}

static void test_json_writer_escapes_quotes_backslashes_and_control_bytes(void **state)
{
	(void)state;
	char buf[128];
	struct json_writer w;
	json_init(&w, buf, sizeof(buf));
	json_string(&w, "a\"b\\c\n\t\x01z");
	assert_true(json_finish(&w) > 0);
	assert_string_equal(buf, "\"a\\\"b\\\\c\\n\\t\\u0001z\"");
}

static void test_json_writer_reports_overflow_instead_of_cutting(void **state)
{
	(void)state;
	char buf[16];
	struct json_writer w;
	json_init(&w, buf, sizeof(buf));
	json_object_begin(&w);
	json_kv_str(&w, "key", "a value that does not fit");
	json_object_end(&w);
	assert_true(w.overflow);
	assert_int_equal(json_finish(&w), 0);
	assert_true(strlen(buf) < sizeof(buf));
}

static void test_json_writer_unclosed_document_does_not_finish(void **state)
{
	(void)state;
	char buf[16];
	struct json_writer w;
	json_init(&w, buf, sizeof(buf));
	json_array_begin(&w);
	assert_int_equal(json_finish(&w), 0);
}

static void test_json_writer_nan_becomes_null(void **state)
{
	(void)state;
	char buf[32];
	struct json_writer w;
	json_init(&w, buf, sizeof(buf));
	json_array_begin(&w);
	json_double(&w, NAN);
	json_double(&w, 0.25);
	json_array_end(&w);
	assert_true(json_finish(&w) > 0);
	assert_string_equal(buf, "[null,0.25]");
}

static void test_json_round_trip_through_the_reader(void **state)
{
	(void)state;
	char buf[512];
	struct json_writer w;
	json_init(&w, buf, sizeof(buf));
	json_object_begin(&w);
	json_kv_str(&w, "name", "lock\"1\\");
	json_kv_u64(&w, "token", 18446744073709551615ull);
	json_kv_i64(&w, "neg", -5);
	json_kv_double(&w, "rtt", 0.000125);
	json_kv_bool(&w, "ok", false);
	json_key(&w, "list");
	json_array_begin(&w);
	for (int i = 0; i < 3; i++) {
		json_object_begin(&w);
		json_kv_u64(&w, "i", (uint64_t)i);
		json_object_end(&w);
	}
	json_array_end(&w);
	json_object_end(&w);
	size_t n = json_finish(&w);
	assert_true(n > 0);

	struct json_token t[64];
	int count = json_parse(buf, n, t, 64);
	assert_true(count > 0);
	char s[64];
	uint64_t u;
	int64_t i64;
	double d;
	bool b = true;
	assert_true(json_tok_str(buf, t, json_get(buf, t, 0, "name"), s, sizeof(s)));
	assert_string_equal(s, "lock\"1\\");
	assert_true(json_tok_u64(buf, t, json_get(buf, t, 0, "token"), &u));
	assert_true(u == 18446744073709551615ull);
	assert_true(json_tok_i64(buf, t, json_get(buf, t, 0, "neg"), &i64));
	assert_int_equal(i64, -5);
	assert_true(json_tok_double(buf, t, json_get(buf, t, 0, "rtt"), &d));
	assert_true(fabs(d - 0.000125) < 1e-12);
	assert_true(json_tok_bool(buf, t, json_get(buf, t, 0, "ok"), &b));
	assert_false(b);
	int list = json_get(buf, t, 0, "list");
	assert_int_equal(t[list].size, 3);
	assert_true(json_tok_u64(buf, t, json_get(buf, t, json_at(t, list, 2), "i"), &u));
	assert_int_equal(u, 2);
	assert_int_equal(json_at(t, list, 3), -1);
	assert_int_equal(json_get(buf, t, 0, "missing"), -1);
	/* Wrong types are refused, not coerced. */
	assert_false(json_tok_u64(buf, t, json_get(buf, t, 0, "name"), &u));
	assert_false(json_tok_u64(buf, t, json_get(buf, t, 0, "neg"), &u));
}

static void test_json_reader_refuses_bad_grammar(void **state)
{
	(void)state;
	struct json_token t[32];
	static const char *const bad[] = {
		"", "{", "{\"a\"}", "{\"a\":}", "[1,]", "[1 2]", "{\"a\":1,}", "\"abc", "tru",
		"[01x]", "{a:1}", "[1]]", "\"\\q\"", "\"\\u12\"", "\"a\nb\"", "nul", "{\"a\":1}x",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = json_parse(bad[i], strlen(bad[i]), t, 32);
		if (rc >= 0)
			fail_msg("accepted bad JSON: %s", bad[i]);
	}
	const char *good = " {\"a\" : [1, -2.5e3, \"x\", true, null]} ";
	assert_int_equal(json_parse(good, strlen(good), t, 32), 8);
}

static void test_json_reader_bounds_tokens_and_depth(void **state)
{
	(void)state;
	struct json_token t[4];
	assert_int_equal(json_parse("[1,2,3,4,5]", 11, t, 4), -HASP_EFULL);
	struct json_token big[64];
	char nest[2 * JSON_DEPTH_MAX + 4];
	size_t k = 0;
	for (uint32_t i = 0; i <= JSON_DEPTH_MAX; i++)
		nest[k++] = '[';
	for (uint32_t i = 0; i <= JSON_DEPTH_MAX; i++)
		nest[k++] = ']';
	assert_int_equal(json_parse(nest, k, big, 64), -HASP_ETOOBIG);
}

int main(void)
{
	test_util_install_assert_handler();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json_writer_places_commas_and_nests),
		cmocka_unit_test(test_json_writer_escapes_quotes_backslashes_and_control_bytes),
		cmocka_unit_test(test_json_writer_reports_overflow_instead_of_cutting),
		cmocka_unit_test(test_json_writer_unclosed_document_does_not_finish),
		cmocka_unit_test(test_json_writer_nan_becomes_null),
		cmocka_unit_test(test_json_round_trip_through_the_reader),
		cmocka_unit_test(test_json_reader_refuses_bad_grammar),
		cmocka_unit_test(test_json_reader_bounds_tokens_and_depth),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
