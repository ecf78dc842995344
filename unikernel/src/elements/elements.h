/* fluidvim VNF — the element classes' functions, one file each (elements/<name>.c), gathered into
 * the table click_elements (elements.c). See struct element_class in click_internal.h. */
#ifndef FLUIDVIM_ELEMENTS_H
#define FLUIDVIM_ELEMENTS_H
#include "click_internal.h"

/* configure and push of element class n */
#define ELEMENT_FUNCS(n)                                                                        \
	bool n##_configure(struct cparse *p, struct elem *e, int idx, size_t cls_off, int nargs); \
	int n##_push(struct graph *g, struct elem *e, struct pkt *p)
/* ... and its stats */
#define ELEMENT_FUNCS_STATS(n) ELEMENT_FUNCS(n); void n##_stats(struct jw *w, const struct elem *e)

ELEMENT_FUNCS(fromdevice);
ELEMENT_FUNCS(todevice);
ELEMENT_FUNCS_STATS(counter);
ELEMENT_FUNCS_STATS(classifier);
ELEMENT_FUNCS_STATS(ipfilter);
ELEMENT_FUNCS_STATS(queue);
ELEMENT_FUNCS_STATS(ratelimiter);
ELEMENT_FUNCS_STATS(ethermirror);
ELEMENT_FUNCS_STATS(discard);
ELEMENT_FUNCS_STATS(arpresponder);
void queue_initialize(struct elem *e, uint64_t now_ns);
void ratelimiter_initialize(struct elem *e, uint64_t now_ns);

#endif
