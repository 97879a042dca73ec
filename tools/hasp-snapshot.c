/*
 * hasp-snapshot: offline work on snapshot files, beside hasp-waldump.
 *
 *   hasp-snapshot [--json] restore <file> <new-data-dir> [--members ID,ID,...]
 *
 * `restore` checks a snapshot file saved with `haspctl snapshot save` and
 * writes it into a new (missing or empty) data directory with storage/
 * (temp file, fsync, rename, directory fsync), with a hard state at the
 * snapshot's term and, with --members, a new voter set; a node booting
 * there recovers from it like from its own snapshot (docs/CONTROL.md
 * "Backup and restore").
 *
 * It lives in tools/ because it reads and writes storage files: control/,
 * where haspctl lives, links neither storage/ nor the node
 * (docs/ARCHITECTURE.md). `haspctl snapshot restore` runs this program.
 *
 * Exit codes (the same as haspctl's): 0 done, 1 the file or the directory
 * was refused or could not be written (nothing is left behind but what
 * snapshot_save() cleans up), 2 usage.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "common/version.h"
#include "hasp/errors.h"
#include "storage/hardstate.h"
#include "storage/snapshot.h"
#include "storage/uring.h"

#define EXIT_DONE 0
#define EXIT_REFUSED 1
#define EXIT_USAGE 2
#define MEMBERS_MAX 9u

static const char usage_text[] =
	"usage: hasp-snapshot [--json] restore <file> <new-data-dir> [--members ID,ID,...]\n"
	"  restore: checks a snapshot file (haspctl snapshot save) and writes it into a new,\n"
	"  empty data directory; --members replaces the voter set (1 to 9 node ids).\n"
	"Exit: 0 ok, 1 refused or failed, 2 usage.\n";

static int usage(const char *why)
{
	if (why != NULL)
		fprintf(stderr, "hasp-snapshot: %s\n", why);
	fputs(usage_text, stderr);
	return EXIT_USAGE;
}

static int parse_id(const char *s, uint32_t *v)
{
	char *end;
	errno = 0;
	unsigned long x = strtoul(s, &end, 10);
	if (s[0] < '1' || s[0] > '9' || *end != '\0' || errno != 0 || x == 0 || x > UINT32_MAX)
		return -1;
	*v = (uint32_t)x;
	return 0;
}

/* The membership blob of snapshot files written by the node
 * (node/node.c conf_encode()): count u8, then count x (id u32
 * little-endian, role u8), role 1 = voter. */
static size_t membership_encode(const uint32_t *ids, uint32_t count, uint8_t *buf)
{
	size_t off = 0;
	HASP_ASSERT(count >= 1 && count <= MEMBERS_MAX);
	buf[off++] = (uint8_t)count;
	for (uint32_t i = 0; i < count; i++) {
		buf[off++] = (uint8_t)ids[i];
		buf[off++] = (uint8_t)(ids[i] >> 8);
		buf[off++] = (uint8_t)(ids[i] >> 16);
		buf[off++] = (uint8_t)(ids[i] >> 24);
		buf[off++] = 1;
	}
	HASP_ASSERT(off == 1 + 5 * (size_t)count);
	return off;
}

/* 1: missing or empty; 0: holds something; -1: cannot be read (errno). */
static int dir_is_empty(const char *dir)
{
	DIR *d = opendir(dir);
	if (d == NULL)
		return errno == ENOENT ? 1 : -1;
	int empty = 1;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			empty = 0;
	closedir(d);
	return empty;
}

static int read_file(const char *path, uint8_t **data, uint64_t *size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat sb;
	if (fd < 0 || fstat(fd, &sb) != 0) {
		fprintf(stderr, "hasp-snapshot: cannot open %s: %s\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return EXIT_REFUSED;
	}
	if ((uint64_t)sb.st_size > SNAPSHOT_DATA_SIZE_MAX + SNAPSHOT_MEMBERSHIP_SIZE_MAX ||
	    sb.st_size < SNAPSHOT_HEADER_SIZE) {
		fprintf(stderr, "hasp-snapshot: %s: not a snapshot (size %lld)\n", path,
			(long long)sb.st_size);
		close(fd);
		return EXIT_REFUSED;
	}
	*size = (uint64_t)sb.st_size;
	*data = hasp_alloc(*size);
	uint64_t off = 0;
	while (*data != NULL && off < *size) {
		ssize_t n = pread(fd, *data + off, *size - off, (off_t)off);
		if (n <= 0)
			break;
		off += (uint64_t)n;
	}
	close(fd);
	if (*data == NULL || off != *size) {
		fprintf(stderr, "hasp-snapshot: cannot read %s\n", path);
		hasp_free(*data);
		return EXIT_REFUSED;
	}
	return 0;
}

/* Writes the hard state (term = the snapshot's term, no vote) a node booting
 * from the snapshot needs: Raft's current term is never below the last log
 * term (§3.3), and a fresh data dir would start at term 0. Slot 0 holds it,
 * slot 1 stays zero (invalid), as after a first save. */
static int hardstate_write(struct storage_io io, uint64_t term)
{
	static uint8_t slots[2 * HARDSTATE_SLOT_SIZE];
	struct hard_state hs = { .term = term, .vote = 0 };
	int fd;
	bool direct;
	HASP_ASSERT(term > 0);
	memset(slots, 0, sizeof(slots));
	hardstate_slot_encode(slots, 1, &hs);
	int rc = io.ops->open(io.ctx, HARDSTATE_FILE, STORAGE_OPEN_CREATE, &fd, &direct);
	if (rc != 0)
		return -HASP_EIO;
	rc = io.ops->pwrite(io.ctx, fd, slots, sizeof(slots), 0);
	if (rc == 0)
		rc = io.ops->fsync(io.ctx, fd);
	io.ops->close(io.ctx, fd);
	if (rc == 0)
		rc = io.ops->sync_dir(io.ctx);
	return rc == 0 ? 0 : -HASP_EIO;
}

/* A JSON string body: the directory is the operator's, any bytes. */
static void json_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s != '\0'; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			fprintf(out, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(out, "\\u%04x", ch);
		else
			fputc(ch, out);
	}
	fputc('"', out);
}

