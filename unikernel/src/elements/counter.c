/* Counter: counts packets and bytes (wire packets of a GSO superframe each count), passes them on. */
#include "elements.h"

bool counter_configure(struct cparse *p, struct elem *e, int idx, size_t cls_off, int nargs)
{
	if (!click_arg_none(p, "Counter", nargs))
		return false;
	e->nout = 1;
	return true;
}

int counter_push(struct graph *g, struct elem *e, struct pkt *p)
{
	e->u.counter.count += p->segs;
	e->u.counter.bytes += p->wbytes;
	return 0;
}

void counter_stats(struct jw *w, const struct elem *e)
{
	jw_ku64(w, "count", e->u.counter.count);
	jw_ku64(w, "bytes", e->u.counter.bytes);
}
