/*
 * JSON writer and tokenizer for the control plane (see json.h).
 *
 * The writer appends into a fixed buffer and remembers overflow instead of
 * failing each call, so handlers write straight-line code and the server
 * checks once with json_finish(). The reader is recursive descent over a
 * token array, bounded by JSON_DEPTH_MAX so hostile input cannot exhaust
 * the stack.
 */
#include "control/json.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "hasp/errors.h"

/* ---- writer ---- */

static void put(struct json_writer *w, const char *s, size_t n)
{
	if (w->overflow)
		return;
	if (n >= w->size - w->len) {
		w->overflow = true;
		return;
	}
	memcpy(w->buf + w->len, s, n);
	w->len += n;
	w->buf[w->len] = '\0';
}

static void put_c(struct json_writer *w, char c)
{
	put(w, &c, 1);
}

/* Writes the comma before a value unless it is the first at its depth or
 * follows a key. */
static void value_prefix(struct json_writer *w)
{
	if (w->after_key) {
		w->after_key = false;
		return;
	}
	if (w->depth > 0) {
		if (!w->first[w->depth - 1])
			put_c(w, ',');
		w->first[w->depth - 1] = false;
	}
}

void json_init(struct json_writer *w, char *buf, size_t size)
{
	HASP_ASSERT(buf != NULL);
	HASP_ASSERT(size >= 1);
	memset(w, 0, sizeof(*w));
	w->buf = buf;
	w->size = size;
	buf[0] = '\0';
}

static void open_(struct json_writer *w, char c)
{
	value_prefix(w);
	put_c(w, c);
	if (w->depth == JSON_DEPTH_MAX) {
		w->overflow = true; /* too deep is a programming error we still survive */
		return;
	}
	w->first[w->depth++] = true;
}

static void close_(struct json_writer *w, char c)
{
	HASP_ASSERT(!w->after_key);
	if (w->depth > 0)
		w->depth--;
	put_c(w, c);
}

void json_object_begin(struct json_writer *w) { open_(w, '{'); }
void json_object_end(struct json_writer *w) { close_(w, '}'); }
void json_array_begin(struct json_writer *w) { open_(w, '['); }
void json_array_end(struct json_writer *w) { close_(w, ']'); }

static void put_escaped(struct json_writer *w, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	put_c(w, '"');
	size_t run = 0; /* bytes copied verbatim in one put() */
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		put(w, s + run, i - run);
		run = i + 1;
		switch (c) {
		case '"': put(w, "\\\"", 2); break;
		case '\\': put(w, "\\\\", 2); break;
		case '\n': put(w, "\\n", 2); break;
		case '\r': put(w, "\\r", 2); break;
		case '\t': put(w, "\\t", 2); break;
		default: {
			char e[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };
			put(w, e, 6);
		}
		}
	}
	put(w, s + run, n - run);
	put_c(w, '"');
}

void json_key(struct json_writer *w, const char *key)
{
	HASP_ASSERT(key != NULL);
	HASP_ASSERT(!w->after_key);
	value_prefix(w);
	put_escaped(w, key, strlen(key));
	put_c(w, ':');
	w->after_key = true;
}

void json_string_n(struct json_writer *w, const char *s, size_t n)
{
	value_prefix(w);
	put_escaped(w, s, n);
}

void json_string(struct json_writer *w, const char *s)
{
	if (s == NULL) {
		json_null(w);
		return;
	}
	json_string_n(w, s, strlen(s));
}

void json_u64(struct json_writer *w, uint64_t v)
{
	char b[24];
	int n = snprintf(b, sizeof(b), "%" PRIu64, v);
	value_prefix(w);
	put(w, b, (size_t)n);
}

void json_i64(struct json_writer *w, int64_t v)
{
	char b[24];
	int n = snprintf(b, sizeof(b), "%" PRId64, v);
	value_prefix(w);
	put(w, b, (size_t)n);
}

void json_double(struct json_writer *w, double v)
{
	char b[32];
	/* JSON has no NaN or infinity: null says "no value". */
	if (!isfinite(v)) {
		json_null(w);
		return;
	}
	int n = snprintf(b, sizeof(b), "%.9g", v);
	value_prefix(w);
	put(w, b, (size_t)n);
}

void json_bool(struct json_writer *w, bool v)
{
	value_prefix(w);
	put(w, v ? "true" : "false", v ? 4 : 5);
}

void json_null(struct json_writer *w)
{
	value_prefix(w);
	put(w, "null", 4);
}

void json_raw(struct json_writer *w, const char *text, size_t n)
{
	value_prefix(w);
	put(w, text, n);
}

void json_kv_u64(struct json_writer *w, const char *key, uint64_t v) { json_key(w, key); json_u64(w, v); }
void json_kv_i64(struct json_writer *w, const char *key, int64_t v) { json_key(w, key); json_i64(w, v); }
void json_kv_str(struct json_writer *w, const char *key, const char *s) { json_key(w, key); json_string(w, s); }
void json_kv_bool(struct json_writer *w, const char *key, bool v) { json_key(w, key); json_bool(w, v); }
void json_kv_double(struct json_writer *w, const char *key, double v) { json_key(w, key); json_double(w, v); }

