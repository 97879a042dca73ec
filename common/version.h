/*
 * The release version every program prints for --version (docs/OPERATIONS.md
 * "Versions"). It must equal project(version:) in meson.build: the
 * `cli_version` test runs every program with --version and compares.
 */
#ifndef HASP_COMMON_VERSION_H
#define HASP_COMMON_VERSION_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define HASP_VERSION "0.1.0"

/* True when `--version` is among argv[1..] before a lone "--": the program
 * then prints "<program> <version>" to stdout and exits 0 without doing
 * anything else. */
static inline bool version_requested(int argc, char **argv, const char *program)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "--version") == 0) {
			printf("%s %s\n", program, HASP_VERSION);
			return true;
		}
	return false;
}

/* True when -h or --help is among argv[1..] before a lone "--" (even where
 * an option's value would be): the program prints its usage, exits 0 and
 * does nothing else (no traffic, no files). */
static inline bool help_requested(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return true;
	return false;
}

#endif
