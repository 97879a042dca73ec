/*
 * hasp-keygen: writes a new random key file for hasp (docs/SECURITY.md).
 *
 *   hasp-keygen FILE
 *   hasp-keygen --public FILE
 *   hasp-keygen --identity NAME --identities IDFILE [--allow PERM:PREFIX ...]
 *               [--sessions N] [--release identity|session] FILE
 *
 * The key file is created with mode 0600 and never overwritten (remove the
 * old key yourself when you rotate it); it holds 64 hex digits and a
 * newline, the format common/auth.h reads. With --identity the same key is
 * also appended as a client identity line to IDFILE (created 0600 when
 * missing; the node's client_identities_file, format in
 * node/client_auth.h), so FILE becomes that client's key file. The key is
 * never printed. A node's key file (node_key_file) is made the same way;
 * --public reads an existing one and prints its X25519 public key, 64 hex
 * digits and a newline, for the node's member line and `haspctl members
 * add` (docs/SECURITY.md 3.5). The public key is not a secret. Exit 0 on success, 1 when a file exists, holds the name
 * already or cannot be written, 2 on bad usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/auth.h"
#include "common/version.h"
#include "hasp/errors.h"
#include "hasp/wire.h"

#define ALLOW_MAX 16

static const char usage_text[] =
	"usage: hasp-keygen FILE\n"
	"       hasp-keygen --public FILE\n"
	"       hasp-keygen --identity NAME --identities IDFILE [--allow PERM:PREFIX ...]\n"
	"                   [--sessions N] [--release identity|session] FILE\n"
	"  PERM: read, acquire, watch, kv_read, kv_write, all; PREFIX may be empty (every name).\n"
	"  Writes a new 0600 key file (never overwrites); with --identity also appends\n"
	"  the client identity to IDFILE (the node's client_identities_file).\n"
	"  --public prints the public key of an existing node key file (node_key_file)\n"
	"  for the member lines and haspctl members add.\n";

struct args {
	const char *file, *identity, *identities, *sessions, *release;
	const char *allow[ALLOW_MAX];
	int allow_count;
	bool public_only;
};

static int usage(const char *why)
{
	if (why != NULL)
		fprintf(stderr, "hasp-keygen: %s\n", why);
	fputs(usage_text, stderr);
	return 2;
}

static int parse(int argc, char **argv, struct args *a)
{
	memset(a, 0, sizeof(*a));
	for (int i = 1; i < argc; i++) {
		const char *w = argv[i];
		if (strcmp(w, "-h") == 0 || strcmp(w, "--help") == 0) {
			fputs(usage_text, stdout);
			exit(0);
		}
		bool takes = strcmp(w, "--identity") == 0 || strcmp(w, "--identities") == 0 ||
			     strcmp(w, "--allow") == 0 || strcmp(w, "--sessions") == 0 ||
			     strcmp(w, "--release") == 0;
		if (takes && i + 1 >= argc)
			return usage("an option is missing its value");
		if (strcmp(w, "--public") == 0)
			a->public_only = true;
		else if (strcmp(w, "--identity") == 0)
			a->identity = argv[++i];
		else if (strcmp(w, "--identities") == 0)
			a->identities = argv[++i];
		else if (strcmp(w, "--sessions") == 0)
			a->sessions = argv[++i];
		else if (strcmp(w, "--release") == 0)
			a->release = argv[++i];
		else if (strcmp(w, "--allow") == 0) {
			if (a->allow_count == ALLOW_MAX)
				return usage("more than 16 --allow rules");
			a->allow[a->allow_count++] = argv[++i];
		} else if (w[0] == '-')
			return usage("unknown option");
		else if (a->file != NULL)
			return usage("one key file only");
		else
			a->file = w;
	}
	if (a->file == NULL)
		return usage(NULL);
	if (a->public_only && (a->identity != NULL || a->identities != NULL || a->allow_count > 0 ||
			       a->sessions != NULL || a->release != NULL))
		return usage("--public takes only the key file");
	if ((a->identity == NULL) != (a->identities == NULL))
		return usage("--identity and --identities go together");
	if (a->identity == NULL && (a->allow_count > 0 || a->sessions != NULL || a->release != NULL))
		return usage("--allow, --sessions and --release need --identity");
	if (a->identity != NULL &&
	    (strlen(a->identity) > HASP_IDENTITY_SIZE_MAX || !hasp_name_valid(a->identity, strlen(a->identity))))
		return usage("the identity name must be 1..32 bytes of 0x21..0x7e");
	for (int k = 0; k < a->allow_count; k++)
		if (strchr(a->allow[k], ':') == NULL || strpbrk(a->allow[k], " \t\n") != NULL)
			return usage("--allow wants PERM:PREFIX without spaces");
	if (a->release != NULL && strcmp(a->release, "identity") != 0 && strcmp(a->release, "session") != 0)
		return usage("--release wants identity or session");
	if (a->sessions != NULL && strspn(a->sessions, "0123456789") != strlen(a->sessions))
		return usage("--sessions wants a number");
	return 0;
}

/* True when IDFILE already has a line for `name`. */
static bool identity_present(FILE *f, const char *name)
{
	char line[4096];
	size_t n = strlen(name);

	rewind(f);
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, name, n) == 0 && (line[n] == ' ' || line[n] == '\t'))
			return true;
	return false;
}

