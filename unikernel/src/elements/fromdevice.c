/* FromDevice(N): where NIC N's received frames enter the graph (one per NIC; no inputs). */
#include "elements.h"

ELEMENT_STATE(fromdevice) { int nic; };

static bool fromdevice_configure(struct cparse *p, struct elem *e, int idx, size_t cls_off, int nargs)
{
	struct fromdevice_state *dev = elem_state(e, fromdevice);
	struct graph *g = p->g;
	int nic;
	if (!click_arg_nic(p, "FromDevice", cls_off, nargs, &nic))
		return false;
	if (g->from[nic] >= 0) {
		int l, c;
		cfg_linecol(p->s, p->n, g->e[g->from[nic]].decl_off, &l, &c);
		cperr_set(&p->err, cls_off, "FromDevice(%d) declared twice (each NIC may have one "
			  "FromDevice; the first is at line %d col %d)", nic, l, c);
		return false;
	}
	g->from[nic] = (int8_t)idx;
	e->nout = 1;
	dev->nic = nic;
	return true;
}

static int fromdevice_push(struct graph *g, struct elem *e, struct pkt *p)
{
	return 0;
}

ELEMENT_OPS(fromdevice, .no_inputs = true);
