/*
 * A small JSON writer and reader for the control plane.
 *
 * The writer fills a caller-owned, bounded buffer: nothing allocates, and
 * a reply that does not fit is detected (json_writer.overflow) instead of
 * being cut silently. Strings are escaped per RFC 8259 (quote, backslash,
 * control characters as \u00XX). Commas are placed by the writer, so a
 * handler only says what it writes: json_key(w, "term"); json_u64(w, 7).
 *
 * The reader is a tokenizer in the style of jsmn: it parses one document
 * into a caller-owned array of tokens (no allocation, no copy of the text)
 * and checks the grammar strictly enough for replies from our own server
 * (haspctl reads them); helpers look up object members by key.
 *
 * Neither is thread-safe; each writer or token array has one user.
 */
#ifndef HASP_CONTROL_JSON_H
#define HASP_CONTROL_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JSON_DEPTH_MAX 16u

struct json_writer {
	char *buf;
	size_t size;   /* bytes in buf, including room for the final NUL */
	size_t len;    /* bytes written so far (without NUL) */
	bool overflow; /* something did not fit: the document is invalid */
	uint32_t depth;
	bool first[JSON_DEPTH_MAX]; /* no element yet at this depth */
	bool after_key;             /* the next value follows a key: no comma */
};

/* Starts a document in buf (size >= 1). The caller keeps buf. */
void json_init(struct json_writer *w, char *buf, size_t size);

void json_object_begin(struct json_writer *w);
void json_object_end(struct json_writer *w);
void json_array_begin(struct json_writer *w);
void json_array_end(struct json_writer *w);
/* An object member's key; the next call writes its value. */
void json_key(struct json_writer *w, const char *key);
void json_string(struct json_writer *w, const char *s);
void json_string_n(struct json_writer *w, const char *s, size_t n);
void json_u64(struct json_writer *w, uint64_t v);
void json_i64(struct json_writer *w, int64_t v);
void json_double(struct json_writer *w, double v);
void json_bool(struct json_writer *w, bool v);
void json_null(struct json_writer *w);
/* A value that is already valid JSON text (the caller vouches for it). */
void json_raw(struct json_writer *w, const char *text, size_t n);

/* key + value shorthands. */
void json_kv_u64(struct json_writer *w, const char *key, uint64_t v);
void json_kv_i64(struct json_writer *w, const char *key, int64_t v);
void json_kv_str(struct json_writer *w, const char *key, const char *s);
void json_kv_bool(struct json_writer *w, const char *key, bool v);
void json_kv_double(struct json_writer *w, const char *key, double v);

/* The length of the finished document (NUL-terminated in buf), or 0 when it
 * overflowed or is not closed (depth != 0). */
size_t json_finish(struct json_writer *w);

/* ---- reader ---- */

enum json_type {
	JSON_OBJECT = 1,
	JSON_ARRAY = 2,
	JSON_STRING = 3,     /* start/end exclude the quotes; still escaped */
	JSON_PRIMITIVE = 4,  /* number, true, false, null */
};

struct json_token {
	uint8_t type;     /* enum json_type */
	uint32_t start;   /* byte offsets into the text */
	uint32_t end;
	uint32_t size;    /* OBJECT: members; ARRAY: elements */
	uint32_t next;    /* index of the token after this one's subtree */
};

/* Parses text[0..len) as one JSON value (surrounding whitespace allowed).
 * Returns the number of tokens, or -HASP_ECORRUPT (bad grammar),
 * -HASP_EFULL (more than max tokens), -HASP_ETOOBIG (nested too deep). */
int json_parse(const char *text, size_t len, struct json_token *toks, uint32_t max) __attribute__((warn_unused_result));

/* The value token of `key` in the object at toks[obj], or -1. */
int json_get(const char *text, const struct json_token *toks, int obj, const char *key) __attribute__((warn_unused_result));
/* The i-th element of the array at toks[arr], or -1. */
int json_at(const struct json_token *toks, int arr, uint32_t i) __attribute__((warn_unused_result));

/* Typed views; false when the token is missing (tok < 0) or of another type. */
bool json_tok_u64(const char *text, const struct json_token *toks, int tok, uint64_t *v);
bool json_tok_i64(const char *text, const struct json_token *toks, int tok, int64_t *v);
bool json_tok_double(const char *text, const struct json_token *toks, int tok, double *v);
bool json_tok_bool(const char *text, const struct json_token *toks, int tok, bool *v);
/* Copies a string token unescaped (\uXXXX above 0x7f becomes '?') into out,
 * NUL-terminated, truncated to out_size - 1. Primitives are copied as text. */
bool json_tok_str(const char *text, const struct json_token *toks, int tok, char *out,
		  size_t out_size);
bool json_tok_eq(const char *text, const struct json_token *toks, int tok, const char *s);

#endif