static int append_identity(const struct args *a, const struct auth_key *key)
{
	int fd = open(a->identities, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	struct stat st;

	if (fd < 0 || fstat(fd, &st) != 0) {
		fprintf(stderr, "hasp-keygen: %s: %s\n", a->identities, strerror(errno));
		if (fd >= 0)
			close(fd);
		return 1;
	}
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
		fprintf(stderr, "hasp-keygen: %s must be a regular file owned by this user, mode 0600\n",
			a->identities);
		close(fd);
		return 1;
	}
	FILE *f = fdopen(fd, "a+");
	if (f == NULL) {
		close(fd);
		return 1;
	}
	if (identity_present(f, a->identity)) {
		fprintf(stderr, "hasp-keygen: %s: identity %s exists (remove its line to replace it)\n",
			a->identities, a->identity);
		fclose(f);
		return 1;
	}
	fprintf(f, "%s ", a->identity);
	for (size_t i = 0; i < sizeof(key->bytes); i++)
		fprintf(f, "%02x", key->bytes[i]);
	for (int k = 0; k < a->allow_count; k++)
		fprintf(f, " allow=%s", a->allow[k]);
	if (a->sessions != NULL)
		fprintf(f, " sessions=%s", a->sessions);
	if (a->release != NULL)
		fprintf(f, " release=%s", a->release);
	fputc('\n', f);
	int rc = fflush(f) == 0 && fsync(fileno(f)) == 0 ? 0 : 1;
	if (fclose(f) != 0 || rc != 0) {
		fprintf(stderr, "hasp-keygen: %s: write failed\n", a->identities);
		return 1;
	}
	return 0;
}

/* --public: the X25519 public key of an existing node key file. */
static int print_public(const char *file)
{
	struct auth_key key;
	uint8_t pub[AUTH_PUBLIC_SIZE];
	char text[AUTH_PUBLIC_HEX_SIZE];

	int rc = auth_key_load(file, &key);
	if (rc != 0) {
		fprintf(stderr, "hasp-keygen: %s: %s\n", file,
			rc == -HASP_ECONFIG ? "must be a regular file owned by this user, mode 0600 or 0400"
					    : hasp_strerror(rc));
		return 1;
	}
	rc = auth_public_key(&key, pub);
	auth_key_wipe(&key);
	if (rc != 0) {
		fprintf(stderr, "hasp-keygen: %s: not a usable X25519 secret key\n", file);
		return 1;
	}
	auth_public_format(pub, text);
	printf("%s\n", text);
	return fflush(stdout) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct args a;
	struct auth_key key;
	if (version_requested(argc, argv, "hasp-keygen"))
		return 0;
	int rc = parse(argc, argv, &a);

	if (rc != 0)
		return rc;
	if (auth_init() != 0) {
		fprintf(stderr, "hasp-keygen: libsodium failed to initialise\n");
		return 1;
	}
	if (a.public_only)
		return print_public(a.file);
	auth_key_generate(&key);
	rc = auth_key_save(a.file, &key);
	if (rc != 0) {
		auth_key_wipe(&key);
		fprintf(stderr, "hasp-keygen: %s: %s\n", a.file,
			rc == -HASP_EEXIST ? "exists (remove it first to rotate the key)" : hasp_strerror(rc));
		return 1;
	}
	rc = a.identity != NULL ? append_identity(&a, &key) : 0;
	auth_key_wipe(&key);
	if (rc != 0)
		unlink(a.file); /* no key file for an identity the node will not know */
	return rc;
}
