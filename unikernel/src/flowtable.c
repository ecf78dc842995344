/* fluidvim VNF — session (5-tuple flow) table for ToDevice accounting (contract/PROTOCOL.md §5).
 *
 * Static storage for CLICK_MAX_SLOTS entries (24 bytes each) chained in FLOW_BUCKETS hash buckets;
 * only `slots` entries are usable (a free list over entries [0, slots)). Keys are direction-
 * independent: the (address, port) pair that compares lower is stored as side A.
 *
 *  - TCP and UDP key on ports; ICMP keys on the identifier (both "ports" = id); non-first fragments
 *    and headers too short to hold ports key with ports 0.
 *  - A TCP RST (either direction) or FINs from both sides free the slot (after the packet is
 *    admitted and forwarded).
 *  - A TCP segment with RST, or a bare ACK without payload, that belongs to no live flow is
 *    forwarded without taking a slot (it can only close or acknowledge; this keeps the last ACK of
 *    a FIN handshake from re-creating the session it just closed).
 *  - Idle flows (no packet for timeout_ms) are freed by flow_sweep (a few entries per call) and,
 *    when the table is full, by a bounded sweep before a new flow is rejected; a packet that finds
 *    its flow expired but not yet swept restarts it in place.
 */
#include "click_internal.h"

#define FLOW_BUCKETS 65536u
#define FLOW_NONE 0xffffffffu
#define F_INUSE 0x80
#define F_FIN_A 0x01
#define F_FIN_B 0x02

struct flow {
	uint32_t a, b;          /* addresses, side A < side B */
	uint16_t pa, pb;        /* ports */
	uint8_t proto, flags;
	uint16_t pad;
	uint32_t next;          /* hash chain or free list */
	uint32_t last_ms;
};
_Static_assert(sizeof(struct flow) <= 32, "flow entry too large");

static struct flow flows[CLICK_MAX_SLOTS];
static uint32_t buckets[FLOW_BUCKETS];
static uint32_t free_head = FLOW_NONE;
static uint32_t nslots, nused, timeout_ms, sweep_cursor;
/* No in-use flow expires before bound_ms (a lower bound, exact right after flow_next_expiry's
 * scan): what the idle loop arms its one wake-up timer for, instead of a periodic tick. */
static uint32_t bound_ms;
static uint64_t nrejected, hash_seed;
/* sessions ever opened (a new flow, or an expired one restarted in place): monotonic from boot,
 * not reset by a change of `slots` - what the orchestrator matches its handed-out slots with */
static uint64_t nopened;

void flow_set_slots(uint32_t slots)
{
	if (slots < 1)
		slots = 1;
	if (slots > CLICK_MAX_SLOTS)
		slots = CLICK_MAX_SLOTS;
	nslots = slots;
	nused = 0;
	bound_ms = 0;
	sweep_cursor = 0;
	memset(buckets, 0xff, sizeof(buckets));
	for (uint32_t i = 0; i < slots; i++) {
		flows[i].flags = 0;
		flows[i].next = (i + 1 < slots) ? i + 1 : FLOW_NONE;
	}
	free_head = 0;
}

void flow_init(uint32_t slots, uint32_t tmo_ms, uint64_t seed)
{
	timeout_ms = tmo_ms;
	hash_seed = seed | 1;
	nrejected = 0;
	nopened = 0;
	flow_set_slots(slots);
}

uint32_t flow_total(void) { return nslots; }
uint32_t flow_used(void) { return nused; }
uint64_t flow_rejected(void) { return nrejected; }
uint64_t flow_opened(void) { return nopened; }

static uint32_t flow_hash(uint32_t a, uint32_t b, uint16_t pa, uint16_t pb, uint8_t proto)
{
	uint64_t h = hash_seed;
	h ^= ((uint64_t)a << 32) | b;
	h *= 0x9e3779b97f4a7c15ull;
	h ^= h >> 29;
	h ^= ((uint64_t)pa << 32) | ((uint64_t)pb << 16) | proto;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 32;
	return (uint32_t)h & (FLOW_BUCKETS - 1);
}

static void flow_free(uint32_t idx)
{
	struct flow *f = &flows[idx];
	uint32_t *pp = &buckets[flow_hash(f->a, f->b, f->pa, f->pb, f->proto)];
	while (*pp != FLOW_NONE && *pp != idx)
		pp = &flows[*pp].next;
	if (*pp == idx)
		*pp = f->next;
	f->flags = 0;
	f->next = free_head;
	free_head = idx;
	nused--;
}

