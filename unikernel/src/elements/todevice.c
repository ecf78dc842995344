/* ToDevice(N): transmit on NIC N (session accounting first: a new flow beyond the slots is
 * dropped). No outputs; its counters are the NIC's. */
#include "elements.h"

ELEMENT_STATE(todevice) { int nic; };

static bool todevice_configure(struct cparse *p, struct elem *e, int idx, size_t cls_off, int nargs)
{
	struct todevice_state *dev = elem_state(e, todevice);
	int nic;
	if (!click_arg_nic(p, "ToDevice", cls_off, nargs, &nic))
		return false;
	dev->nic = nic;
	return true;
}

static int todevice_push(struct graph *g, struct elem *e, struct pkt *p)
{
	struct todevice_state *dev = elem_state(e, todevice);
	return PUSH_FATE(click_pkt_tx(dev->nic, p));
}

ELEMENT_OPS(todevice);
