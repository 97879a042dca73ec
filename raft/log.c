/*
 * The in-memory log window (see log.h for its shape). Every function is O(1)
 * except log_find_conflict_by_term(), which walks back over one term.
 */
#include "raft/log.h"

#include <string.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "hasp/errors.h"
#include "raft/core.h"

int log_init(struct raft_log *l, uint32_t window, uint32_t entry_bytes_max)
{
	HASP_ASSERT(window > 0);
	HASP_ASSERT(entry_bytes_max > 0);
	memset(l, 0, sizeof(*l));
	l->slots = core_zalloc(window, sizeof(*l->slots));
	l->data = core_zalloc(window, entry_bytes_max);
	if (l->slots == NULL || l->data == NULL) {
		log_deinit(l);
		return -HASP_ENOMEM;
	}
	l->window = window;
	l->entry_bytes_max = entry_bytes_max;
	log_reset(l, 0, 0);
	return 0;
}

void log_deinit(struct raft_log *l)
{
	hasp_free(l->slots);
	hasp_free(l->data);
	l->slots = NULL;
	l->data = NULL;
}

void log_reset(struct raft_log *l, uint64_t snap_index, uint64_t snap_term)
{
	l->snap_index = snap_index;
	l->snap_term = snap_term;
	l->first = snap_index + 1;
	l->last = snap_index;
}

static struct raft_entry *slot_of(const struct raft_log *l, uint64_t index)
{
	return &l->slots[index % l->window];
}

bool log_has_term(const struct raft_log *l, uint64_t index)
{
	return index == l->snap_index || (index >= l->first && index <= l->last);
}

uint64_t log_term(const struct raft_log *l, uint64_t index)
{
	if (index >= l->first && index <= l->last)
		return slot_of(l, index)->term;
	if (index == l->snap_index)
		return l->snap_term;
	return 0;
}

const struct raft_entry *log_get(const struct raft_log *l, uint64_t index)
{
	if (index < l->first || index > l->last)
		return NULL;
	const struct raft_entry *e = slot_of(l, index);
	HASP_ASSERT(e->index == index);
	return e;
}

const struct raft_entry *log_append(struct raft_log *l, uint64_t term, uint8_t type,
				    const void *data, uint32_t size)
{
	HASP_ASSERT(log_room(l) > 0);
	HASP_ASSERT(size <= l->entry_bytes_max);
	HASP_ASSERT(l->last < l->first || term >= slot_of(l, l->last)->term);
	uint64_t index = l->last + 1;
	struct raft_entry *e = slot_of(l, index);
	uint8_t *buf = l->data + (size_t)(index % l->window) * l->entry_bytes_max;

	if (size > 0)
		memcpy(buf, data, size);
	e->term = term;
	e->index = index;
	e->type = type;
	e->size = size;
	e->data = buf;
	l->last = index;
	return e;
}

void log_truncate(struct raft_log *l, uint64_t from)
{
	HASP_ASSERT(from > l->snap_index);
	HASP_ASSERT(from >= l->first);
	if (from <= l->last)
		l->last = from - 1;
}

void log_compact(struct raft_log *l, uint64_t index, uint64_t term, uint64_t keep_from)
{
	HASP_ASSERT(keep_from <= index + 1);
	HASP_ASSERT(index >= l->snap_index);
	if (index > l->last || log_term(l, index) != term) {
		log_reset(l, index, term);
		return;
	}
	l->snap_index = index;
	l->snap_term = term;
	if (keep_from > l->first)
		l->first = keep_from;
}

uint64_t log_find_conflict_by_term(const struct raft_log *l, uint64_t index, uint64_t term)
{
	if (index > l->last)
		index = l->last;
	while (index > l->snap_index && index >= l->first && log_term(l, index) > term)
		index--;
	return index;
}
