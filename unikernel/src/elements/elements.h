/* fluidvim VNF — what an element class's file (elements/<name>.c, listed in list.h) includes: the
 * engine's internals and ELEMENT_OPS, its registration. See struct element_ops in click_internal.h. */
#ifndef FLUIDVIM_ELEMENTS_H
#define FLUIDVIM_ELEMENTS_H
#include "click_internal.h"

/* The registration of element class n, at the end of elements/n.c: its operations n_ops, made of
 * its static n_configure and n_push and the optional ones given (.initialize = ..., .stats = ...),
 * and the check that its state (ELEMENT_STATE(n)) fits struct elem. */
#define ELEMENT_OPS(n, ...)                                                                     \
	_Static_assert(sizeof(struct n##_state) <= CLICK_STATE_SIZE &&                          \
		       _Alignof(struct n##_state) <= _Alignof(uint64_t),                        \
		       "struct " #n "_state does not fit struct elem's state (CLICK_STATE_SIZE)"); \
	const struct element_ops n##_ops = { .configure = n##_configure, .push = n##_push, __VA_ARGS__ }

#endif
