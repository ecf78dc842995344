/* FastUDPFlows(RATE, LIMIT, LENGTH, SRCETH, SRCIP, DSTETH, DSTIP, FLOWS [, FLOWSIZE]): a traffic
 * generator, with the name and arguments of Click's FastUDPFlows. No inputs, one output. It makes
 * LENGTH-byte Ethernet/IPv4/UDP frames (60..1514, no FCS) from SRCETH/SRCIP to DSTETH/DSTIP, RATE
 * frames per second in all (0..10^7; 0 = paused), round robin over FLOWS flows (1..64512): flow k
 * has UDP source port 1024 + k and destination port 7, so each flow is one session of a VNF it
 * passes. It stops after LIMIT frames (-1 = no limit). With FLOWSIZE > 0 a flow takes the next
 * unused source port after FLOWSIZE frames (a new session: churn); 0, the default, keeps them.
 *
 * Unlike Click's (one static packet per flow), each frame carries the stamp of udpstamp.h in its
 * payload (sequence number and send time), which TimestampDiff reads when the frame comes back:
 * round-trip latency and loss. IPv4 and UDP checksums are complete.
 *
 * Scheduling: it is an element task (element_ops.run_task), run every scheduler round; a frame
 * is due every 10^9/RATE ns from the moment the graph started, and a round sends the frames due,
 * at most SRC_BURST. Its next due time is its wake-up (the tickless kernel sleeps until then).
 * Behind its schedule (its vCPU was off the CPU) it catches up, as a host load generator does,
 * up to SRC_MAX_LAG_NS: the frames of a longer gap are skipped and counted as `missed` instead
 * of being sent in one burst. Backpressure: a round sends no more frames than plat_tx_room()
 * allows (the NICs' TX rings keep the room this VNF's own RX needs, so the frames coming back
 * are received while it sends), and a frame whose trip still ends in a drop ends the round and is
 * tried again in the next one (counted in `refused`, each try): the generator goes as fast as its
 * NICs take frames and its sequence numbers have no gaps of its own, so TimestampDiff's `lost`
 * counts only frames lost after they were sent. A drop that lasts (a full flow table, an
 * unconnected output) turns the frames into `missed`.
 * Stats: `rate`, `flows`, `sent`, `refused`, `missed`, `active_ns` (first to last frame sent). */
#include "elements.h"
#include "nicmac.h"
#include "udpstamp.h"

#define SRC_BURST 32u
#define SRC_MAX_LAG_NS 200000000ull
#define SRC_MAX_RATE 10000000u
#define SRC_MAX_FLOWS 64512u
#define SRC_PORT_BASE 1024u
#define SRC_DPORT 7u
#define SRC_MAX_FRAME 1514u
#define NS 1000000000ull

ELEMENT_STATE(fastudpflows) {
	uint64_t limit;                 /* frames to make, UINT64_MAX = no limit */
	uint64_t made, sent, refused, missed;     /* made = sent + missed */
	uint64_t next_ns, first_ns, last_ns;
	uint32_t rate, step_ns, step_rem, acc, flows, flowsize;
	uint32_t src_ip, dst_ip;
	uint16_t len, ip_csum;
	uint8_t src_eth[6], dst_eth[6];
};

static uint8_t frame[SRC_MAX_FRAME];    /* the frame being sent: headers and stamp rewritten for
					 * each; the padding after the stamp is never written (zero) */

static const char USAGE[] = "FastUDPFlows takes (RATE, LIMIT, LENGTH, SRCETH, SRCIP, DSTETH, DSTIP, "
	"FLOWS [, FLOWSIZE]), e.g. FastUDPFlows(1000, -1, 60, 52:54:00:00:00:01, 10.0.0.1, "
	"52:54:00:00:00:02, 10.0.0.2, 10)";

static bool arg_limit(struct cparse *p, const struct arg *a, uint64_t *out)
{
	size_t ws, wl;
	uint32_t v;
	if (!click_arg_word(p, a, "FastUDPFlows LIMIT", &ws, &wl))
		return false;
	if (cfg_word_is(p->s, ws, wl, "-1")) {
		*out = UINT64_MAX;
		return true;
	}
	if (!cfg_parse_u32(p->s + ws, wl, 0xffffffffu, &v)) {
		cperr_set(&p->err, ws, "FastUDPFlows LIMIT must be a number of frames (0..4294967295) "
			  "or -1 for no limit, got '%t'", (int)wl, p->s + ws);
		return false;
	}
	*out = v;
	return true;
}

