/* TimestampDiff: the latency meter for FastUDPFlows' frames (the name of FastClick's element that
 * measures the time since a packet was stamped). One input, 1 or 2 outputs. A frame with the stamp
 * of udpstamp.h (IPv4/UDP, magic 0xF1D0) adds receive time - send time to its histogram and leaves
 * by output 0; any other frame leaves by output 1 if connected, else is dropped (`other`).
 * The receive time is when the VNF got the frame (the engine's t0), so with FastUDPFlows in the
 * same VNF it is the round trip: generator TX -> network and the VNFs under test -> generator RX.
 * Stamps from another clock (another VNF) or from before this graph started (frames of a previous
 * configuration still on their way) are not measured: `stale`.
 *
 * Loss: the stamps carry FastUDPFlows' sequence numbers (0, 1, ... from the graph's start), so
 * `lost` = highest number seen + 1 - frames measured (frames missing below the newest one; with
 * one FastUDPFlows feeding it, and read once the last frames are back).
 * Stats: `count`, `stale`, `other`, `lost`, `min_ns`, `mean_ns`, `max_ns`, and `p50_ns`, `p75_ns`,
 * `p90_ns`, `p95_ns`, `p99_ns`, `p999_ns` from a log-linear histogram (16 sub-buckets per power
 * of two: a quantile is the middle of its bucket, within 3.2 % of the true value, clamped to
 * [min, max]). The histogram is this file's (4 KiB), so a config has at most one TimestampDiff. */
#include "elements.h"
#include "udpstamp.h"

#define TD_SUB_BITS 4u
#define TD_SUB (1u << TD_SUB_BITS)
#define TD_MAX_LOG2 36u                 /* ~68.7 s; longer round trips count in the last bucket */
#define TD_BUCKETS ((TD_MAX_LOG2 - TD_SUB_BITS + 1u) * TD_SUB)

ELEMENT_STATE(timestampdiff) { uint64_t start_ns, count, stale, other, seq_max; bool seq_seen; };

static uint64_t td_hist[TD_BUCKETS], td_min, td_max, td_sum;

static bool timestampdiff_configure(struct cparse *p, struct elem *e, int idx, size_t cls_off, int nargs)
{
	if (!click_arg_none(p, "TimestampDiff", nargs))
		return false;
	for (int i = 0; i < idx; i++)
		if (p->g->e[i].cls == EC_TIMESTAMPDIFF) {
			int l, c;
			cfg_linecol(p->s, p->n, p->g->e[i].decl_off, &l, &c);
			cperr_set(&p->err, cls_off, "a config has at most one TimestampDiff (the first is "
				  "at line %d col %d): send every stamped frame to it", l, c);
			return false;
		}
	e->nout = 2;
	return true;
}

static void timestampdiff_initialize(struct elem *e, uint64_t now_ns)
{
	struct timestampdiff_state *s = elem_state(e, timestampdiff);
	s->start_ns = now_ns;
	memset(td_hist, 0, sizeof td_hist);
	td_min = UINT64_MAX;
	td_max = td_sum = 0;
}

static unsigned bucket_of(uint64_t v)
{
	if (v < TD_SUB)
		return (unsigned)v;
	unsigned lg = 63u - (unsigned)__builtin_clzll(v);
	if (lg >= TD_MAX_LOG2)
		return TD_BUCKETS - 1;
	return (lg - TD_SUB_BITS + 1u) * TD_SUB + (unsigned)((v >> (lg - TD_SUB_BITS)) & (TD_SUB - 1u));
}

/* The middle of bucket b. */
static uint64_t bucket_mid(unsigned b)
{
	if (b < TD_SUB)
		return b;
	unsigned sh = b / TD_SUB - 1u;
	uint64_t lo = (uint64_t)(TD_SUB + b % TD_SUB) << sh;
	return lo + ((1ull << sh) >> 1);
}

static int timestampdiff_push(struct graph *g, struct elem *e, struct pkt *p)
{
	struct timestampdiff_state *s = elem_state(e, timestampdiff);
	const struct pinfo *pi = pkt_info(p);
	const uint8_t *st = p->data + pi->l4 + 8;
	if (!pi->ip4 || pi->proto != 17 || !pi->first_frag || pi->l4len < 8u + UDPSTAMP_LEN ||
	    (uint32_t)(st[0] << 8 | st[1]) != UDPSTAMP_MAGIC) {
		s->other += p->segs;
		return 1;
	}
	uint64_t seq = udpstamp_get64(st + 2), sent = udpstamp_get64(st + 10);
	if (sent < s->start_ns || sent > p->t0) {
		s->stale++;
		return 0;
	}
	uint64_t dt = p->t0 - sent;
	td_hist[bucket_of(dt)]++;
	td_sum += dt;
	if (dt < td_min)
		td_min = dt;
	if (dt > td_max)
		td_max = dt;
	s->count++;
	if (!s->seq_seen || seq > s->seq_max)
		s->seq_max = seq;
	s->seq_seen = true;
	return 0;
}

/* The value at quantile ppm/10^6 (nearest rank), n = the histogram's count (> 0). */
static uint64_t quantile(uint64_t n, uint32_t ppm)
{
	uint64_t rank = (n * ppm + 999999u) / 1000000u, cum = 0;
	if (rank == 0)
		rank = 1;
	for (unsigned b = 0; b < TD_BUCKETS; b++) {
		cum += td_hist[b];
		if (cum >= rank) {
			uint64_t v = bucket_mid(b);
			return v < td_min ? td_min : v > td_max ? td_max : v;
		}
	}
	return td_max;
}

static void timestampdiff_stats(struct jw *w, const struct elem *e)
{
	static const struct { const char *key; uint32_t ppm; } qs[] = {
		{ "p50_ns", 500000 }, { "p75_ns", 750000 }, { "p90_ns", 900000 },
		{ "p95_ns", 950000 }, { "p99_ns", 990000 }, { "p999_ns", 999000 },
	};
	const struct timestampdiff_state *s = elem_cstate(e, timestampdiff);
	uint64_t n = s->count;
	jw_ku64(w, "count", n);
	jw_ku64(w, "stale", s->stale);
	jw_ku64(w, "other", s->other);
	jw_ku64(w, "lost", s->seq_seen && s->seq_max + 1 > n ? s->seq_max + 1 - n : 0);
	jw_ku64(w, "min_ns", n ? td_min : 0);
	jw_ku64(w, "mean_ns", n ? td_sum / n : 0);
	jw_ku64(w, "max_ns", td_max);
	for (unsigned i = 0; i < sizeof qs / sizeof qs[0]; i++)
		jw_ku64(w, qs[i].key, n ? quantile(n, qs[i].ppm) : 0);
}

ELEMENT_OPS(timestampdiff, .initialize = timestampdiff_initialize, .stats = timestampdiff_stats);
