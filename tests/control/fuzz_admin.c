/*
 * Fuzz target for the admin request path: arbitrary bytes as a request
 * line through control_call_start() (parse, registry lookup, built-in
 * commands) and through the JSON tokenizer. Property: nothing crashes, and
 * every reply the server would send is valid JSON with an "ok" member.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "control/control_impl.h"
#include "control/json.h"
#include "hasp/errors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct control ctl;
static bool ready;
static struct control_request req;
static char result[8192];
static char line[16384];
static struct json_token toks[4096];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!ready) {
		struct control_config cfg = { .clients_max = 1, .slots = 1, .reply_size_max = 8192 };
		HASP_ASSERT(control_init(&ctl, &cfg) == 0);
		ready = true;
	}
	/* The tokenizer on raw bytes. */
	int parsed = json_parse((const char *)data, size, toks, 4096);
	HASP_ASSERT(parsed <= 4096);
	HASP_ASSERT(parsed > 0 || parsed == -HASP_ECORRUPT || parsed == -HASP_EFULL ||
		    parsed == -HASP_ETOOBIG);

	/* The request path; "log.level" would change global state between
	 * inputs, so it is left out. */
	if (size >= 9 && memcmp(data, "log.level", 9) == 0)
		return 0;
	struct control_call call;
	bool done = control_call_start(&ctl, &call, (const char *)data, size, &req, result, sizeof(result), 0);
	HASP_ASSERT(done); /* only admin-thread commands are registered */
	size_t n = control_reply_render(&req, -1, line, sizeof(line));
	HASP_ASSERT(n > 0 && line[n - 1] == '\n');
	int count = json_parse(line, n - 1, toks, 4096);
	HASP_ASSERT(count > 0);
	bool ok;
	HASP_ASSERT(json_tok_bool(line, toks, json_get(line, toks, 0, "ok"), &ok));
	return 0;
}
