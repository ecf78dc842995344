/* fluidvim VNF — the packet engine runtime: graph swap, push processing, Queue draining, latency,
 * stats. The elements' own behaviour (configure, initialize, push, stats) is in elements/<name>.c,
 * one file each, reached through the table click_elements (elements/elements.c); the packet pool,
 * writable copies and the NIC counters are packet.c's.
 * See contract/PROTOCOL.md §4–5 and include/click.h. Single-threaded: click_rx, click_run_tasks,
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
 *
 * Sources: an element class with a task (element_ops.run_task, e.g. FastUDPFlows) is run every
 * scheduler round (click_run_tasks) and sends the packets it makes with click_emit; they travel
 * like received ones from the source's output, with CLICK_SRC_NIC as their ingress NIC (so they are
 * in no NIC's rx/drop and not in the latency histogram). Its wake-up time joins the idle-flow
 * expiry in click_next_timer_ns, so a tickless kernel sleeps until the next packet is due.
 */
#include "click_internal.h"
#include "qoe.h"

static int g_nics;
static struct graph graphs[2];          /* double buffer: parse into the spare, swap on success */
static int active = -1;                 /* index of the running graph, -1 = unconfigured shell */

static uint64_t lat_hist[CLICK_LAT_BUCKETS], lat_count;
static uint64_t task_wake_ns;   /* the earliest wake-up the elements' tasks asked for, 0 = none */

static const uint8_t empty_frame[1];

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
		click_nicst[p->nic].drop += p->segs;
	if (f != FATE_DROP && p->nic != CLICK_SRC_NIC)
		lat_record(plat_now_ns() - p->t0, p->segs);
	if (p->buf >= 0)
		click_pkt_free(p);
}

/* Push packet p into element `ei` and follow it until its fate is decided: each element's push
 * (click_elements) says by which output it leaves, or how its trip ends. hops: the elements
 * already passed. */
static enum fate push(struct graph *g, int ei, struct pkt *p, int hops)
{
	for (; hops < CLICK_MAX_HOPS; hops++) {
		if (ei < 0)
			return FATE_DROP;       /* unconnected output */
		struct elem *e = &g->e[ei];
		int port = click_elements[e->cls].ops->push(g, e, p);
		if (port < 0)
			return (enum fate)(-1 - port);
		ei = (port < e->nout) ? e->out[port] : -1;
	}
	return FATE_DROP;
}

enum fate click_emit(struct graph *g, struct elem *e, uint8_t *data, uint16_t len, uint64_t now)
{
	struct pkt p;
	p.data = p.wdata = data;
	p.len = len;
	p.nic = CLICK_SRC_NIC;
	p.buf = -1;
	p.t0 = p.now = now;
	p.pi_ok = false;
	p.has_vh = false;
	p.segs = 1;
	p.wbytes = len;
	enum fate f = push(g, e->out[0], &p, 1);
	finish(&p, f);
	return f;
}

/* ------------------------------------------------------------------ API */

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
	memset(lat_hist, 0, sizeof(lat_hist));
	lat_count = 0;
	task_wake_ns = 0;
	click_pkt_init();
	flow_init(slots, flow_timeout_ms, plat_now_ns() ^ 0x6a09e667f3bcc909ull);
}

