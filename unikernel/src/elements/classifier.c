/* Classifier(pattern, ...): sends a packet to the output of the first pattern it matches
 * (a match expression, match.c); a packet that matches none is dropped. */
#include "elements.h"

ELEMENT_STATE(classifier) { uint16_t first, n; uint64_t hits[CLICK_MAX_OUT]; uint64_t nomatch; };

static bool classifier_configure(struct cparse *p, struct elem *e, int idx, size_t cls_off, int nargs)
{
	struct classifier_state *cl = elem_state(e, classifier);
	struct graph *g = p->g;
	const char *cn = "Classifier";
	int maxr = CLICK_MAX_OUT;
	if (nargs == 0) {
		cperr_set(&p->err, cls_off, "Classifier needs patterns, e.g. Classifier(ip, arp, -)");
		return false;
	}
	if (nargs > maxr) {
		cperr_set(&p->err, p->args[maxr].start, "%s has %d %s; at most %d are supported", cn, nargs,
			  "patterns", maxr);
		return false;
	}
	if (!click_rules_room(p, cls_off, nargs))
		return false;
	for (int i = 0; i < nargs; i++) {
		struct rule *r = &g->rules[g->nrules + i];
		char ctx[40];
		memset(r, 0, sizeof(*r));
		r->allow = true;
		cfg_fmt(ctx, sizeof(ctx), "Classifier pattern %d", i + 1);
		if (!match_compile(p->s, p->args[i].start, p->args[i].end, &r->m, ctx, &p->err))
			return false;
	}
	cl->first = (uint16_t)g->nrules;
	cl->n = (uint16_t)nargs;
	e->nout = (uint8_t)nargs;
	g->nrules += nargs;
	return true;
}

static int classifier_push(struct graph *g, struct elem *e, struct pkt *p)
{
	struct classifier_state *cl = elem_state(e, classifier);
	const struct rule *r = &g->rules[cl->first];
	int n = cl->n, i = rules_first_match(r, n, pkt_info(p));
	if (i == n) {
		cl->nomatch += p->segs;
		return PUSH_FATE(FATE_DROP);
	}
	cl->hits[i] += p->segs;
	return i;
}

static void classifier_stats(struct jw *w, const struct elem *e)
{
	const struct classifier_state *cl = elem_cstate(e, classifier);
	jw_key(w, "outputs");
	jw_arr_begin(w);
	for (int i = 0; i < cl->n; i++)
		jw_u64(w, cl->hits[i]);
	jw_arr_end(w);
	jw_ku64(w, "unmatched", cl->nomatch);
}

ELEMENT_OPS(classifier, .stats = classifier_stats);
