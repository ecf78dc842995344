/* ToDevice(N): transmit on NIC N (session accounting first: a new flow beyond the slots is
 * dropped). No outputs; its counters are the NIC's. */
#include "elements.h"

bool todevice_configure(struct cparse *p, struct elem *e, int idx, size_t cls_off, int nargs)
{
	int nic;
	if (!click_arg_nic(p, "ToDevice", cls_off, nargs, &nic))
		return false;
	e->u.dev.nic = nic;
	return true;
}

int todevice_push(struct graph *g, struct elem *e, struct pkt *p)
{
	return PUSH_FATE(click_pkt_tx(e->u.dev.nic, p));
}
