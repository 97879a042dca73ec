/*
 * Client identities, session keys and permissions (node/client_auth.h).
 */
#include "node/client_auth.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "common/wire_auth.h"
#include "hasp/errors.h"

#define IDENTITIES_FILE_MAX (1u << 20)

int client_auth_init(struct client_auth *a, uint32_t sessions_max)
{
	memset(a, 0, sizeof(*a));
	a->ids = hasp_calloc(CLIENT_IDENTITIES_MAX, sizeof(*a->ids));
	a->keys = hasp_calloc(sessions_max, sizeof(*a->keys));
	a->slots = sessions_max;
	a->text = hasp_alloc(IDENTITIES_FILE_MAX + 1u);
	a->next = hasp_calloc(CLIENT_IDENTITIES_MAX, sizeof(*a->next));
	if (a->ids == NULL || a->keys == NULL || a->text == NULL || a->next == NULL) {
		client_auth_deinit(a);
		return -HASP_ENOMEM;
	}
	return 0;
}

void client_auth_deinit(struct client_auth *a)
{
	if (a->ids != NULL)
		memset(a->ids, 0, CLIENT_IDENTITIES_MAX * sizeof(*a->ids)); /* keys */
	if (a->keys != NULL)
		memset(a->keys, 0, (size_t)a->slots * sizeof(*a->keys));
	if (a->next != NULL)
		memset(a->next, 0, CLIENT_IDENTITIES_MAX * sizeof(*a->next));
	hasp_free(a->ids);
	hasp_free(a->keys);
	hasp_free(a->text);
	hasp_free(a->next);
	memset(a, 0, sizeof(*a));
}

static int fail(char *err, size_t err_size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t err_size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, err_size, fmt, ap);
	va_end(ap);
	return -HASP_ECONFIG;
}

/* 64 hex digits, nothing else (libsodium's parser, as for key files). */
static bool key_parse(const char *hex, size_t len, struct auth_key *key)
{
	size_t got = 0;

	return len == 2 * AUTH_KEY_SIZE &&
	       sodium_hex2bin(key->bytes, sizeof(key->bytes), hex, len, NULL, &got, NULL) == 0 &&
	       got == AUTH_KEY_SIZE;
}

static uint8_t perm_parse(const char *s, size_t len)
{
	static const struct {
		const char *name;
		uint8_t perm;
	} perms[] = {
		{ "read", CLIENT_PERM_READ },       { "acquire", CLIENT_PERM_ACQUIRE },
		{ "watch", CLIENT_PERM_WATCH },     { "kv_read", CLIENT_PERM_KV_READ },
		{ "kv_write", CLIENT_PERM_KV_WRITE }, { "all", CLIENT_PERM_ALL },
	};
	for (size_t i = 0; i < sizeof(perms) / sizeof(perms[0]); i++)
		if (strlen(perms[i].name) == len && memcmp(perms[i].name, s, len) == 0)
			return perms[i].perm;
	return 0;
}

/* One option word of an identity line; 0 or a message in err. */
static int option_parse(struct client_identity *id, const char *w, size_t len, const char *path,
			unsigned line, char *err, size_t err_size)
{
	if (len > 6 && memcmp(w, "allow=", 6) == 0) {
		const char *colon = memchr(w + 6, ':', len - 6);
		if (colon == NULL)
			return fail(err, err_size, "%s:%u: allow wants PERM:PREFIX", path, line);
		uint8_t perm = perm_parse(w + 6, (size_t)(colon - (w + 6)));
		size_t plen = len - (size_t)(colon + 1 - w);
		if (perm == 0)
			return fail(err, err_size,
				    "%s:%u: unknown permission (read, acquire, watch, kv_read, kv_write, all)",
				    path, line);
		if (plen > HASP_NAME_SIZE_MAX || (plen > 0 && !hasp_name_valid(colon + 1, plen)))
			return fail(err, err_size, "%s:%u: prefix must be 0..128 bytes of 0x21..0x7e", path,
				    line);
		if (id->rule_count == CLIENT_RULES_MAX)
			return fail(err, err_size, "%s:%u: more than %u allow rules", path, line,
				    CLIENT_RULES_MAX);
		struct client_rule *r = &id->rules[id->rule_count++];
		r->perms = perm;
		r->prefix_len = (uint8_t)plen;
		memcpy(r->prefix, colon + 1, plen);
		return 0;
	}
	if (len > 9 && memcmp(w, "sessions=", 9) == 0) {
		char num[16];
		char *end;
		if (len - 9 >= sizeof(num))
			return fail(err, err_size, "%s:%u: sessions= wants 1..65535", path, line);
		memcpy(num, w + 9, len - 9);
		num[len - 9] = '\0';
		errno = 0;
		unsigned long v = strtoul(num, &end, 10);
		if (errno != 0 || *end != '\0' || v == 0 || v > 65535)
			return fail(err, err_size, "%s:%u: sessions= wants 1..65535", path, line);
		id->sessions_max = (uint32_t)v;
		return 0;
	}
	if (len == 16 && memcmp(w, "release=identity", 16) == 0) {
		id->release_identity = true;
		return 0;
	}
	if (len == 15 && memcmp(w, "release=session", 15) == 0) {
		id->release_identity = false;
		return 0;
	}
	return fail(err, err_size, "%s:%u: unknown option (allow=, sessions=, release=)", path, line);
}

