/* ARPResponder(addr, ...): answers ARP requests for its IPv4 addresses (A.B.C.D or A.B.C.D/L)
 * with the ingress NIC's own MAC (the reply leaves by output 0); every other packet goes to
 * output 1. */
#include "elements.h"

/* first, n: its addresses, host terms in g->rules */
ELEMENT_STATE(arpresponder) { uint16_t first, n; uint64_t replies, other; };

static bool arpresponder_configure(struct cparse *p, struct elem *e, int idx, size_t cls_off, int nargs)
{
	struct arpresponder_state *ar = elem_state(e, arpresponder);
	struct graph *g = p->g;
	if (nargs == 0) {
		cperr_set(&p->err, cls_off, "ARPResponder needs the IPv4 addresses it answers for, "
			  "e.g. ARPResponder(10.0.0.1) or ARPResponder(10.0.0.1, 10.1.0.0/24)");
		return false;
	}
	if (nargs > CLICK_MAX_ARP_ADDRS) {
		cperr_set(&p->err, p->args[CLICK_MAX_ARP_ADDRS].start, "ARPResponder has %d addresses; "
			  "at most %d are supported", nargs, CLICK_MAX_ARP_ADDRS);
		return false;
	}
	if (!click_rules_room(p, cls_off, nargs))
		return false;
	for (int i = 0; i < nargs; i++) {
		struct rule *r = &g->rules[g->nrules + i];
		size_t ws, wl;
		memset(r, 0, sizeof(*r));
		if (!click_arg_word(p, &p->args[i], "ARPResponder address", &ws, &wl))
			return false;
		if (!match_parse_net(p->s + ws, wl, &r->m.t[0].addr, &r->m.t[0].mask)) {
			cperr_set(&p->err, ws, "ARPResponder: bad address '%t' (expected A.B.C.D or "
				  "A.B.C.D/L, L = 0..32)", (int)wl, p->s + ws);
			return false;
		}
		r->m.nterms = 1;
		r->m.t[0].kind = MT_HOST;
		r->m.t[0].dir = MD_DST;
		r->allow = true;
	}
	ar->first = (uint16_t)g->nrules;
	ar->n = (uint16_t)nargs;
	g->nrules += nargs;
	e->nout = 2;
	return true;
}

/* ARP request for one of e's addresses -> rewrite it into the reply from the ingress NIC's own MAC.
 * Only untagged Ethernet/IPv4 ARP (htype 1, ptype 0x0800, 6/4 address lengths) is answered. */
static bool arp_respond(const struct graph *g, const struct elem *e, struct pkt *p)
{
	const struct arpresponder_state *ar = elem_cstate(e, arpresponder);
	const uint8_t *d = p->data;
	if (p->len < 42 || d[12] != 0x08 || d[13] != 0x06)
		return false;
	const uint8_t *a = d + 14;
	if (a[0] != 0 || a[1] != 1 || a[2] != 0x08 || a[3] != 0 || a[4] != 6 || a[5] != 4 || a[6] != 0 ||
	    a[7] != 1)
		return false;
	uint32_t tpa = ((uint32_t)a[24] << 24) | ((uint32_t)a[25] << 16) | ((uint32_t)a[26] << 8) | a[27];
	const struct rule *r = &g->rules[ar->first];
	int i;
	for (i = 0; i < ar->n; i++)
		if ((tpa & r[i].m.t[0].mask) == r[i].m.t[0].addr)
			break;
	if (i == ar->n)
		return false;
	uint8_t *w = click_pkt_writable(p), *wa = w + 14, sha[6], spa[4];
	const uint8_t *own = click_mac(p->nic);
	memcpy(sha, wa + 8, 6);
	memcpy(spa, wa + 14, 4);
	memcpy(w, sha, 6);              /* to the asker */
	memcpy(w + 6, own, 6);
	wa[7] = 2;                      /* reply */
	memcpy(wa + 8, own, 6);         /* sender = us, for the address asked about */
	memcpy(wa + 14, wa + 24, 4);
	memcpy(wa + 18, sha, 6);
	memcpy(wa + 24, spa, 4);
	p->pi_ok = false;
	return true;
}

static int arpresponder_push(struct graph *g, struct elem *e, struct pkt *p)
{
	struct arpresponder_state *ar = elem_state(e, arpresponder);
	if (arp_respond(g, e, p)) {
		ar->replies++;
		p->has_vh = false;      /* our own frame: complete, no offloads */
		return 0;
	}
	ar->other += p->segs;
	return 1;
}

static void arpresponder_stats(struct jw *w, const struct elem *e)
{
	const struct arpresponder_state *ar = elem_cstate(e, arpresponder);
	jw_ku64(w, "replies", ar->replies);
	jw_ku64(w, "other", ar->other);
}

ELEMENT_OPS(arpresponder, .stats = arpresponder_stats);
