/* fluidvim VNF — the optional `macs` field of `configure` (contract/PROTOCOL.md §4): one entry per NIC,
 * a MAC address string or null (keep). Freestanding; used by control.c and the host tests. */
#ifndef FLUIDVIM_NICMAC_H
#define FLUIDVIM_NICMAC_H
#include "kstd.h"
#include "json.h"

#define NICMAC_MAX 4            /* = CLICK_MAX_NICS */

struct macs_req {
	int n;                      /* entries (= NICs) when given, 0 when the field is absent/null */
	bool set[NICMAC_MAX];       /* false: null entry, keep the NIC's current MAC */
	uint8_t mac[NICMAC_MAX][6];
};

enum { MACS_OK = 0, MACS_BAD_REQUEST = -1, MACS_CONFIG = -2 };

/* Parse "xx:xx:xx:xx:xx:xx" (hex, either case). */
bool mac_parse(const char *s, size_t n, uint8_t out[6]);
/* Check field `f` ("macs"; NULL or JSON null = no change) for a VNF with `nics` NICs.
 * MACS_BAD_REQUEST: not an array; MACS_CONFIG: wrong count, an entry that is not a string or null,
 * malformed, multicast or all-zero. On error `field` gets "macs" or "macs[i]" and `msg` a message
 * starting with it. `scratch` holds the unescaped strings while parsing. */
int macs_from_json(const struct jfield *f, int nics, struct macs_req *out, char *field, size_t fcap,
		   char *msg, size_t mcap, char *scratch, size_t scap);

#endif
