/* fluidvim VNF — the packet engine runtime: graph swap, push processing, elements, stats.
 * See vnf/PROTOCOL.md §4–5 and include/click.h. Single-threaded: click_rx, click_run_tasks,
 * click_configure and click_stats_json must not run concurrently (the kernel polls).
 *
 * Push processing follows one packet along one path (no element duplicates packets), in a loop
 * bounded by CLICK_MAX_HOPS; configure rejects cycles that do not pass through a Queue, so the
 * bound is only a safety net. A packet ends in exactly one of: transmitted (ToDevice), discarded
 * (Discard), dropped, or held in a Queue. Every dropped or discarded packet counts in the `drop` of
 * the NIC it was received on, so for each NIC: rx = (its packets transmitted anywhere) + drop +
 * (its packets still queued).
 *
 * Latency: plat_now_ns() at click_rx entry, stored with the packet while it waits in Queues, to the
 * moment plat_tx returns (ToDevice) or the packet is discarded (Discard). Dropped packets are not in
 * the histogram. Buckets are log2 of nanoseconds; the last bucket also holds everything above it.
 */
#include "click_internal.h"

static int g_nics;
static struct graph graphs[2];          /* double buffer: parse into the spare, swap on success */
static int active = -1;                 /* index of the running graph, -1 = unconfigured shell */

static uint8_t nic_mac[CLICK_MAX_NICS][6];   /* each NIC's own address (click_set_mac) */

struct nicstat { uint64_t rx, tx, drop, rx_bytes, tx_bytes; };
static struct nicstat nicst[CLICK_MAX_NICS];
static uint64_t lat_hist[CLICK_LAT_BUCKETS], lat_count;

/* Packet pool for packets held in Queues: a free list threaded through ->next. A frame longer than
 * CLICK_BUF_SIZE (a GSO superframe) takes a chain of buffers linked through ->cont, and is gathered
 * into gather_buf when it leaves the Queue. */
struct pbuf {
	int32_t next, cont;
	uint16_t len;
	uint8_t nic;
	bool has_vh;
	uint32_t segs;
	uint64_t t0, wbytes;
	struct click_vh vh;
};
static struct pbuf pmeta[CLICK_POOL_BUFS];
static uint8_t pdata[CLICK_POOL_BUFS][CLICK_BUF_SIZE] __attribute__((aligned(64)));
static int32_t pfree = -1;
static uint32_t pnfree;

/* Writable copy of a received frame for EtherMirror (rx data is const), and where a chained
 * (longer than one pool buffer) frame is gathered when it leaves a Queue. */
static uint8_t mirror_buf[65536] __attribute__((aligned(64)));
static const uint8_t empty_frame[1];

struct pkt {
	const uint8_t *data;
	uint8_t *wdata;         /* == data when writable (pool buffer or mirror_buf) */
	uint16_t len;
	uint8_t nic;            /* ingress NIC */
	int32_t buf;            /* pool buffer or -1 */
	uint64_t t0, now;
	bool pi_ok;
	bool has_vh;            /* vh holds offload metadata (partial checksum, GSO) */
	uint32_t segs;          /* wire packets (click_segs) */
	uint64_t wbytes;        /* their bytes */
	struct click_vh vh;
	struct pinfo pi;
};

enum fate { FATE_TX, FATE_DISCARD, FATE_DROP, FATE_QUEUED };

#define NS_PER_TOKEN 1000000000ull      /* token bucket: one packet = 1e9 units */

static void pool_init(void)
{
	for (int i = 0; i < CLICK_POOL_BUFS; i++) {
		pmeta[i].next = (i + 1 < CLICK_POOL_BUFS) ? i + 1 : -1;
		pmeta[i].cont = -1;
	}
	pfree = 0;
	pnfree = CLICK_POOL_BUFS;
}

/* free buffer b and the rest of its chain */
static void pool_put(int32_t b)
{
	while (b >= 0) {
		int32_t c = pmeta[b].cont;
		pmeta[b].cont = -1;
		pmeta[b].next = pfree;
		pfree = b;
		pnfree++;
		b = c;
	}
}

static int32_t pool_get(void)
{
	int32_t b = pfree;
	pfree = pmeta[b].next;
	pnfree--;
	pmeta[b].cont = -1;
	return b;
}

