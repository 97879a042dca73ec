/*
 * node/peer_auth: the sealed raft datagram (tampered byte, wrong key,
 * truncation) and the replay window (duplicates, reordering, old counters,
 * sender restarts, a slot that changes hands).
 */
#include "node/peer_auth.h"

#include <string.h>

#include "hasp/errors.h"
#include "tests/test_util.h"

static void key_of(struct auth_key *k, uint8_t seed)
{
	for (uint32_t i = 0; i < AUTH_KEY_SIZE; i++)
		k->bytes[i] = (uint8_t)(seed * 31u + i);
}

static void test_peer_auth_seal_open_round_trip_and_every_tamper_fails(void **state)
{
	(void)state;
	struct auth_key k;
	struct peer_auth_tx tx = { .epoch = 77 };
	struct peer_auth_tag tag;
	uint8_t buf[100 + PEER_AUTH_TRAILER_SIZE];

	key_of(&k, 1);
	for (uint32_t i = 0; i < 100; i++)
		buf[i] = (uint8_t)i;
	size_t size = peer_auth_seal(&k, &tx, buf, 100, sizeof(buf));
	assert_int_equal(size, 100 + PEER_AUTH_TRAILER_SIZE);
	assert_int_equal(peer_auth_open(&k, buf, size, &tag), 100);
	assert_int_equal(tag.epoch, 77);
	assert_int_equal(tag.counter, 1);
	/* Any byte, message or trailer (epoch and counter included). */
	for (size_t i = 0; i < size; i++) {
		buf[i] ^= 0x20;
		assert_int_equal(peer_auth_open(&k, buf, size, &tag), -1);
		buf[i] ^= 0x20;
	}
	for (size_t cut = 0; cut < size; cut++)
		assert_int_equal(peer_auth_open(&k, buf, cut, &tag), -1);
	struct auth_key other;
	key_of(&other, 2);
	assert_int_equal(peer_auth_open(&other, buf, size, &tag), -1);
	assert_int_equal(peer_auth_open(&k, NULL, 0, &tag), -1);
}

static void test_peer_auth_seal_refuses_without_room(void **state)
{
	(void)state;
	struct auth_key k;
	struct peer_auth_tx tx = { .epoch = 1 };
	uint8_t buf[40];

	key_of(&k, 1);
	memset(buf, 0, sizeof(buf));
	assert_int_equal(peer_auth_seal(&k, &tx, buf, 10, 10 + PEER_AUTH_TRAILER_SIZE - 1), 0);
	assert_int_equal(tx.counter, 0);
	assert_int_equal(peer_auth_seal(&k, &tx, buf, 8, sizeof(buf)), 8 + PEER_AUTH_TRAILER_SIZE);
	assert_int_equal(tx.counter, 1);
}

static bool window_accept(struct peer_auth_window *w, uint32_t id, uint64_t epoch, uint64_t counter)
{
	struct peer_auth_tag tag = { .epoch = epoch, .counter = counter };
	return peer_auth_window_accept(w, id, &tag);
}

static void test_peer_auth_window_accepts_once_and_within_64(void **state)
{
	(void)state;
	struct peer_auth_window w = { 0 };

	assert_false(window_accept(&w, 2, 10, 0)); /* counters start at 1 */
	assert_true(window_accept(&w, 2, 10, 1));
	assert_false(window_accept(&w, 2, 10, 1));
	assert_true(window_accept(&w, 2, 10, 5));
	assert_true(window_accept(&w, 2, 10, 3)); /* reordered, inside the window */
	assert_false(window_accept(&w, 2, 10, 3));
	assert_true(window_accept(&w, 2, 10, 4));
	assert_true(window_accept(&w, 2, 10, 2));
	for (uint64_t c = 1; c <= 5; c++)
		assert_false(window_accept(&w, 2, 10, c));
	assert_true(window_accept(&w, 2, 10, 5 + 64));
	assert_false(window_accept(&w, 2, 10, 5));     /* fell out of the window */
	assert_true(window_accept(&w, 2, 10, 6));      /* the oldest still inside */
	assert_false(window_accept(&w, 2, 10, 6));
	assert_true(window_accept(&w, 2, 10, 1000000)); /* a long gap clears the window */
	assert_false(window_accept(&w, 2, 10, 1000000 - 64));
	assert_true(window_accept(&w, 2, 10, 1000000 - 63));
}

static void test_peer_auth_window_new_epoch_restarts_old_epoch_refused(void **state)
{
	(void)state;
	struct peer_auth_window w = { 0 };

	assert_true(window_accept(&w, 3, 100, 50));
	/* The sender restarted: a later epoch, counting from 1 again. */
	assert_true(window_accept(&w, 3, 200, 1));
	assert_true(window_accept(&w, 3, 200, 2));
	/* Anything from the earlier life is a replay now. */
	assert_false(window_accept(&w, 3, 100, 51));
	assert_false(window_accept(&w, 3, 100, 1000));
	assert_false(window_accept(&w, 3, 199, 9));
	/* A slot given to another member forgets the previous one. */
	assert_true(window_accept(&w, 4, 5, 1));
	assert_int_equal(w.id, 4);
	assert_true(window_accept(&w, 3, 100, 51)); /* (the receiver restarted too) */
}

int main(void)
{
	test_util_install_assert_handler();
	if (auth_init() != 0)
		return 1;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_peer_auth_seal_open_round_trip_and_every_tamper_fails),
		cmocka_unit_test(test_peer_auth_seal_refuses_without_room),
		cmocka_unit_test(test_peer_auth_window_accepts_once_and_within_64),
		cmocka_unit_test(test_peer_auth_window_new_epoch_restarts_old_epoch_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
