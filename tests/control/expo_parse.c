/*
 * The test reader of the Prometheus text format (see expo_parse.h).
 */
#include "tests/control/expo_parse.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/test_util.h"

static bool is_name(const char *s, size_t n, bool label)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		bool ok = isalpha((unsigned char)c) || c == '_' || (!label && c == ':') ||
			  (i > 0 && isdigit((unsigned char)c));
		if (!ok)
			return false;
	}
	return true;
}

int fam_index(struct parsed *p, const char *name)
{
	for (int i = 0; i < p->fam_count; i++)
		if (strcmp(p->fam[i], name) == 0)
			return i;
	return -1;
}

/* The family a sample name belongs to (histograms add suffixes). */
static int sample_family(struct parsed *p, const char *name, char *suffix)
{
	int f = fam_index(p, name);
	suffix[0] = '\0';
	if (f >= 0)
		return f;
	static const char *const sfx[] = { "_bucket", "_sum", "_count" };
	for (int k = 0; k < 3; k++) {
		size_t n = strlen(name), m = strlen(sfx[k]);
		if (n > m && strcmp(name + n - m, sfx[k]) == 0) {
			char base[80];
			memcpy(base, name, n - m);
			base[n - m] = '\0';
			f = fam_index(p, base);
			if (f >= 0 && strcmp(p->type[f], "histogram") == 0) {
				strcpy(suffix, sfx[k]);
				return f;
			}
		}
	}
	return -1;
}

/* Parses the whole text; fails the test with the line on any violation. */
void expo_parse(const char *text, struct parsed *p)
{
	memset(p, 0, sizeof(*p));
	const char *line = text;
	int current = -1; /* family whose samples may follow */
	assert_true(text[0] != '\0');
	assert_true(text[strlen(text) - 1] == '\n');
	while (*line != '\0') {
		const char *nl = strchr(line, '\n');
		assert_non_null(nl);
		char l[512];
		size_t n = (size_t)(nl - line);
		assert_true(n < sizeof(l));
		memcpy(l, line, n);
		l[n] = '\0';
		line = nl + 1;
		if (strncmp(l, "# HELP ", 7) == 0) {
			char *name = l + 7, *sp = strchr(name, ' ');
			assert_non_null(sp);
			*sp = '\0';
			assert_true(is_name(name, strlen(name), false));
			if (fam_index(p, name) >= 0)
				fail_msg("HELP repeated for %s", name);
			assert_true(p->fam_count < FAM_MAX);
			strcpy(p->fam[p->fam_count], name);
			snprintf(p->help[p->fam_count], sizeof(p->help[0]), "%s", sp + 1);
			p->fam_count++;
			current = -1;
			continue;
		}
		if (strncmp(l, "# TYPE ", 7) == 0) {
			char name[80], type[32];
			assert_int_equal(sscanf(l + 7, "%79s %31s", name, type), 2);
			int f = fam_index(p, name);
			if (f < 0 || p->type[f][0] != '\0')
				fail_msg("TYPE without HELP or repeated: %s", l);
			if (strcmp(type, "counter") && strcmp(type, "gauge") && strcmp(type, "histogram"))
				fail_msg("unknown type: %s", l);
			strcpy(p->type[f], type);
			current = f;
			continue;
		}
		assert_true(l[0] != '#');
		/* A sample: name[{labels}] value */
		struct sample *s = &p->s[p->count];
		assert_true(p->count < SAMPLES_MAX);
		size_t k = 0;
		while (l[k] != '\0' && l[k] != '{' && l[k] != ' ')
			k++;
		assert_true(is_name(l, k, false));
		memcpy(s->name, l, k);
		s->name[k] = '\0';
		char suffix[16];
		int f = sample_family(p, s->name, suffix);
		if (f < 0 || f != current)
			fail_msg("sample outside its family's block: %s", l);
		strcpy(s->family, p->fam[f]);
		size_t lo = 0;
		if (l[k] == '{') {
			k++;
			while (l[k] != '}') {
				size_t ks = k;
				while (l[k] != '=' && l[k] != '\0')
					k++;
				assert_true(is_name(l + ks, k - ks, true));
				char lname[40];
				memcpy(lname, l + ks, k - ks);
				lname[k - ks] = '\0';
				assert_true(l[k] == '=' && l[k + 1] == '"');
				k += 2;
				char val[96];
				size_t vn = 0;
				while (l[k] != '"') {
					assert_true(l[k] != '\0');
					if (l[k] == '\\') {
						k++;
						assert_true(l[k] == '\\' || l[k] == '"' || l[k] == 'n');
						val[vn++] = l[k] == 'n' ? '\n' : l[k];
					} else {
						val[vn++] = l[k];
					}
					k++;
				}
				val[vn] = '\0';
				k++;
				if (strcmp(lname, "le") == 0) {
					assert_string_equal(suffix, "_bucket");
					strcpy(s->le, val);
				} else {
					lo += (size_t)snprintf(s->labels + lo, sizeof(s->labels) - lo, "%s%s=%s",
							       lo ? ";" : "", lname, val);
				}
				if (l[k] == ',')
					k++;
				else
					assert_true(l[k] == '}');
			}
			k++;
		}
		if (strcmp(suffix, "_bucket") == 0)
			assert_true(s->le[0] != '\0');
		assert_true(l[k] == ' ');
		const char *v = l + k + 1;
		char *end;
		if (strcmp(v, "+Inf") == 0)
			s->value = INFINITY;
		else {
			s->value = strtod(v, &end);
			if (end == v || *end != '\0')
				fail_msg("bad value: %s", l);
		}
		p->count++;
	}
	for (int f = 0; f < p->fam_count; f++)
		if (p->type[f][0] == '\0')
			fail_msg("family without TYPE: %s", p->fam[f]);
}

/* Checks every histogram series: cumulative buckets, +Inf last, == _count. */
void expo_check_histograms(const struct parsed *p)
{
	for (int i = 0; i < p->count; i++) {
		const struct sample *s = &p->s[i];
		size_t n = strlen(s->name);
		if (n < 7 || strcmp(s->name + n - 7, "_bucket") != 0 || strcmp(s->le, "+Inf") != 0)
			continue;
		/* Walk back over this series' buckets. */
		double prev = s->value, prev_le = INFINITY;
		int j = i - 1;
		for (; j >= 0 && strcmp(p->s[j].name, s->name) == 0 && strcmp(p->s[j].labels, s->labels) == 0;
		     j--) {
			double le = strtod(p->s[j].le, NULL);
			assert_true(p->s[j].value <= prev);
			assert_true(le < prev_le);
			prev = p->s[j].value;
			prev_le = le;
		}
		assert_true(i - j >= 2); /* at least one finite bucket */
		assert_string_equal(p->s[i + 1].name + strlen(p->s[i + 1].family), "_sum");
		assert_string_equal(p->s[i + 2].name + strlen(p->s[i + 2].family), "_count");
		assert_string_equal(p->s[i + 2].labels, s->labels);
		assert_true(p->s[i + 2].value == s->value);
	}
}

const struct sample *find(const struct parsed *p, const char *name, const char *labels,
				 const char *le)
{
	for (int i = 0; i < p->count; i++)
		if (strcmp(p->s[i].name, name) == 0 && strcmp(p->s[i].labels, labels) == 0 &&
		    strcmp(p->s[i].le, le) == 0)
			return &p->s[i];
	return NULL;
}