static void lat_record(uint64_t dt, uint32_t n)
{
	unsigned b = dt ? 63u - (unsigned)__builtin_clzll(dt) : 0;
	if (b >= CLICK_LAT_BUCKETS)
		b = CLICK_LAT_BUCKETS - 1;
	lat_hist[b] += n;
	lat_count += n;
}

uint32_t click_segs(const uint8_t *d, uint16_t len, const struct click_vh *vh, uint64_t *wire_bytes)
{
	uint32_t segs = 1;
	uint64_t wb = len;
	uint8_t t = vh ? (uint8_t)(vh->gso_type & ~CLICK_GSO_ECN) : CLICK_GSO_NONE;
	if (t != CLICK_GSO_NONE && vh->gso_size) {
		/* headers repeated in every segment: up to the end of the TCP header (UDP: the L4 start,
		 * UFO repeats only the IP header). L4 starts at csum_start (GSO implies a partial
		 * checksum), else trust hdr_len. */
		uint32_t l4 = (vh->flags & CLICK_VH_NEEDS_CSUM) ? vh->csum_start : vh->hdr_len;
		uint32_t hl = l4;
		if ((t == CLICK_GSO_TCPV4 || t == CLICK_GSO_TCPV6) && (vh->flags & CLICK_VH_NEEDS_CSUM) &&
		    l4 + 20u <= len)
			hl = l4 + 4u * (d[l4 + 12] >> 4);
		if (hl < len) {
			segs = (len - hl + vh->gso_size - 1u) / vh->gso_size;
			if (segs == 0)
				segs = 1;
			wb = len + (uint64_t)(segs - 1) * hl;
		}
	}
	if (wire_bytes)
		*wire_bytes = wb;
	return segs;
}

static void finish(struct pkt *p, enum fate f)
{
	if (f == FATE_QUEUED)
		return;
	if (f != FATE_TX)
		nicst[p->nic].drop += p->segs;
	if (f != FATE_DROP)
		lat_record(plat_now_ns() - p->t0, p->segs);
	if (p->buf >= 0) {
		pool_put(p->buf);
		p->buf = -1;
	}
}

static const struct pinfo *pinfo(struct pkt *p)
{
	if (!p->pi_ok) {
		pinfo_parse(&p->pi, p->data, p->len);
		p->pi_ok = true;
	}
	return &p->pi;
}

static enum fate enqueue(struct elem *e, struct pkt *p)
{
	if (e->u.q.len >= e->u.q.cap) {
		e->u.q.drops += p->segs;
		return FATE_DROP;
	}
	if (p->buf < 0) {
		uint32_t need = p->len ? (p->len + CLICK_BUF_SIZE - 1u) / CLICK_BUF_SIZE : 1u;
		if (need > pnfree) {
			e->u.q.drops += p->segs;
			return FATE_DROP;
		}
		int32_t prev = -1;
		for (uint32_t off = 0, k = 0; k < need; k++, off += CLICK_BUF_SIZE) {
			int32_t c = pool_get();
			uint32_t n = p->len - off < CLICK_BUF_SIZE ? p->len - off : CLICK_BUF_SIZE;
			memcpy(pdata[c], p->data + off, n);
			if (prev < 0)
				p->buf = c;
			else
				pmeta[prev].cont = c;
			prev = c;
		}
	}
	struct pbuf *b = &pmeta[p->buf];
	b->len = p->len;
	b->nic = p->nic;
	b->t0 = p->t0;
	b->has_vh = p->has_vh;
	b->vh = p->vh;
	b->segs = p->segs;
	b->wbytes = p->wbytes;
	b->next = -1;
	if (e->u.q.tail >= 0)
		pmeta[e->u.q.tail].next = p->buf;
	else
		e->u.q.head = p->buf;
	e->u.q.tail = p->buf;
	p->buf = -1;            /* owned by the queue now */
	if (++e->u.q.len > e->u.q.hw)
		e->u.q.hw = e->u.q.len;
	return FATE_QUEUED;
}

