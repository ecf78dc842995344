/* IPFilter(allow|deny expr, ...): the first rule a packet matches decides: allow to output 0,
 * deny to output 1; a packet that matches no rule is dropped. */
#include "elements.h"

ELEMENT_STATE(ipfilter) { uint16_t first, n; uint64_t allowed, denied, nomatch; };

static bool ipfilter_configure(struct cparse *p, struct elem *e, int idx, size_t cls_off, int nargs)
{
	struct ipfilter_state *f = elem_state(e, ipfilter);
	struct graph *g = p->g;
	const char *cn = "IPFilter";
	int maxr = CLICK_MAX_IPF_RULES;
	if (nargs == 0) {
		cperr_set(&p->err, cls_off, "IPFilter needs rules, e.g. IPFilter(allow tcp dst port 80, deny all)");
		return false;
	}
#if CLICK_MAX_IPF_RULES < CLICK_MAX_ARGS    /* else capture_args has refused more arguments */
	if (nargs > maxr) {
		cperr_set(&p->err, p->args[maxr].start, "%s has %d %s; at most %d are supported", cn, nargs,
			  "rules", maxr);
		return false;
	}
#else
	(void)cn;
	(void)maxr;
#endif
	if (!click_rules_room(p, cls_off, nargs))
		return false;
	for (int i = 0; i < nargs; i++) {
		struct rule *r = &g->rules[g->nrules + i];
		char ctx[40];
		size_t pos = p->args[i].start, end = p->args[i].end;
		size_t ws, wl;
		memset(r, 0, sizeof(*r));
		r->allow = true;
		cfg_fmt(ctx, sizeof(ctx), "IPFilter rule %d", i + 1);
		cfg_word(p->s, end, &pos, &ws, &wl);    /* non-empty: checked by capture_args */
		if (cfg_word_is(p->s, ws, wl, "allow")) {
			r->allow = true;
		} else if (cfg_word_is(p->s, ws, wl, "deny")) {
			r->allow = false;
		} else {
			cperr_set(&p->err, ws, "%s: expected 'allow' or 'deny', got '%t'", ctx,
				  (int)wl, p->s + ws);
			return false;
		}
		size_t q = pos, ws2, wl2;
		if (!cfg_word(p->s, end, &q, &ws2, &wl2)) {
			cperr_set(&p->err, ws, "%s: '%t' needs a match expression (e.g. '%t all')",
				  ctx, (int)wl, p->s + ws, (int)wl, p->s + ws);
			return false;
		}
		if (!match_compile(p->s, pos, end, &r->m, ctx, &p->err))
			return false;
	}
	f->first = (uint16_t)g->nrules;
	f->n = (uint16_t)nargs;
	e->nout = 2;
	g->nrules += nargs;
	return true;
}

static int ipfilter_push(struct graph *g, struct elem *e, struct pkt *p)
{
	struct ipfilter_state *f = elem_state(e, ipfilter);
	const struct rule *r = &g->rules[f->first];
	int n = f->n, i = rules_first_match(r, n, pkt_info(p));
	if (i == n) {
		f->nomatch += p->segs;
		return PUSH_FATE(FATE_DROP);
	}
	if (r[i].allow) {
		f->allowed += p->segs;
		return 0;
	}
	f->denied += p->segs;
	return 1;
}

static void ipfilter_stats(struct jw *w, const struct elem *e)
{
	const struct ipfilter_state *f = elem_cstate(e, ipfilter);
	jw_ku64(w, "allowed", f->allowed);
	jw_ku64(w, "denied", f->denied);
	jw_ku64(w, "unmatched", f->nomatch);
}

ELEMENT_OPS(ipfilter, .stats = ipfilter_stats);
