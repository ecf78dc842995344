/* Counter: counts packets and bytes (wire packets of a GSO superframe each count), passes them on. */
#include "elements.h"

ELEMENT_STATE(counter) { uint64_t count, bytes; };

static bool counter_configure(struct cparse *p, struct elem *e, int idx, size_t cls_off, int nargs)
{
	if (!click_arg_none(p, "Counter", nargs))
		return false;
	e->nout = 1;
	return true;
}

static int counter_push(struct graph *g, struct elem *e, struct pkt *p)
{
	struct counter_state *c = elem_state(e, counter);
	c->count += p->segs;
	c->bytes += p->wbytes;
	return 0;
}

static void counter_stats(struct jw *w, const struct elem *e)
{
	const struct counter_state *c = elem_cstate(e, counter);
	jw_ku64(w, "count", c->count);
	jw_ku64(w, "bytes", c->bytes);
}

ELEMENT_OPS(counter, .stats = counter_stats);