static void ether_mirror(struct pkt *p)
{
	if (!p->wdata) {
		memcpy(mirror_buf, p->data, p->len);
		p->wdata = mirror_buf;
		p->data = mirror_buf;
	}
	uint8_t *d = p->wdata, t[6];
	if (p->len >= 12) {
		memcpy(t, d, 6);
		memcpy(d, d + 6, 6);
		memcpy(d + 6, t, 6);
	}
	const struct pinfo *pi = pinfo(p);
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

/* ARP request for one of e's addresses -> rewrite it into the reply from the ingress NIC's own MAC.
 * Only untagged Ethernet/IPv4 ARP (htype 1, ptype 0x0800, 6/4 address lengths) is answered. */
static bool arp_respond(const struct graph *g, const struct elem *e, struct pkt *p)
{
	const uint8_t *d = p->data;
	if (p->len < 42 || d[12] != 0x08 || d[13] != 0x06)
		return false;
	const uint8_t *a = d + 14;
	if (a[0] != 0 || a[1] != 1 || a[2] != 0x08 || a[3] != 0 || a[4] != 6 || a[5] != 4 || a[6] != 0 ||
	    a[7] != 1)
		return false;
	uint32_t tpa = ((uint32_t)a[24] << 24) | ((uint32_t)a[25] << 16) | ((uint32_t)a[26] << 8) | a[27];
	const struct rule *r = &g->rules[e->u.arp.first];
	int i;
	for (i = 0; i < e->u.arp.n; i++)
		if ((tpa & r[i].m.t[0].mask) == r[i].m.t[0].addr)
			break;
	if (i == e->u.arp.n)
		return false;
	if (!p->wdata) {
		memcpy(mirror_buf, p->data, p->len);
		p->wdata = mirror_buf;
		p->data = mirror_buf;
	}
	uint8_t *w = p->wdata, *wa = w + 14, sha[6], spa[4];
	const uint8_t *own = nic_mac[p->nic];
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

static bool rate_take(struct elem *e, uint64_t now, uint32_t n)
{
	uint64_t cap = e->u.rl.burst * NS_PER_TOKEN;
	if (now > e->u.rl.last_ns) {
		uint64_t dt = now - e->u.rl.last_ns;
		e->u.rl.last_ns = now;
		if (dt >= 10 * NS_PER_TOKEN) {
			e->u.rl.tokens = cap;
		} else {
			e->u.rl.tokens += dt * e->u.rl.rate;    /* dt < 1e10, rate <= 1e9: no overflow */
			if (e->u.rl.tokens > cap)
				e->u.rl.tokens = cap;
		}
	}
	if (e->u.rl.tokens >= n * NS_PER_TOKEN) {        /* a superframe needs one per segment */
		e->u.rl.tokens -= n * NS_PER_TOKEN;
		return true;
	}
	return false;
}

/* Push packet p into element `ei` and follow it until its fate is decided. */
static enum fate push(struct graph *g, int ei, struct pkt *p)
{
	for (int hops = 0; hops < CLICK_MAX_HOPS; hops++) {
		if (ei < 0)
			return FATE_DROP;       /* unconnected output */
		struct elem *e = &g->e[ei];
		int port = 0;
		switch (e->cls) {
		case EC_FROMDEVICE:
			break;
		case EC_TODEVICE: {
			int out = e->u.dev.nic;
			if (!flow_account(pinfo(p), (uint32_t)(p->now / 1000000u)))
				return FATE_DROP;
			if (plat_tx(out, p->data, p->len, p->has_vh ? &p->vh : NULL) != 0)
				return FATE_DROP;
			nicst[out].tx += p->segs;
			nicst[out].tx_bytes += p->wbytes;
			return FATE_TX;
		}
		case EC_COUNTER:
			e->u.counter.count += p->segs;
			e->u.counter.bytes += p->wbytes;
			break;
		case EC_CLASSIFIER: {
			const struct pinfo *pi = pinfo(p);
			const struct rule *r = &g->rules[e->u.cls.first];
			int i, n = e->u.cls.n;
			for (i = 0; i < n; i++)
				if (match_eval(&r[i].m, pi))
					break;
			if (i == n) {
				e->u.cls.nomatch += p->segs;
				return FATE_DROP;
			}
			e->u.cls.hits[i] += p->segs;
			port = i;
			break;
		}
		case EC_IPFILTER: {
			const struct pinfo *pi = pinfo(p);
			const struct rule *r = &g->rules[e->u.ipf.first];
			int i, n = e->u.ipf.n;
			for (i = 0; i < n; i++)
				if (match_eval(&r[i].m, pi))
					break;
			if (i == n) {
				e->u.ipf.nomatch += p->segs;
				return FATE_DROP;
			}
			if (r[i].allow) {
				e->u.ipf.allowed += p->segs;
			} else {
				e->u.ipf.denied += p->segs;
				port = 1;
			}
			break;
		}
		case EC_QUEUE:
			return enqueue(e, p);
		case EC_RATELIMITER:
			if (rate_take(e, p->now, p->segs)) {
				e->u.rl.passed += p->segs;
			} else {
				e->u.rl.limited += p->segs;
				port = 1;
			}
			break;
		case EC_ETHERMIRROR:
			e->u.mirror.count += p->segs;
			ether_mirror(p);
			break;
		case EC_DISCARD:
			e->u.discard.count += p->segs;
			return FATE_DISCARD;
		case EC_ARPRESPONDER:
			if (arp_respond(g, e, p)) {
				e->u.arp.replies++;
				p->has_vh = false;      /* our own frame: complete, no offloads */
			} else {
				e->u.arp.other += p->segs;
				port = 1;
			}
			break;
		default:
			return FATE_DROP;
		}
		ei = (port < e->nout) ? e->out[port] : -1;
	}
	return FATE_DROP;
}

/* ------------------------------------------------------------------ API */

void click_set_mac(int nic, const uint8_t mac[6])
{
	if (nic >= 0 && nic < CLICK_MAX_NICS)
		memcpy(nic_mac[nic], mac, 6);
}

const uint8_t *click_mac(int nic) { return nic_mac[nic >= 0 && nic < CLICK_MAX_NICS ? nic : 0]; }

void click_init(int nics, uint32_t slots, uint32_t flow_timeout_ms)
{
	if (nics < 0)
		nics = 0;
	if (nics > CLICK_MAX_NICS)
		nics = CLICK_MAX_NICS;
	if (slots == 0)
		slots = 1024;
	if (slots > CLICK_MAX_SLOTS)
		slots = CLICK_MAX_SLOTS;
	g_nics = nics;
	active = -1;
	memset(graphs, 0, sizeof(graphs));
	memset(nicst, 0, sizeof(nicst));
	memset(nic_mac, 0, sizeof(nic_mac));
	memset(lat_hist, 0, sizeof(lat_hist));
	lat_count = 0;
	pool_init();
	flow_init(slots, flow_timeout_ms, plat_now_ns() ^ 0x6a09e667f3bcc909ull);
}

/* Release the packets held in a graph's Queues (counted as drops on their ingress NICs). */
static void release_queues(struct graph *g)
{
	for (int i = 0; i < g->nelem; i++) {
		struct elem *e = &g->e[i];
		if (e->cls != EC_QUEUE)
			continue;
		int32_t b = e->u.q.head;
		while (b >= 0) {
			int32_t next = pmeta[b].next;
			nicst[pmeta[b].nic].drop += pmeta[b].segs;
			pool_put(b);
			b = next;
		}
		e->u.q.head = e->u.q.tail = -1;
		e->u.q.len = 0;
	}
}

int click_configure(const char *text, size_t len, uint32_t slots, struct click_err *err)
{
	struct click_err dummy;
	if (!err)
		err = &dummy;
	if (slots > CLICK_MAX_SLOTS) {
		err->line = 0;
		err->col = 0;
		memcpy(err->message, "slots must be 1..65536", sizeof("slots must be 1..65536"));
		return -1;
	}
	int ni = (active == 0) ? 1 : 0;
	struct graph *g = &graphs[ni];
	if (!click_parse(g, text, len, g_nics, err)) {
		memset(g, 0, sizeof(*g));
		return -1;
	}
	uint64_t now = plat_now_ns();
	for (int i = 0; i < g->nelem; i++) {
		struct elem *e = &g->e[i];
		if (e->cls == EC_QUEUE) {
			e->u.q.head = e->u.q.tail = -1;
		} else if (e->cls == EC_RATELIMITER) {
			e->u.rl.tokens = e->u.rl.burst * NS_PER_TOKEN;   /* start with a full bucket */
			e->u.rl.last_ns = now;
		}
	}
	if (active >= 0)
		release_queues(&graphs[active]);
	active = ni;
	if (slots && slots != flow_total())
		flow_set_slots(slots);
	return 0;
}

bool click_configured(void) { return active >= 0; }

uint32_t click_element_count(void) { return active >= 0 ? (uint32_t)graphs[active].nelem : 0; }

void click_rx(int nic, const uint8_t *data, uint16_t len) { click_rx_vh(nic, data, len, NULL); }

void click_rx_vh(int nic, const uint8_t *data, uint16_t len, const struct click_vh *vh)
{
	if (nic < 0 || nic >= g_nics)
		return;
	if (!data) {
		data = empty_frame;
		len = 0;
	}
	uint64_t t0 = plat_now_ns();
	struct pkt p;
	p.has_vh = vh && (vh->flags || vh->gso_type);
	if (p.has_vh) {
		p.vh = *vh;
		p.segs = click_segs(data, len, vh, &p.wbytes);
	} else {
		p.segs = 1;
		p.wbytes = len;
	}
	nicst[nic].rx += p.segs;
	nicst[nic].rx_bytes += p.wbytes;
	if (active < 0 || graphs[active].from[nic] < 0) {
		nicst[nic].drop += p.segs;
		return;
	}
	struct graph *g = &graphs[active];
	p.data = data;
	p.wdata = NULL;
	p.len = len;
	p.nic = (uint8_t)nic;
	p.buf = -1;
	p.t0 = p.now = t0;
	p.pi_ok = false;
	finish(&p, push(g, g->from[nic], &p));
}

#define DRAIN_BUDGET 256        /* packets per Queue per round */
#define SWEEP_BUDGET 32         /* flow entries checked per round */

bool click_run_tasks(void)
{
	bool work = false;
	uint64_t now = plat_now_ns();
	if (active >= 0) {
		struct graph *g = &graphs[active];
		for (int i = 0; i < g->nelem; i++) {
			struct elem *e = &g->e[i];
			if (e->cls != EC_QUEUE || e->u.q.len == 0)
				continue;
			uint32_t n = e->u.q.len < DRAIN_BUDGET ? e->u.q.len : DRAIN_BUDGET;
			work = true;
			while (n--) {
				int32_t b = e->u.q.head;
				e->u.q.head = pmeta[b].next;
				if (e->u.q.head < 0)
					e->u.q.tail = -1;
				e->u.q.len--;
				struct pkt p;
				p.data = p.wdata = pdata[b];
				p.len = pmeta[b].len;
				p.nic = pmeta[b].nic;
				p.buf = b;
				p.t0 = pmeta[b].t0;
				p.now = now;
				p.pi_ok = false;
				p.has_vh = pmeta[b].has_vh;
				p.vh = pmeta[b].vh;
				p.segs = pmeta[b].segs;
				p.wbytes = pmeta[b].wbytes;
				if (pmeta[b].cont >= 0) {       /* chained: gather, free the chain */
					uint32_t off = 0;
					for (int32_t c = b; c >= 0; c = pmeta[c].cont, off += CLICK_BUF_SIZE) {
						uint32_t k = p.len - off < CLICK_BUF_SIZE ? p.len - off : CLICK_BUF_SIZE;
						memcpy(mirror_buf + off, pdata[c], k);
					}
					pool_put(b);
					p.buf = -1;
					p.data = p.wdata = mirror_buf;
				}
				finish(&p, push(g, e->out[0], &p));
			}
		}
	}
	if (flow_sweep((uint32_t)(now / 1000000u), SWEEP_BUDGET))
		work = true;
	return work;
}

uint64_t click_next_timer_ns(uint64_t now)
{
	uint32_t now_ms = (uint32_t)(now / 1000000u), at_ms;
	if (!flow_next_expiry(now_ms, &at_ms))
		return 0;
	return now + (uint64_t)(uint32_t)(at_ms - now_ms) * 1000000u;
}

uint32_t click_slots_total(void) { return flow_total(); }
uint32_t click_slots_used(void) { return flow_used(); }

static uint64_t lat_quantile(unsigned pct)
{
	if (!lat_count)
		return 0;
	uint64_t rank = (lat_count * pct + 99) / 100, cum = 0;
	if (rank == 0)
		rank = 1;
	for (unsigned i = 0; i < CLICK_LAT_BUCKETS; i++) {
		cum += lat_hist[i];
		if (cum >= rank)
			return i ? 1ull << i : 0;
	}
	return 1ull << (CLICK_LAT_BUCKETS - 1);
}

static void stats_element(struct jw *w, const struct elem *e)
{
	jw_obj_begin(w);
	jw_kstr(w, "name", e->name);
	jw_kstr(w, "class", click_class_names[e->cls]);
	switch (e->cls) {
	case EC_COUNTER:
		jw_ku64(w, "count", e->u.counter.count);
		jw_ku64(w, "bytes", e->u.counter.bytes);
		break;
	case EC_CLASSIFIER:
		jw_key(w, "outputs");
		jw_arr_begin(w);
		for (int i = 0; i < e->u.cls.n; i++)
			jw_u64(w, e->u.cls.hits[i]);
		jw_arr_end(w);
		jw_ku64(w, "unmatched", e->u.cls.nomatch);
		break;
	case EC_IPFILTER:
		jw_ku64(w, "allowed", e->u.ipf.allowed);
		jw_ku64(w, "denied", e->u.ipf.denied);
		jw_ku64(w, "unmatched", e->u.ipf.nomatch);
		break;
	case EC_QUEUE:
		jw_ku64(w, "length", e->u.q.len);
		jw_ku64(w, "capacity", e->u.q.cap);
		jw_ku64(w, "drops", e->u.q.drops);
		jw_ku64(w, "highwater", e->u.q.hw);
		break;
	case EC_RATELIMITER:
		jw_ku64(w, "passed", e->u.rl.passed);
		jw_ku64(w, "limited", e->u.rl.limited);
		break;
	case EC_ETHERMIRROR:
		jw_ku64(w, "count", e->u.mirror.count);
		break;
	case EC_DISCARD:
		jw_ku64(w, "count", e->u.discard.count);
		break;
	case EC_ARPRESPONDER:
		jw_ku64(w, "replies", e->u.arp.replies);
		jw_ku64(w, "other", e->u.arp.other);
		break;
	}
	jw_obj_end(w);
}

void click_stats_json(struct jw *w)
{
	uint32_t total = flow_total(), used = flow_used();
	jw_key(w, "slots");
	jw_obj_begin(w);
	jw_ku64(w, "total", total);
	jw_ku64(w, "used", used);
	jw_ku64(w, "free", total - used);
	jw_ku64(w, "rejected", flow_rejected());
	jw_obj_end(w);

	jw_key(w, "nics");
	jw_arr_begin(w);
	for (int i = 0; i < g_nics; i++) {
		char m[18];
		static const char hx[] = "0123456789abcdef";
		for (int k = 0; k < 6; k++) {
			m[3 * k] = hx[nic_mac[i][k] >> 4];
			m[3 * k + 1] = hx[nic_mac[i][k] & 15];
			m[3 * k + 2] = k < 5 ? ':' : 0;
		}
		jw_obj_begin(w);
		jw_kstr(w, "mac", m);
		jw_ku64(w, "rx", nicst[i].rx);
		jw_ku64(w, "tx", nicst[i].tx);
		jw_ku64(w, "drop", nicst[i].drop);
		jw_ku64(w, "rx_bytes", nicst[i].rx_bytes);
		jw_ku64(w, "tx_bytes", nicst[i].tx_bytes);
		jw_obj_end(w);
	}
	jw_arr_end(w);

	/* elements with counters (FromDevice/ToDevice are covered by the NIC counters) */
	jw_key(w, "elements");
	jw_arr_begin(w);
	if (active >= 0) {
		const struct graph *g = &graphs[active];
		for (int i = 0; i < g->nelem; i++)
			if (g->e[i].cls != EC_FROMDEVICE && g->e[i].cls != EC_TODEVICE)
				stats_element(w, &g->e[i]);
	}
	jw_arr_end(w);

	jw_key(w, "latency_ns");
	jw_obj_begin(w);
	jw_key(w, "buckets_log2");
	jw_arr_begin(w);
	int last = CLICK_LAT_BUCKETS - 1;
	while (last >= 0 && lat_hist[last] == 0)
		last--;
	for (int i = 0; i <= last; i++)
		jw_u64(w, lat_hist[i]);
	jw_arr_end(w);
	jw_ku64(w, "count", lat_count);
	jw_ku64(w, "p50", lat_quantile(50));
	jw_ku64(w, "p99", lat_quantile(99));
	jw_obj_end(w);
}
