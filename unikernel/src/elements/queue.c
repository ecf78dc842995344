/* Queue[(capacity)]: holds packets in the packet pool (click.c) until the run loop's task drains
 * them to output 0 (click_run_tasks); a full Queue drops. A cycle must pass through a Queue. */
#include "elements.h"

static bool queue_configure(struct cparse *p, struct elem *e, int idx, size_t cls_off, int nargs)
{
	struct queue_state *q = elem_state(e, queue);
	uint32_t cap = CLICK_QUEUE_DEFAULT;
	if (nargs > 1) {
		cperr_set(&p->err, p->args[1].start, "Queue takes one argument (its capacity), got %d", nargs);
		return false;
	}
	if (nargs == 1 && !click_arg_num(p, &p->args[0], "Queue capacity", 1, CLICK_QUEUE_MAX,
					 "Queue capacity must be 1..4096", &cap))
		return false;
	q->cap = cap;
	e->nout = 1;
	return true;
}

static void queue_initialize(struct elem *e, uint64_t now_ns)
{
	struct queue_state *q = elem_state(e, queue);
	q->head = q->tail = -1;
}

static int queue_push(struct graph *g, struct elem *e, struct pkt *p)
{
	struct queue_state *q = elem_state(e, queue);
	if (q->len >= q->cap || !click_pkt_hold(p, &q->head, &q->tail)) {
		q->drops += p->segs;
		return PUSH_FATE(FATE_DROP);
	}
	if (++q->len > q->hw)
		q->hw = q->len;
	return PUSH_FATE(FATE_QUEUED);
}

static void queue_stats(struct jw *w, const struct elem *e)
{
	const struct queue_state *q = elem_cstate(e, queue);
	jw_ku64(w, "length", q->len);
	jw_ku64(w, "capacity", q->cap);
	jw_ku64(w, "drops", q->drops);
	jw_ku64(w, "highwater", q->hw);
}

ELEMENT_OPS(queue, .initialize = queue_initialize, .stats = queue_stats);
