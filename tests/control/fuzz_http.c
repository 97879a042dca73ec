/*
 * Fuzz target for the admin endpoint's input side (control/server.c):
 * arbitrary bytes arrive on one connection as the server reads them, and
 * go through the protocol switch, the HTTP request parser (GET/HEAD
 * /metrics, /health, /status, errors) and the admin line protocol with
 * pipelined lines. Properties: nothing crashes; every HTTP response has a
 * status line, a header end and a Content-Length equal to the body sent
 * (none for HEAD); every admin reply is one line of valid JSON with "ok";
 * a full input buffer always gets an answer (else the server's poll loop
 * would spin).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "control/control_impl.h"
#include "control/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct control ctl;
static bool ready;
static struct json_token toks[4096];

static void sink(void *arg, const char *out, size_t n, bool http)
{
	bool may_head = *(const bool *)arg;
	HASP_ASSERT(n > 0);
	if (!http) {
		HASP_ASSERT(out[n - 1] == '\n' && memchr(out, '\n', n) == out + n - 1);
		int count = json_parse(out, n - 1, toks, 4096);
		HASP_ASSERT(count > 0);
		bool ok;
		HASP_ASSERT(json_tok_bool(out, toks, json_get(out, toks, 0, "ok"), &ok));
		return;
	}
	HASP_ASSERT(n > 9 && memcmp(out, "HTTP/1.1 ", 9) == 0);
	const char *end = NULL;
	for (size_t i = 0; i + 4 <= n; i++)
		if (memcmp(out + i, "\r\n\r\n", 4) == 0) {
			end = out + i + 4;
			break;
		}
	HASP_ASSERT(end != NULL);
	char hdr[1024];
	size_t hlen = (size_t)(end - out);
	HASP_ASSERT(hlen < sizeof(hdr));
	memcpy(hdr, out, hlen);
	hdr[hlen] = '\0';
	const char *cl = strstr(hdr, "\r\nContent-Length: ");
	HASP_ASSERT(cl != NULL);
	unsigned long long length = strtoull(cl + 18, NULL, 10);
	size_t body = n - hlen;
	/* HEAD: the length of the body a GET would get, and no body. */
	HASP_ASSERT(body == length || (may_head && body == 0));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!ready) {
		/* With an admin key, so sealed lines reach the tag check (no
		 * input can carry a valid tag: the nonce is fresh per input). */
		struct control_config cfg = { .clients_max = 1, .slots = 1, .reply_size_max = 8192,
					      .admin_key_set = true };
		HASP_ASSERT(control_init(&ctl, &cfg) == 0);
		ready = true;
	}
	/* "log.level" would change global state between inputs. */
	for (size_t i = 0; i + 9 <= size; i++)
		if (memcmp(data + i, "log.level", 9) == 0)
			return 0;
	/* An exact-size heap copy, so ASan sees any read past the input. */
	char *copy = malloc(size ? size : 1);
	HASP_ASSERT(copy != NULL);
	memcpy(copy, data, size);
	bool may_head = false;
	for (size_t i = 0; i + 5 <= size && !may_head; i++)
		may_head = memcmp(data + i, "HEAD ", 5) == 0;
	server_feed(&ctl, copy, size, true, sink, &may_head);
	free(copy);
	return 0;
}
