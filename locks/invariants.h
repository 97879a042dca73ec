/*
 * The state machine's invariant checker (docs/STYLE.md §5): one O(n) walk over
 * every table, called through HASP_DASSERT after each apply and after a
 * restore. locks_invariants_ok() is declared in locks.h.
 */
#ifndef HASP_LOCKS_INVARIANTS_H
#define HASP_LOCKS_INVARIANTS_H

#include "locks/locks.h"

#endif
