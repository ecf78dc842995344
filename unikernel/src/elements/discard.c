/* Discard: ends a packet's trip (counted; the packet counts as a drop of its ingress NIC). */
#include "elements.h"

bool discard_configure(struct cparse *p, struct elem *e, int idx, size_t cls_off, int nargs)
{
	return click_arg_none(p, "Discard", nargs);    /* no outputs */
}

int discard_push(struct graph *g, struct elem *e, struct pkt *p)
{
	e->u.discard.count += p->segs;
	return PUSH_FATE(FATE_DISCARD);
}

void discard_stats(struct jw *w, const struct elem *e)
{
	jw_ku64(w, "count", e->u.discard.count);
}
