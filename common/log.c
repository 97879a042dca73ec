/*
 * The topic registry and the line writer. Registration happens in
 * constructors before main(), so the list needs no lock; level changes are
 * plain stores of an int that readers may see a little late, which is fine
 * for logging.
 */
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "hasp/errors.h"

static struct log_topic *topics;

static const char *const level_names[] = {
	[LOG_LEVEL_OFF] = "off",
	[LOG_LEVEL_ERROR] = "error",
	[LOG_LEVEL_WARN] = "warn",
	[LOG_LEVEL_INFO] = "info",
	[LOG_LEVEL_DEBUG] = "debug",
};

void log_register(struct log_topic *topic)
{
	topic->next = topics;
	topics = topic;
}

int log_set_level(const char *topic_name, enum log_level level)
{
	bool all = strcmp(topic_name, "all") == 0;
	bool found = false;

	for (struct log_topic *t = topics; t != NULL; t = t->next) {
		if (all || strcmp(t->name, topic_name) == 0) {
			t->level = level;
			found = true;
		}
	}
	return found ? 0 : -HASP_ENOENT;
}

int log_level_parse(const char *text)
{
	for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
		if (strcmp(text, level_names[i]) == 0)
			return (int)i;
	}
	return -1;
}

const char *log_level_name(enum log_level level)
{
	if ((size_t)level >= sizeof(level_names) / sizeof(level_names[0]))
		return "?";
	return level_names[level];
}

void log_topics_visit(void (*visit)(const struct log_topic *topic, void *arg), void *arg)
{
	for (struct log_topic *t = topics; t != NULL; t = t->next)
		visit(t, arg);
}

void log_emit(const struct log_topic *topic, enum log_level level, const char *fmt, ...)
{
	char line[1024];
	uint64_t now_us = clock_monotonic_us();
	int len;
	va_list ap;

	len = snprintf(line, sizeof(line), "%lu.%06lu %s %s: ", (unsigned long)(now_us / 1000000u),
		       (unsigned long)(now_us % 1000000u), log_level_name(level), topic->name);
	if (len < 0)
		return;
	va_start(ap, fmt);
	if ((size_t)len < sizeof(line))
		vsnprintf(line + len, sizeof(line) - (size_t)len, fmt, ap);
	va_end(ap);
	/* One fputs per line so that lines from different threads do not mix. */
	fprintf(stderr, "%s\n", line);
}