/* Splits off the next space- or tab-separated word of [*p, end). */
static bool next_word(const char **p, const char *end, const char **w, size_t *len)
{
	while (*p < end && (**p == ' ' || **p == '\t' || **p == '\r'))
		(*p)++;
	if (*p == end)
		return false;
	*w = *p;
	while (*p < end && **p != ' ' && **p != '\t' && **p != '\r')
		(*p)++;
	*len = (size_t)(*p - *w);
	return true;
}

static int line_parse(struct client_identity *id, const char *s, const char *end, uint32_t default_sessions,
		      const char *path, unsigned line, char *err, size_t err_size)
{
	const char *w;
	size_t len;

	memset(id, 0, sizeof(*id));
	id->release_identity = true;
	id->sessions_max = default_sessions;
	if (!next_word(&s, end, &w, &len) || len > HASP_IDENTITY_SIZE_MAX || !hasp_name_valid(w, len))
		return fail(err, err_size, "%s:%u: the name must be 1..32 bytes of 0x21..0x7e", path, line);
	memcpy(id->name, w, len);
	id->name_len = (uint8_t)len;
	if (!next_word(&s, end, &w, &len) || !key_parse(w, len, &id->key))
		return fail(err, err_size, "%s:%u: the key must be 64 hex digits", path, line);
	while (next_word(&s, end, &w, &len)) {
		int rc = option_parse(id, w, len, path, line, err, err_size);
		if (rc != 0)
			return rc;
	}
	id->owner = hasp_owner_id(id->name, id->name_len);
	return 0;
}

/* Reads the whole file into text (IDENTITIES_FILE_MAX + 1 bytes) after
 * checking who may read it (it holds keys). */
static int file_read(const char *path, char *text, size_t *size, char *err, size_t err_size)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return fail(err, err_size, "client_identities_file: cannot open '%s': %s", path,
			    strerror(errno));
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077) != 0 || st.st_size > (off_t)IDENTITIES_FILE_MAX) {
		close(fd);
		return fail(err, err_size,
			    "client_identities_file: %s must be a regular file owned by this user, "
			    "mode 0600 or 0400, at most 1 MiB",
			    path);
	}
	ssize_t got = read(fd, text, (size_t)st.st_size);
	close(fd);
	if (got != st.st_size)
		return fail(err, err_size, "client_identities_file: short read of %s", path);
	*size = (size_t)got;
	return 0;
}

/* Parses text[0..size) into ids; the count, or -HASP_ECONFIG. */
static int text_parse(const char *text, size_t size, struct client_identity *ids,
		      uint32_t default_sessions, const char *path, char *err, size_t err_size)
{
	uint32_t count = 0;
	unsigned line = 0;

	for (const char *p = text, *end = text + size; p < end;) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *stop = eol != NULL ? eol : end;
		const char *first = p;
		line++;
		while (first < stop && (*first == ' ' || *first == '\t'))
			first++;
		if (first < stop && *first != '#' && *first != '\r') {
			if (count == CLIENT_IDENTITIES_MAX)
				return fail(err, err_size, "%s:%u: more than %u identities", path, line,
					    CLIENT_IDENTITIES_MAX);
			int rc = line_parse(&ids[count], first, stop, default_sessions, path, line, err,
					    err_size);
			if (rc != 0)
				return rc;
			for (uint32_t i = 0; i < count; i++)
				if (ids[i].owner == ids[count].owner)
					return fail(err, err_size, "%s:%u: identity named twice", path, line);
			count++;
		}
		p = eol != NULL ? eol + 1 : end;
	}
	return (int)count;
}

