/*
 * Logging with per-module topics whose level can change at runtime.
 *
 * Each module defines one topic (LOG_TOPIC_DEFINE(storage) in one .c file,
 * LOG_TOPIC_DECLARE(storage) where else it logs) and logs key=value lines:
 *
 *     LOG_WARN(storage, "short write off=%lu len=%u", off, len);
 *
 * Nothing is logged per packet: the dataplane counts instead. The pure cores
 * (raft/, locks/) never log; they emit trace events through a callback that
 * the node turns into LOG_DEBUG lines.
 *
 * Lines go to stderr as "<monotonic seconds> <LEVEL> <topic>: <message>".
 */
#ifndef HASP_COMMON_LOG_H
#define HASP_COMMON_LOG_H

#include <stdbool.h>

enum log_level {
	LOG_LEVEL_OFF = 0,
	LOG_LEVEL_ERROR = 1,
	LOG_LEVEL_WARN = 2,
	LOG_LEVEL_INFO = 3,
	LOG_LEVEL_DEBUG = 4,
};

struct log_topic {
	const char *name;
	enum log_level level;
	struct log_topic *next; /* registry list, owned by log.c */
};

#define LOG_TOPIC_DECLARE(topic) extern struct log_topic log_topic_##topic

/* Defines the topic and registers it before main() runs. */
#define LOG_TOPIC_DEFINE(topic)                                                \
	struct log_topic log_topic_##topic = { #topic, LOG_LEVEL_INFO, 0 };    \
	__attribute__((constructor)) static void log_topic_register_##topic(void) \
	{                                                                      \
		log_register(&log_topic_##topic);                              \
	}

#define LOG_AT(topic, lvl, ...)                                               \
	do {                                                                  \
		if ((lvl) <= log_topic_##topic.level)                         \
			log_emit(&log_topic_##topic, (lvl), __VA_ARGS__);     \
	} while (0)

#define LOG_ERROR(topic, ...) LOG_AT(topic, LOG_LEVEL_ERROR, __VA_ARGS__)
#define LOG_WARN(topic, ...) LOG_AT(topic, LOG_LEVEL_WARN, __VA_ARGS__)
#define LOG_INFO(topic, ...) LOG_AT(topic, LOG_LEVEL_INFO, __VA_ARGS__)
#define LOG_DEBUG(topic, ...) LOG_AT(topic, LOG_LEVEL_DEBUG, __VA_ARGS__)

void log_register(struct log_topic *topic);

/* Sets the level of one topic by name, or of all with "all".
 * Returns 0 or -HASP_ENOENT when no topic has that name. */
int log_set_level(const char *topic_name, enum log_level level) __attribute__((warn_unused_result));

/* Parses "error", "warn", "info", "debug", "off"; returns -1 if unknown. */
int log_level_parse(const char *text) __attribute__((warn_unused_result));
const char *log_level_name(enum log_level level);

/* Visits every registered topic (for the control plane's "log" command). */
void log_topics_visit(void (*visit)(const struct log_topic *topic, void *arg), void *arg);

void log_emit(const struct log_topic *topic, enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
