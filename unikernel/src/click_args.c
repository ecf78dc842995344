/* fluidvim VNF — checks of element arguments shared by the elements' configure functions
 * (elements/): one word, a number in range, a NIC index, room in the graph's rules. Messages name
 * the element and the argument; offsets point at the offending word.
 */
#include "click_internal.h"

/* The argument must be exactly one word. */
bool click_arg_word(struct cparse *p, const struct arg *a, const char *what, size_t *ws, size_t *wl)
{
	size_t q = a->start, ws2, wl2;
	if (!cfg_word(p->s, a->end, &q, ws, wl)) {
		cperr_set(&p->err, a->start, "%s is empty", what);
		return false;
	}
	if (cfg_word(p->s, a->end, &q, &ws2, &wl2)) {
		cperr_set(&p->err, ws2, "%s: unexpected '%t' after '%t'", what, (int)wl2, p->s + ws2,
			  (int)*wl, p->s + *ws);
		return false;
	}
	return true;
}

bool click_arg_nic(struct cparse *p, const char *cn, size_t cls_off, int nargs, int *nic)
{
	size_t ws, wl;
	uint32_t v;
	if (nargs == 0) {
		cperr_set(&p->err, cls_off, "%s needs a NIC index, e.g. %s(0)", cn, cn);
		return false;
	}
	if (nargs > 1) {
		cperr_set(&p->err, p->args[1].start, "%s takes one argument (a NIC index), got %d", cn, nargs);
		return false;
	}
	if (!click_arg_word(p, &p->args[0], cn, &ws, &wl))
		return false;
	if (!cfg_parse_u32(p->s + ws, wl, 1000000, &v)) {
		cperr_set(&p->err, ws, "%s: NIC index must be a number, got '%t'", cn, (int)wl, p->s + ws);
		return false;
	}
	if ((int)v >= p->nics) {
		if (p->nics <= 0)
			cperr_set(&p->err, ws, "%s(%u): NIC %u does not exist (this VNF has no NICs)", cn, v, v);
		else if (p->nics == 1)
			cperr_set(&p->err, ws, "%s(%u): NIC %u does not exist (this VNF has 1 NIC: 0)", cn, v, v);
		else
			cperr_set(&p->err, ws, "%s(%u): NIC %u does not exist (this VNF has %d NICs: 0..%d)",
				  cn, v, v, p->nics, p->nics - 1);
		return false;
	}
	*nic = (int)v;
	return true;
}

bool click_arg_num(struct cparse *p, const struct arg *a, const char *what, uint32_t min,
			  uint32_t max, const char *range_msg, uint32_t *out)
{
	size_t ws, wl;
	uint32_t v;
	if (!click_arg_word(p, a, what, &ws, &wl))
		return false;
	if (!cfg_parse_u32(p->s + ws, wl, 0xffffffffu, &v) || v < min || v > max) {
		cperr_set(&p->err, ws, "%s, got '%t'", range_msg, (int)wl, p->s + ws);
		return false;
	}
	*out = v;
	return true;
}

/* Classifier patterns, IPFilter rules and ARPResponder addresses share the graph's rules[]. */
bool click_rules_room(struct cparse *p, size_t cls_off, int nargs)
{
	if (p->g->nrules + nargs <= CLICK_MAX_RULES)
		return true;
	cperr_set(&p->err, cls_off, "too many patterns and rules in this config (max %d in all)",
		  CLICK_MAX_RULES);
	return false;
}

bool click_arg_none(struct cparse *p, const char *cn, int nargs)
{
	if (nargs) {
		cperr_set(&p->err, p->args[0].start, "%s takes no arguments (write '%s' or '%s()')", cn, cn, cn);
		return false;
	}
	return true;
}