int client_auth_load(struct client_auth *a, const char *path, uint32_t default_sessions, char *err,
		     size_t err_size)
{
	size_t size = 0;
	int rc = file_read(path, a->text, &size, err, err_size);

	if (rc == 0)
		rc = text_parse(a->text, size, a->next, default_sessions, path, err, err_size);
	memset(a->text, 0, size);
	if (rc >= 0) {
		uint32_t count = (uint32_t)rc;
		memset(a->ids, 0, CLIENT_IDENTITIES_MAX * sizeof(*a->ids));
		memcpy(a->ids, a->next, count * sizeof(*a->ids));
		a->id_count = count;
		/* Keys derived under the old file go: a removed identity's
		 * sessions stop being served at once. */
		memset(a->keys, 0, (size_t)a->slots * sizeof(*a->keys));
		rc = 0;
	}
	memset(a->next, 0, CLIENT_IDENTITIES_MAX * sizeof(*a->next));
	return rc;
}

const struct client_identity *client_auth_identity(const struct client_auth *a, const uint8_t *name,
						   size_t size)
{
	for (uint32_t i = 0; i < a->id_count; i++)
		if (a->ids[i].name_len == size && memcmp(a->ids[i].name, name, size) == 0)
			return &a->ids[i];
	return NULL;
}

const struct auth_key *client_auth_session_key(struct client_auth *a, const struct locks *sm,
					       uint64_t session_id, const struct client_identity **who)
{
	struct locks_session_info si;
	uint32_t slot = (uint32_t)(session_id & ((1u << 24) - 1u));

	if (session_id == 0 || slot >= a->slots)
		return NULL;
	struct client_session_key *k = &a->keys[slot];
	if (k->session_id == session_id && k->identity < a->id_count) {
		*who = &a->ids[k->identity];
		return &k->key;
	}
	if (!locks_session_read(sm, session_id, &si))
		return NULL;
	for (uint32_t i = 0; i < a->id_count; i++) {
		if (a->ids[i].owner != si.owner)
			continue;
		hasp_session_key(&a->ids[i].key, session_id, si.nonce, &k->key);
		k->session_id = session_id;
		k->identity = i;
		*who = &a->ids[i];
		return &k->key;
	}
	return NULL;
}

/* The permission an opcode needs, and the name it acts on. */
static uint8_t needed(const struct hasp_wire_msg *m, const struct hasp_wire_bytes **name)
{
	switch (m->hdr.opcode) {
	case HASP_OP_ACQUIRE: *name = &m->body.acquire.name; return CLIENT_PERM_ACQUIRE;
	case HASP_OP_RELEASE: *name = &m->body.release.name; return CLIENT_PERM_ACQUIRE;
	case HASP_OP_RENEW: *name = &m->body.renew.name; return CLIENT_PERM_ACQUIRE;
	case HASP_OP_CANCEL: *name = &m->body.cancel.name; return CLIENT_PERM_ACQUIRE;
	case HASP_OP_CHECK: *name = &m->body.check.name; return CLIENT_PERM_READ;
	case HASP_OP_LOCK_READ: *name = &m->body.lock_read.name; return CLIENT_PERM_READ;
	case HASP_OP_WATCH:
	case HASP_OP_UNWATCH: *name = &m->body.watch.name; return CLIENT_PERM_WATCH;
	case HASP_OP_KV_GET: *name = &m->body.kv_get.name; return CLIENT_PERM_KV_READ;
	case HASP_OP_KV_RANGE: *name = &m->body.kv_range.prefix; return CLIENT_PERM_KV_READ;
	case HASP_OP_KV_PUT: *name = &m->body.kv_put.key; return CLIENT_PERM_KV_WRITE;
	case HASP_OP_KV_DELETE: *name = &m->body.kv_delete.name; return CLIENT_PERM_KV_WRITE;
	case HASP_OP_KV_CAS: *name = &m->body.kv_cas.key; return CLIENT_PERM_KV_WRITE;
	default: /* sessions and leases: every identity */
		*name = NULL;
		return 0;
	}
}

bool client_auth_allows(const struct client_identity *id, const struct hasp_wire_msg *m)
{
	const struct hasp_wire_bytes *name;
	uint8_t perm = needed(m, &name);

	HASP_ASSERT(id != NULL);
	if (perm == 0)
		return true;
	HASP_ASSERT(name != NULL);
	/* A name and a prefix request (WATCH with PREFIX, KV_RANGE) alike
	 * need a rule prefix that starts them: a prefix request then stays
	 * inside what the rule allows. */
	for (uint32_t i = 0; i < id->rule_count; i++) {
		const struct client_rule *r = &id->rules[i];
		if ((r->perms & perm) && r->prefix_len <= name->size &&
		    memcmp(r->prefix, name->data, r->prefix_len) == 0)
			return true;
	}
	return false;
}