static int cmd_restore(bool json, int argc, char **argv)
{
	static const char form[] = "hasp-snapshot restore <file> <new-data-dir> [--members ID,ID,...]";
	uint32_t ids[MEMBERS_MAX];
	uint32_t id_count = 0;

	if (argc == 4 && strcmp(argv[2], "--members") == 0) {
		char buf[256];
		if (strlen(argv[3]) >= sizeof(buf))
			return usage("--members takes 1 to 9 node ids: 1,2,3");
		snprintf(buf, sizeof(buf), "%s", argv[3]);
		char *save = NULL;
		for (char *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
			if (id_count == MEMBERS_MAX || parse_id(t, &ids[id_count]) != 0)
				return usage("--members takes 1 to 9 node ids: 1,2,3");
			id_count++;
		}
		if (id_count == 0)
			return usage("--members takes 1 to 9 node ids: 1,2,3");
	} else if (argc != 2) {
		return usage(form);
	}
	const char *file = argv[0], *dir = argv[1];
	int empty = dir_is_empty(dir);
	if (empty != 1) {
		fprintf(stderr, "hasp-snapshot: %s: %s\n", dir,
			empty == 0 ? "not empty (restore only into a new data dir)" : strerror(errno));
		return EXIT_REFUSED;
	}
	uint8_t *image;
	uint64_t size;
	int rc = read_file(file, &image, &size);
	if (rc != 0)
		return rc;
	struct snapshot_meta meta;
	int err = snapshot_decode(image, size, &meta);
	if (err != 0) {
		fprintf(stderr, "hasp-snapshot: %s: not a valid snapshot: %s\n", file, hasp_strerror(err));
		hasp_free(image);
		return EXIT_REFUSED;
	}
	HASP_ASSERT(SNAPSHOT_HEADER_SIZE + (uint64_t)meta.membership_size + meta.data_size <= size);
	const uint8_t *membership = image + SNAPSHOT_HEADER_SIZE;
	const uint8_t *data = membership + meta.membership_size;
	uint8_t blob[1 + MEMBERS_MAX * 5];
	if (id_count > 0) {
		meta.membership_size = (uint32_t)membership_encode(ids, id_count, blob);
		membership = blob;
	}
	struct uring_io *u;
	err = uring_io_open(&u, dir, 8);
	if (err == 0) {
		err = snapshot_save(uring_io_ops(u), &meta, membership, data, 1, NULL);
		if (err == 0)
			err = hardstate_write(uring_io_ops(u), meta.last_term);
		uring_io_close(u);
	}
	hasp_free(image);
	if (err != 0) {
		fprintf(stderr, "hasp-snapshot: cannot write the snapshot into %s: %s\n", dir,
			hasp_strerror(err));
		return EXIT_REFUSED;
	}
	if (json) {
		printf("{\"ok\":true,\"command\":\"snapshot.restore\",\"result\":{\"index\":%" PRIu64
		       ",\"term\":%" PRIu64 ",\"data_size\":%" PRIu64 ",\"dir\":",
		       meta.last_index, meta.last_term, meta.data_size);
		json_string(stdout, dir);
		printf("}}\n");
	} else {
		printf("restored snapshot index=%" PRIu64 " term=%" PRIu64 " into %s\n", meta.last_index,
		       meta.last_term, dir);
	}
	return EXIT_DONE;
}

int main(int argc, char **argv)
{
	bool json = false;
	int i = 1;

	if (version_requested(argc, argv, "hasp-snapshot"))
		return 0;
	if (help_requested(argc, argv)) {
		fputs(usage_text, stdout);
		return 0;
	}
	for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json = true;
		else if (strcmp(argv[i], "--help") == 0) {
			fputs(usage_text, stdout);
			return EXIT_DONE;
		} else
			return usage("unknown option");
	}
	if (i == argc)
		return usage(NULL);
	if (strcmp(argv[i], "restore") == 0)
		return cmd_restore(json, argc - i - 1, argv + i + 1);
	return usage("unknown command");
}
