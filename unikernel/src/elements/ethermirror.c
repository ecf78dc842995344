/* EtherMirror: swaps the Ethernet addresses, and for IPv4 the IP addresses and TCP/UDP ports, so
 * the packet goes back where it came from. */
#include "elements.h"

ELEMENT_STATE(ethermirror) { uint64_t count; };

static bool ethermirror_configure(struct cparse *p, struct elem *e, int idx, size_t cls_off, int nargs)
{
	if (!click_arg_none(p, "EtherMirror", nargs))
		return false;
	e->nout = 1;
	return true;
}

static void ether_mirror(struct pkt *p)
{
	uint8_t *d = click_pkt_writable(p), t[6];
	if (p->len >= 12) {
		memcpy(t, d, 6);
		memcpy(d, d + 6, 6);
		memcpy(d + 6, t, 6);
	}
	const struct pinfo *pi = pkt_info(p);
	if (pi->ip4) {
		uint8_t *ip = d + pi->l3;
		memcpy(t, ip + 12, 4);
		memcpy(ip + 12, ip + 16, 4);
		memcpy(ip + 16, t, 4);
		if (pi->ports) {
			uint8_t *l4 = d + pi->l4;
			memcpy(t, l4, 2);
			memcpy(l4, l4 + 2, 2);
			memcpy(l4 + 2, t, 2);
		}
	}
	p->pi_ok = false;
}

static int ethermirror_push(struct graph *g, struct elem *e, struct pkt *p)
{
	struct ethermirror_state *m = elem_state(e, ethermirror);
	m->count += p->segs;
	ether_mirror(p);
	return 0;
}

static void ethermirror_stats(struct jw *w, const struct elem *e)
{
	const struct ethermirror_state *m = elem_cstate(e, ethermirror);
	jw_ku64(w, "count", m->count);
}

ELEMENT_OPS(ethermirror, .stats = ethermirror_stats);
