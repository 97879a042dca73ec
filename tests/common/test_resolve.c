/*
 * Host names where an address is taken (common/resolve.h): "localhost"
 * resolves through getaddrinfo (/etc/hosts, no network needed), dotted
 * addresses pass as they are, malformed input is refused with its reason.
 */
#include "common/resolve.h"

#include <arpa/inet.h>
#include <string.h>

#include "tests/test_util.h"

static void test_localhost_resolves_to_loopback(void **state)
{
	struct sockaddr_in sa;
	char err[256] = "";
	(void)state;

	assert_int_equal(resolve_hostport("localhost:7071", &sa, err, sizeof(err)), RESOLVE_OK);
	assert_int_equal(sa.sin_family, AF_INET);
	assert_int_equal(ntohs(sa.sin_port), 7071);
	assert_int_equal(ntohl(sa.sin_addr.s_addr), 0x7f000001u);
}

static void test_dotted_address_passes_unchanged(void **state)
{
	struct sockaddr_in sa;
	char err[256] = "";
	(void)state;

	assert_int_equal(resolve_hostport("10.1.2.3:7000", &sa, err, sizeof(err)), RESOLVE_OK);
	assert_int_equal(ntohl(sa.sin_addr.s_addr), 0x0a010203u);
	assert_int_equal(ntohs(sa.sin_port), 7000);
}

static void test_malformed_addresses_are_refused_with_a_reason(void **state)
{
	static const char *bad[] = { "localhost", ":7000", "localhost:", "localhost:0", "localhost:65536",
				     "localhost:70x", "localhost:-1", "localhost:+5" };
	struct sockaddr_in sa;
	char err[256];
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(resolve_hostport(bad[i], &sa, err, sizeof(err)), RESOLVE_MALFORMED);
		assert_true(strlen(err) > 0);
	}
	assert_int_equal(resolve_hostport("no-such-host.invalid:7000", &sa, err, sizeof(err)),
			 RESOLVE_UNKNOWN);
	assert_non_null(strstr(err, "cannot resolve the host name \"no-such-host.invalid\""));
}

static void test_long_or_binary_input_is_not_echoed_whole(void **state)
{
	char long_name[600];
	struct sockaddr_in sa;
	char err[512];
	(void)state;

	memset(long_name, 'a', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	assert_int_equal(resolve_hostport(long_name, &sa, err, sizeof(err)), RESOLVE_MALFORMED);
	assert_true(strlen(err) < 120);
	assert_int_equal(resolve_hostport("bad\x01name", &sa, err, sizeof(err)), RESOLVE_MALFORMED);
	assert_non_null(strstr(err, "\\x01"));
}

static void test_cluster_list_is_rewritten_to_addresses(void **state)
{
	char out[128];
	char small[12];
	char err[256];
	(void)state;

	assert_int_equal(resolve_cluster("localhost:7000,10.0.0.2:7000,localhost:7002", out, sizeof(out), err,
					 sizeof(err)),
			 RESOLVE_OK);
	assert_string_equal(out, "127.0.0.1:7000,10.0.0.2:7000,127.0.0.1:7002");
	assert_int_equal(resolve_cluster("localhost:7000,", out, sizeof(out), err, sizeof(err)), RESOLVE_MALFORMED);
	assert_int_equal(resolve_cluster(",localhost:7000", out, sizeof(out), err, sizeof(err)), RESOLVE_MALFORMED);
	assert_int_equal(resolve_cluster("", out, sizeof(out), err, sizeof(err)), RESOLVE_MALFORMED);
	assert_int_equal(resolve_cluster("localhost:7000,no-such-host.invalid:1", out, sizeof(out), err,
					 sizeof(err)),
			 RESOLVE_UNKNOWN);
	assert_int_equal(resolve_cluster("localhost:7000", small, sizeof(small), err, sizeof(err)),
			 RESOLVE_MALFORMED);
	assert_non_null(strstr(err, "longer than"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_localhost_resolves_to_loopback),
		cmocka_unit_test(test_dotted_address_passes_unchanged),
		cmocka_unit_test(test_malformed_addresses_are_refused_with_a_reason),
		cmocka_unit_test(test_long_or_binary_input_is_not_echoed_whole),
		cmocka_unit_test(test_cluster_list_is_rewritten_to_addresses),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