static bool arg_eth(struct cparse *p, const struct arg *a, const char *what, uint8_t out[6])
{
	size_t ws, wl;
	if (!click_arg_word(p, a, what, &ws, &wl))
		return false;
	if (!mac_parse(p->s + ws, wl, out)) {
		cperr_set(&p->err, ws, "%s must be a MAC address like 52:54:00:12:34:56, got '%t'", what,
			  (int)wl, p->s + ws);
		return false;
	}
	return true;
}

static bool arg_ip(struct cparse *p, const struct arg *a, const char *what, uint32_t *out)
{
	size_t ws, wl;
	uint32_t mask;
	if (!click_arg_word(p, a, what, &ws, &wl))
		return false;
	if (!match_parse_net(p->s + ws, wl, out, &mask) || mask != 0xffffffffu) {
		cperr_set(&p->err, ws, "%s must be an IPv4 address A.B.C.D, got '%t'", what, (int)wl,
			  p->s + ws);
		return false;
	}
	return true;
}

static uint32_t sum16(const uint8_t *d, uint32_t n, uint32_t s)
{
	for (uint32_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)(d[i] << 8 | d[i + 1]);
	if (n & 1)
		s += (uint32_t)d[n - 1] << 8;
	return s;
}

static uint16_t fold(uint32_t s)
{
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

static void put16(uint8_t *d, uint32_t v)
{
	d[0] = (uint8_t)(v >> 8);
	d[1] = (uint8_t)v;
}

static void put32(uint8_t *d, uint32_t v)
{
	put16(d, v >> 16);
	put16(d + 2, v);
}

/* The Ethernet and IPv4 headers (constant for the element; the IP id is 0 with DF set). */
static void put_l2l3(const struct fastudpflows_state *s)
{
	memcpy(frame, s->dst_eth, 6);
	memcpy(frame + 6, s->src_eth, 6);
	put16(frame + 12, 0x0800);
	uint8_t *ip = frame + 14;
	ip[0] = 0x45;
	ip[1] = 0;
	put16(ip + 2, s->len - 14u);
	put16(ip + 4, 0);
	put16(ip + 6, 0x4000);
	ip[8] = 64;
	ip[9] = 17;
	put16(ip + 10, 0);
	put32(ip + 12, s->src_ip);
	put32(ip + 16, s->dst_ip);
	put16(ip + 10, s->ip_csum);
}

static bool fastudpflows_configure(struct cparse *p, struct elem *e, int idx, size_t cls_off, int nargs)
{
	struct fastudpflows_state *s = elem_state(e, fastudpflows);
	uint32_t len;
	if (nargs < 8 || nargs > 9) {
		cperr_set(&p->err, nargs > 9 ? p->args[9].start : cls_off, "%s (got %d arguments)", USAGE,
			  nargs);
		return false;
	}
	if (!click_arg_num(p, &p->args[0], "FastUDPFlows RATE", 0, SRC_MAX_RATE,
			   "FastUDPFlows RATE must be 0..10000000 frames/s", &s->rate) ||
	    !arg_limit(p, &p->args[1], &s->limit) ||
	    !click_arg_num(p, &p->args[2], "FastUDPFlows LENGTH", UDPSTAMP_MIN_FRAME, SRC_MAX_FRAME,
			   "FastUDPFlows LENGTH must be 60..1514 bytes (the frame without FCS)", &len) ||
	    !arg_eth(p, &p->args[3], "FastUDPFlows SRCETH", s->src_eth) ||
	    !arg_ip(p, &p->args[4], "FastUDPFlows SRCIP", &s->src_ip) ||
	    !arg_eth(p, &p->args[5], "FastUDPFlows DSTETH", s->dst_eth) ||
	    !arg_ip(p, &p->args[6], "FastUDPFlows DSTIP", &s->dst_ip) ||
	    !click_arg_num(p, &p->args[7], "FastUDPFlows FLOWS", 1, SRC_MAX_FLOWS,
			   "FastUDPFlows FLOWS must be 1..64512", &s->flows))
		return false;
	s->flowsize = 0;
	if (nargs == 9 && !click_arg_num(p, &p->args[8], "FastUDPFlows FLOWSIZE", 0, 0xffffffffu,
					 "FastUDPFlows FLOWSIZE must be a number of frames (0 = keep "
					 "each flow's ports)", &s->flowsize))
		return false;
	s->len = (uint16_t)len;
	uint8_t ip[20];
	memset(ip, 0, sizeof ip);
	ip[0] = 0x45;
	put16(ip + 2, len - 14u);
	put16(ip + 6, 0x4000);
	ip[8] = 64;
	ip[9] = 17;
	put32(ip + 12, s->src_ip);
	put32(ip + 16, s->dst_ip);
	s->ip_csum = fold(sum16(ip, 20, 0));
	e->nout = 1;
	return true;
}

static void fastudpflows_initialize(struct elem *e, uint64_t now_ns)
{
	struct fastudpflows_state *s = elem_state(e, fastudpflows);
	s->next_ns = now_ns;
	s->step_ns = s->rate ? (uint32_t)(NS / s->rate) : 0;
	s->step_rem = s->rate ? (uint32_t)(NS % s->rate) : 0;
	s->acc = 0;
}

/* Frame number s->sent: flow, ports, stamp (send time `now`) and UDP checksum. */
static void put_frame(const struct fastudpflows_state *s, uint64_t now)
{
	uint64_t seq = s->sent, k = seq % s->flows;
	if (s->flowsize)
		k += (seq / s->flows / s->flowsize) * s->flows;
	uint8_t *udp = frame + 34;
	put_l2l3(s);
	put16(udp, SRC_PORT_BASE + (uint32_t)(k % SRC_MAX_FLOWS));
	put16(udp + 2, SRC_DPORT);
	put16(udp + 4, s->len - 34u);
	put16(udp + 6, 0);
	put16(udp + 8, UDPSTAMP_MAGIC);
	udpstamp_put64(udp + 10, seq);
	udpstamp_put64(udp + 18, now);
	/* pseudo header + UDP header + stamp (the rest of the payload is zero) */
	uint32_t sum = sum16(frame + 26, 8, 17u + (s->len - 34u));
	uint16_t c = fold(sum16(udp, 8 + UDPSTAMP_LEN, sum));
	put16(udp + 6, c ? c : 0xffff);
}

/* The schedule fell more than SRC_MAX_LAG_NS behind: skip the frames of the gap. */
static void skip_gap(struct fastudpflows_state *s, uint64_t now)
{
	uint64_t lag = now - s->next_ns;
	if (lag > 1000 * NS)
		lag = 1000 * NS;
	uint64_t n = lag * s->rate / NS;
	if (s->limit != UINT64_MAX && n > s->limit - s->made)
		n = s->limit - s->made;
	s->missed += n;
	s->made += n;
	s->next_ns = now;
	s->acc = 0;
}

static void advance(struct fastudpflows_state *s)
{
	s->next_ns += s->step_ns;
	s->acc += s->step_rem;
	if (s->acc >= s->rate) {
		s->acc -= s->rate;
		s->next_ns++;
	}
}

static bool fastudpflows_task(struct graph *g, struct elem *e, uint64_t now, uint64_t *wake_ns)
{
	struct fastudpflows_state *s = elem_state(e, fastudpflows);
	if (!s->rate || s->made >= s->limit)
		return false;
	if (now > s->next_ns + SRC_MAX_LAG_NS)
		skip_gap(s, now);
	uint32_t room = plat_tx_room(), burst = room < SRC_BURST ? room : SRC_BURST;
	unsigned n = 0;
	while (s->next_ns <= now && n < burst && s->made < s->limit) {
		uint64_t t = plat_now_ns();
		put_frame(s, t);
		n++;
		if (click_emit(g, e, frame, s->len, t) == FATE_DROP) {
			s->refused++;           /* tried again next round */
			break;
		}
		if (!s->first_ns)
			s->first_ns = t;
		s->last_ns = t;
		s->made++;
		s->sent++;
		advance(s);
	}
	if (s->made < s->limit)
		*wake_ns = s->next_ns;
	return n > 0 || (s->next_ns <= now && s->made < s->limit);    /* due, no room: keep polling */
}

static int fastudpflows_push(struct graph *g, struct elem *e, struct pkt *p)
{
	return PUSH_FATE(FATE_DROP);    /* no inputs (configure refuses connections to it) */
}

static void fastudpflows_stats(struct jw *w, const struct elem *e)
{
	const struct fastudpflows_state *s = elem_cstate(e, fastudpflows);
	jw_ku64(w, "rate", s->rate);
	jw_ku64(w, "flows", s->flows);
	jw_ku64(w, "sent", s->sent);
	jw_ku64(w, "refused", s->refused);
	jw_ku64(w, "missed", s->missed);
	jw_ku64(w, "active_ns", s->first_ns ? s->last_ns - s->first_ns : 0);
}

ELEMENT_OPS(fastudpflows, .initialize = fastudpflows_initialize, .stats = fastudpflows_stats,
	    .run_task = fastudpflows_task, .no_inputs = true);