size_t json_finish(struct json_writer *w)
{
	if (w->overflow || w->depth != 0 || w->after_key)
		return 0;
	HASP_ASSERT(w->len < w->size);
	HASP_ASSERT(w->buf[w->len] == '\0');
	return w->len;
}

/* ---- reader ---- */

struct parser {
	const char *s;
	size_t len;
	size_t pos;
	struct json_token *toks;
	uint32_t max;
	uint32_t count;
	int err;
};

static void skip_ws(struct parser *p)
{
	while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' ||
				   p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
		p->pos++;
}

static int new_tok(struct parser *p, uint8_t type)
{
	if (p->count == p->max) {
		p->err = -HASP_EFULL;
		return -1;
	}
	int i = (int)p->count++;
	p->toks[i] = (struct json_token){ .type = type, .start = (uint32_t)p->pos };
	return i;
}

static bool parse_value(struct parser *p, uint32_t depth);

static bool parse_string(struct parser *p)
{
	int t = new_tok(p, JSON_STRING);
	if (t < 0)
		return false;
	p->pos++; /* opening quote */
	p->toks[t].start = (uint32_t)p->pos;
	while (p->pos < p->len) {
		unsigned char c = (unsigned char)p->s[p->pos];
		if (c == '"') {
			p->toks[t].end = (uint32_t)p->pos;
			p->pos++;
			p->toks[t].next = p->count;
			return true;
		}
		if (c < 0x20)
			break;
		if (c == '\\') {
			p->pos++;
			if (p->pos >= p->len)
				break;
			char e = p->s[p->pos];
			if (e == 'u') {
				for (int k = 1; k <= 4; k++) {
					if (p->pos + (size_t)k >= p->len ||
					    strchr("0123456789abcdefABCDEF", p->s[p->pos + (size_t)k]) == NULL ||
					    p->s[p->pos + (size_t)k] == '\0') {
						p->err = -HASP_ECORRUPT;
						return false;
					}
				}
				p->pos += 4;
			} else if (strchr("\"\\/bfnrt", e) == NULL || e == '\0') {
				break;
			}
		}
		p->pos++;
	}
	p->err = -HASP_ECORRUPT;
	return false;
}

static bool parse_primitive(struct parser *p)
{
	int t = new_tok(p, JSON_PRIMITIVE);
	if (t < 0)
		return false;
	size_t start = p->pos;
	while (p->pos < p->len && strchr("0123456789+-.eEtrufalsn", p->s[p->pos]) != NULL &&
	       p->s[p->pos] != '\0')
		p->pos++;
	size_t n = p->pos - start;
	const char *s = p->s + start;
	bool ok = (n == 4 && memcmp(s, "true", 4) == 0) || (n == 5 && memcmp(s, "false", 5) == 0) ||
		  (n == 4 && memcmp(s, "null", 4) == 0);
	if (!ok && n > 0 && (s[0] == '-' || (s[0] >= '0' && s[0] <= '9'))) {
		char b[40];
		if (n < sizeof(b)) {
			memcpy(b, s, n);
			b[n] = '\0';
			char *end;
			(void)strtod(b, &end);
			ok = end == b + n && strpbrk(b, "trufalsnx") == NULL;
		}
	}
	if (!ok) {
		p->err = -HASP_ECORRUPT;
		return false;
	}
	p->toks[t].end = (uint32_t)p->pos;
	p->toks[t].next = p->count;
	return true;
}

static bool parse_container(struct parser *p, uint32_t depth, bool object)
{
	int t = new_tok(p, object ? JSON_OBJECT : JSON_ARRAY);
	if (t < 0)
		return false;
	if (depth >= JSON_DEPTH_MAX) {
		p->err = -HASP_ETOOBIG;
		return false;
	}
	char close = object ? '}' : ']';
	p->pos++;
	skip_ws(p);
	if (p->pos < p->len && p->s[p->pos] == close) {
		p->pos++;
		p->toks[t].end = (uint32_t)p->pos;
		p->toks[t].next = p->count;
		return true;
	}
	for (;;) {
		skip_ws(p);
		if (object) {
			if (p->pos >= p->len || p->s[p->pos] != '"' || !parse_string(p))
				goto bad;
			skip_ws(p);
			if (p->pos >= p->len || p->s[p->pos] != ':')
				goto bad;
			p->pos++;
		}
		if (!parse_value(p, depth + 1))
			return false;
		p->toks[t].size++;
		skip_ws(p);
		if (p->pos < p->len && p->s[p->pos] == ',') {
			p->pos++;
			continue;
		}
		if (p->pos < p->len && p->s[p->pos] == close) {
			p->pos++;
			p->toks[t].end = (uint32_t)p->pos;
			p->toks[t].next = p->count;
			return true;
		}
		goto bad;
	}
bad:
	if (p->err == 0)
		p->err = -HASP_ECORRUPT;
	return false;
}