static bool expired(const struct flow *f, uint32_t now_ms)
{
	return (uint32_t)(now_ms - f->last_ms) >= timeout_ms;
}

bool flow_sweep(uint32_t now_ms, unsigned budget)
{
	bool freed = false;
	if (nused == 0)
		return false;
	while (budget--) {
		if (sweep_cursor >= nslots)
			sweep_cursor = 0;
		uint32_t i = sweep_cursor++;
		if ((flows[i].flags & F_INUSE) && expired(&flows[i], now_ms)) {
			flow_free(i);
			freed = true;
		}
	}
	return freed;
}

bool flow_next_expiry(uint32_t now_ms, uint32_t *at_ms)
{
	if (nused == 0)
		return false;
	if ((int32_t)(bound_ms - now_ms) > 0) {
		*at_ms = bound_ms;              /* nothing expires before it: no scan */
		return true;
	}
	/* the bound passed: free what expired and find the new earliest expiry (one pass; this
	 * runs at most once per timer wake-up, not per packet) */
	uint32_t best = now_ms + timeout_ms;
	for (uint32_t i = 0; i < nslots && nused; i++) {
		if (!(flows[i].flags & F_INUSE))
			continue;
		if (expired(&flows[i], now_ms))
			flow_free(i);
		else if ((int32_t)(flows[i].last_ms + timeout_ms - best) < 0)
			best = flows[i].last_ms + timeout_ms;
	}
	bound_ms = best;
	if (nused == 0)
		return false;
	*at_ms = best;
	return true;
}

bool flow_account(const struct pinfo *p, uint32_t now_ms)
{
	if (!p->ip4 || !(p->proto == 6 || p->proto == 17 || p->proto == 1))
		return true;                    /* not a session protocol: no slot */
	uint16_t sp = 0, dp = 0;
	if (p->ports || p->icmp_id_ok) {
		sp = p->sport;
		dp = p->dport;
	}
	uint32_t a, b;
	uint16_t pa, pb;
	bool from_a;
	if (p->src < p->dst || (p->src == p->dst && sp <= dp)) {
		a = p->src; pa = sp; b = p->dst; pb = dp; from_a = true;
	} else {
		a = p->dst; pa = dp; b = p->src; pb = sp; from_a = false;
	}
	uint32_t h = flow_hash(a, b, pa, pb, p->proto);
	uint32_t idx = buckets[h];
	while (idx != FLOW_NONE) {
		struct flow *f = &flows[idx];
		if (f->a == a && f->b == b && f->pa == pa && f->pb == pb && f->proto == p->proto)
			break;
		idx = f->next;
	}
	bool tcp = (p->proto == 6 && p->tcp_ok);
	uint8_t fl = tcp ? p->tcp_flags : 0;
	bool rst = fl & 0x04, fin = fl & 0x01, syn = fl & 0x02;
	if (idx == FLOW_NONE) {
		if (tcp && (rst || (!syn && !fin && p->tcp_payload == 0)))
			return true;            /* closes / acknowledges nothing we track: no slot */
		if (free_head == FLOW_NONE) {
			flow_sweep(now_ms, 64);
			if (free_head == FLOW_NONE) {
				nrejected++;
				return false;
			}
		}
		idx = free_head;
		struct flow *f = &flows[idx];
		free_head = f->next;
		f->a = a; f->b = b; f->pa = pa; f->pb = pb; f->proto = p->proto;
		f->flags = F_INUSE;
		f->next = buckets[h];
		buckets[h] = idx;
		if (nused++ == 0)
			bound_ms = now_ms + timeout_ms;  /* the only flow: its expiry is the bound */
		nopened++;
	} else if (expired(&flows[idx], now_ms)) {
		flows[idx].flags = F_INUSE;     /* idle too long: a new session in the same slot */
		nopened++;
	}
	struct flow *f = &flows[idx];
	f->last_ms = now_ms;
	if (fin)
		f->flags |= from_a ? F_FIN_A : F_FIN_B;
	if (rst || (f->flags & (F_FIN_A | F_FIN_B)) == (F_FIN_A | F_FIN_B))
		flow_free(idx);
	return true;
}
