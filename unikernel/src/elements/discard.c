/* Discard: ends a packet's trip (counted; the packet counts as a drop of its ingress NIC). */
#include "elements.h"

ELEMENT_STATE(discard) { uint64_t count; };

static bool discard_configure(struct cparse *p, struct elem *e, int idx, size_t cls_off, int nargs)
{
	return click_arg_none(p, "Discard", nargs);    /* no outputs */
}

static int discard_push(struct graph *g, struct elem *e, struct pkt *p)
{
	struct discard_state *d = elem_state(e, discard);
	d->count += p->segs;
	return PUSH_FATE(FATE_DISCARD);
}

static void discard_stats(struct jw *w, const struct elem *e)
{
	const struct discard_state *d = elem_cstate(e, discard);
	jw_ku64(w, "count", d->count);
}

ELEMENT_OPS(discard, .stats = discard_stats);