static bool parse_value(struct parser *p, uint32_t depth)
{
	skip_ws(p);
	if (p->pos >= p->len) {
		p->err = -HASP_ECORRUPT;
		return false;
	}
	char c = p->s[p->pos];
	if (c == '{')
		return parse_container(p, depth, true);
	if (c == '[')
		return parse_container(p, depth, false);
	if (c == '"')
		return parse_string(p);
	return parse_primitive(p);
}

int json_parse(const char *text, size_t len, struct json_token *toks, uint32_t max)
{
	HASP_ASSERT(text != NULL || len == 0);
	HASP_ASSERT(toks != NULL && max > 0);
	struct parser p = { .s = text, .len = len, .toks = toks, .max = max };
	if (!parse_value(&p, 0))
		return p.err != 0 ? p.err : -HASP_ECORRUPT;
	skip_ws(&p);
	if (p.pos != len)
		return -HASP_ECORRUPT;
	return (int)p.count;
}

bool json_tok_eq(const char *text, const struct json_token *toks, int tok, const char *s)
{
	if (tok < 0)
		return false;
	size_t n = toks[tok].end - toks[tok].start;
	return strlen(s) == n && memcmp(text + toks[tok].start, s, n) == 0;
}

int json_get(const char *text, const struct json_token *toks, int obj, const char *key)
{
	if (obj < 0 || toks[obj].type != JSON_OBJECT)
		return -1;
	int k = obj + 1;
	for (uint32_t i = 0; i < toks[obj].size; i++) {
		int v = k + 1;
		if (toks[k].type == JSON_STRING && json_tok_eq(text, toks, k, key))
			return v;
		k = (int)toks[v].next;
	}
	return -1;
}

int json_at(const struct json_token *toks, int arr, uint32_t i)
{
	if (arr < 0 || toks[arr].type != JSON_ARRAY || i >= toks[arr].size)
		return -1;
	int e = arr + 1;
	for (uint32_t k = 0; k < i; k++)
		e = (int)toks[e].next;
	return e;
}

static bool prim_text(const char *text, const struct json_token *toks, int tok, char *b, size_t n)
{
	if (tok < 0 || toks[tok].type != JSON_PRIMITIVE)
		return false;
	size_t len = toks[tok].end - toks[tok].start;
	if (len >= n)
		return false;
	memcpy(b, text + toks[tok].start, len);
	b[len] = '\0';
	return true;
}

bool json_tok_u64(const char *text, const struct json_token *toks, int tok, uint64_t *v)
{
	char b[40], *end;
	if (!prim_text(text, toks, tok, b, sizeof(b)) || b[0] < '0' || b[0] > '9')
		return false;
	*v = strtoull(b, &end, 10);
	return *end == '\0';
}

bool json_tok_i64(const char *text, const struct json_token *toks, int tok, int64_t *v)
{
	char b[40], *end;
	if (!prim_text(text, toks, tok, b, sizeof(b)))
		return false;
	*v = strtoll(b, &end, 10);
	return *end == '\0' && end != b;
}

bool json_tok_double(const char *text, const struct json_token *toks, int tok, double *v)
{
	char b[40], *end;
	if (!prim_text(text, toks, tok, b, sizeof(b)))
		return false;
	*v = strtod(b, &end);
	return *end == '\0' && end != b;
}

bool json_tok_bool(const char *text, const struct json_token *toks, int tok, bool *v)
{
	if (json_tok_eq(text, toks, tok, "true") && toks[tok].type == JSON_PRIMITIVE)
		*v = true;
	else if (json_tok_eq(text, toks, tok, "false") && toks[tok].type == JSON_PRIMITIVE)
		*v = false;
	else
		return false;
	return true;
}

bool json_tok_str(const char *text, const struct json_token *toks, int tok, char *out,
		  size_t out_size)
{
	HASP_ASSERT(out_size > 0);
	out[0] = '\0';
	if (tok < 0 || (toks[tok].type != JSON_STRING && toks[tok].type != JSON_PRIMITIVE))
		return false;
	size_t o = 0;
	for (uint32_t i = toks[tok].start; i < toks[tok].end && o + 1 < out_size; i++) {
		char c = text[i];
		if (c == '\\' && toks[tok].type == JSON_STRING && i + 1 < toks[tok].end) {
			c = text[++i];
			switch (c) {
			case 'n': c = '\n'; break;
			case 't': c = '\t'; break;
			case 'r': c = '\r'; break;
			case 'b': c = '\b'; break;
			case 'f': c = '\f'; break;
			case 'u': {
				char h[5] = { 0 };
				memcpy(h, text + i + 1, 4);
				unsigned long u = strtoul(h, NULL, 16);
				c = u < 0x80 ? (char)u : '?';
				i += 4;
				break;
			}
			default: break; /* quote, backslash, slash */
			}
		}
		out[o++] = c;
	}
	out[o] = '\0';
	return true;
}
