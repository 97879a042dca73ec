/*
 * A strict reader of the Prometheus text exposition format (0.0.4) for
 * tests: HELP and TYPE once per family and before its samples, metric and
 * label name syntax, quoted and escaped label values, float values, and for
 * histograms cumulative _bucket series ending in le="+Inf" whose count
 * equals _count, plus _sum. Failures are cmocka failures.
 */
#ifndef HASP_TESTS_CONTROL_EXPO_PARSE_H
#define HASP_TESTS_CONTROL_EXPO_PARSE_H

#include <stdbool.h>

#define FAM_MAX 128
#define SAMPLES_MAX 1024

struct sample {
	char family[64];
	char name[80];
	char labels[160]; /* canonical: k=v;k=v (unescaped) */
	char le[32];
	double value;
};

struct parsed {
	char fam[FAM_MAX][64];
	char type[FAM_MAX][16];
	char help[FAM_MAX][160];
	int fam_count;
	struct sample s[SAMPLES_MAX];
	int count;
};

/* Parses text into p, failing the test on any format violation. */
void expo_parse(const char *text, struct parsed *p);
/* Checks every histogram family's buckets, _count and _sum. */
void expo_check_histograms(const struct parsed *p);
/* The family's index, or -1. */
int fam_index(struct parsed *p, const char *name);
/* The sample with that name, canonical labels and le, or NULL. */
const struct sample *find(const struct parsed *p, const char *name, const char *labels,
			  const char *le);

#endif