/* Release the packets held in a graph's Queues (counted as drops on their ingress NICs). */
static void release_queues(struct graph *g)
{
	for (int i = 0; i < g->nelem; i++) {
		struct elem *e = &g->e[i];
		if (e->cls != EC_QUEUE)
			continue;
		struct queue_state *q = elem_state(e, queue);
		click_pkt_drop_held(&q->head, &q->tail);
		q->len = 0;
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
		const struct element_ops *ops = click_elements[e->cls].ops;
		if (ops->initialize)
			ops->initialize(e, now);
	}
	if (active >= 0)
		release_queues(&graphs[active]);
	active = ni;
	task_wake_ns = 0;       /* the new graph's tasks say theirs in the next round */
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
	click_nicst[nic].rx += p.segs;
	click_nicst[nic].rx_bytes += p.wbytes;
	if (active < 0 || graphs[active].from[nic] < 0) {
		click_nicst[nic].drop += p.segs;
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
	/* FromDevice's push only passes the packet on (output 0): start after it */
	const struct elem *from = &g->e[g->from[nic]];
	finish(&p, push(g, from->out[0], &p, 1));
}

#define DRAIN_BUDGET 256        /* packets per Queue per round */
#define SWEEP_BUDGET 32         /* flow entries checked per round */

/* The elements' tasks (sources); their earliest wake-up into task_wake_ns. */
static bool run_element_tasks(struct graph *g, uint64_t now)
{
	bool work = false;
	uint64_t wake = 0;
	for (int i = 0; i < g->nelem; i++) {
		struct elem *e = &g->e[i];
		const struct element_ops *ops = click_elements[e->cls].ops;
		uint64_t w = 0;
		if (!ops->run_task)
			continue;
		work |= ops->run_task(g, e, now, &w);
		if (w && (!wake || w < wake))
			wake = w;
	}
	task_wake_ns = wake;
	return work;
}

bool click_run_tasks(void)
{
	bool work = false;
	uint64_t now = plat_now_ns();
	task_wake_ns = 0;
	if (active >= 0) {
		struct graph *g = &graphs[active];
		work = run_element_tasks(g, now);
		for (int i = 0; i < g->nelem; i++) {
			struct elem *e = &g->e[i];
			struct queue_state *q = elem_state(e, queue);
			if (e->cls != EC_QUEUE || q->len == 0)
				continue;
			uint32_t n = q->len < DRAIN_BUDGET ? q->len : DRAIN_BUDGET;
			work = true;
			while (n--) {
				struct pkt p;
				click_pkt_unhold(&q->head, &q->tail, &p, now);
				q->len--;
				finish(&p, push(g, e->out[0], &p, 0));
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
	uint64_t t = task_wake_ns;
	if (flow_next_expiry(now_ms, &at_ms)) {
		uint64_t f = now + (uint64_t)(uint32_t)(at_ms - now_ms) * 1000000u;
		if (!t || f < t)
			t = f;
	}
	return t;
}

bool click_sources_active(void) { return task_wake_ns != 0; }

uint32_t click_slots_total(void) { return flow_total(); }
uint32_t click_slots_used(void) { return flow_used(); }

void click_qoe_set(uint32_t probed, uint64_t budget_ns, uint32_t quantile_ppm, uint32_t wait_ppm)
{
	qoe_set(&click_qoe, probed, budget_ns, quantile_ppm, wait_ppm, lat_hist, plat_steal_ns(),
		plat_now_ns());
}

/* "qoe":{...} of `stats`' slots and of the `qoe` reply (PROTOCOL.md §4 qoe) */
void click_qoe_json(struct jw *w)
{
	const struct qoe *q = &click_qoe;
	jw_key(w, "qoe");
	jw_obj_begin(w);
	jw_ku64(w, "probed", q->probed);
	jw_ku64(w, "capacity", q->capacity);
	jw_ku64(w, "budget_ns", q->budget_ns);
	jw_ku64(w, "quantile_ppm", q->quantile_ppm);
	jw_ku64(w, "tail_ns", q->last_tail_ns);
	if (q->wait_ppm) {
		jw_ku64(w, "wait_budget_ppm", q->wait_ppm);
		jw_ku64(w, "wait_ppm", q->last_wait_ppm);
	}
	jw_kstr(w, "window", qoe_verdict_name(q->last));
	jw_ku64(w, "shrinks", q->shrinks);
	jw_ku64(w, "grows", q->grows);
	jw_ku64(w, "pending", q->pending);
	jw_ku64(w, "pending_stops", q->pending_stops);
	jw_obj_end(w);
}

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
	jw_kstr(w, "class", click_elements[e->cls].name);
	click_elements[e->cls].ops->stats(w, e);
	jw_obj_end(w);
}

void click_stats_json(struct jw *w)
{
	uint32_t total = flow_total(), used = flow_used();
	qoe_tick(&click_qoe, lat_hist, used, plat_steal_ns(), plat_now_ns());
	jw_key(w, "slots");
	jw_obj_begin(w);
	jw_ku64(w, "total", total);
	jw_ku64(w, "used", used);
	jw_ku64(w, "free", qoe_free(&click_qoe, total - used, used));
	jw_ku64(w, "rejected", flow_rejected());
	jw_ku64(w, "opened", flow_opened());
	if (click_qoe.probed)
		click_qoe_json(w);
	jw_obj_end(w);

	jw_key(w, "nics");
	jw_arr_begin(w);
	for (int i = 0; i < g_nics; i++) {
		char m[18];
		static const char hx[] = "0123456789abcdef";
		const uint8_t *mac = click_mac(i);
		for (int k = 0; k < 6; k++) {
			m[3 * k] = hx[mac[k] >> 4];
			m[3 * k + 1] = hx[mac[k] & 15];
			m[3 * k + 2] = k < 5 ? ':' : 0;
		}
		jw_obj_begin(w);
		jw_kstr(w, "mac", m);
		jw_ku64(w, "rx", click_nicst[i].rx);
		jw_ku64(w, "tx", click_nicst[i].tx);
		jw_ku64(w, "drop", click_nicst[i].drop);
		jw_ku64(w, "rx_bytes", click_nicst[i].rx_bytes);
		jw_ku64(w, "tx_bytes", click_nicst[i].tx_bytes);
		jw_obj_end(w);
	}
	jw_arr_end(w);

	/* elements with counters (FromDevice/ToDevice are covered by the NIC counters: no stats) */
	jw_key(w, "elements");
	jw_arr_begin(w);
	if (active >= 0) {
		const struct graph *g = &graphs[active];
		for (int i = 0; i < g->nelem; i++)
			if (click_elements[g->e[i].cls].ops->stats)
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
