/* Queue[(capacity)]: holds packets in the packet pool (click.c) until the run loop's task drains
 * them to output 0 (click_run_tasks); a full Queue drops. A cycle must pass through a Queue. */
#include "elements.h"

bool queue_configure(struct cparse *p, struct elem *e, int idx, size_t cls_off, int nargs)
{
	uint32_t cap = CLICK_QUEUE_DEFAULT;
	if (nargs > 1) {
		cperr_set(&p->err, p->args[1].start, "Queue takes one argument (its capacity), got %d", nargs);
		return false;
	}
	if (nargs == 1 && !click_arg_num(p, &p->args[0], "Queue capacity", 1, CLICK_QUEUE_MAX,
					 "Queue capacity must be 1..4096", &cap))
		return false;
	e->u.q.cap = cap;
	e->nout = 1;
	return true;
}

void queue_initialize(struct elem *e, uint64_t now_ns)
{
	e->u.q.head = e->u.q.tail = -1;
}

int queue_push(struct graph *g, struct elem *e, struct pkt *p)
{
	if (e->u.q.len >= e->u.q.cap || !click_pkt_hold(p, &e->u.q.head, &e->u.q.tail)) {
		e->u.q.drops += p->segs;
		return PUSH_FATE(FATE_DROP);
	}
	if (++e->u.q.len > e->u.q.hw)
		e->u.q.hw = e->u.q.len;
	return PUSH_FATE(FATE_QUEUED);
}

void queue_stats(struct jw *w, const struct elem *e)
{
	jw_ku64(w, "length", e->u.q.len);
	jw_ku64(w, "capacity", e->u.q.cap);
	jw_ku64(w, "drops", e->u.q.drops);
	jw_ku64(w, "highwater", e->u.q.hw);
}
