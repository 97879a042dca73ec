/*
 * A main() for fuzz targets in builds without libFuzzer: it feeds each file
 * named on the command line (or each file in a named directory) to
 * LLVMFuzzerTestOneInput once. That keeps every crash input found by real
 * fuzzing as a regression test in the ordinary (and sanitizer) suites.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *data;
	long size;

	if (f == NULL) {
		perror(path);
		return 1;
	}
	if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
		fclose(f);
		return 1;
	}
	data = malloc(size > 0 ? (size_t)size : 1);
	if (data == NULL || fread(data, 1, (size_t)size, f) != (size_t)size) {
		free(data);
		fclose(f);
		return 1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(data, (size_t)size);
	free(data);
	return 0;
}

static int replay_path(const char *path, unsigned *count)
{
	struct stat st;
	DIR *dir;
	struct dirent *ent;
	int rc = 0;

	if (stat(path, &st) != 0) {
		perror(path);
		return 1;
	}
	if (!S_ISDIR(st.st_mode)) {
		(*count)++;
		return replay_file(path);
	}
	dir = opendir(path);
	if (dir == NULL)
		return 1;
	while ((ent = readdir(dir)) != NULL) {
		char child[4096];
		if (ent->d_name[0] == '.')
			continue;
		snprintf(child, sizeof(child), "%s/%s", path, ent->d_name);
		rc |= replay_path(child, count);
	}
	closedir(dir);
	return rc;
}

int main(int argc, char **argv)
{
	unsigned count = 0;
	int rc = 0;

	for (int i = 1; i < argc; i++) {
		if (argv[i][0] == '-')
			continue; /* libFuzzer flags are meaningless here */
		rc |= replay_path(argv[i], &count);
	}
	printf("replayed %u inputs\n", count);
	if (count == 0) {
		fprintf(stderr, "no corpus inputs found: the regression corpus is missing\n");
		return 1;
	}
	return rc;
}
