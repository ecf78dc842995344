/* fluidvim VNF — session slots at the service's QoE: capacity corrected from the VNF's own latency
 * histogram (see include/qoe.h for the rules). */
#include "qoe.h"

struct qoe click_qoe;

static void copy_hist(uint64_t *dst, const uint64_t *src)
{
	for (unsigned i = 0; i < QOE_BUCKETS; i++)
		dst[i] = src ? src[i] : 0;
}

void qoe_set(struct qoe *q, uint32_t probed, uint64_t budget_ns, uint32_t quantile_ppm,
	     uint32_t wait_ppm, const uint64_t *hist, uint64_t steal_ns, uint64_t now_ns)
{
	q->wait_ppm = probed ? wait_ppm : 0;
	q->last_wait_ppm = 0;
	q->steal_snap = steal_ns;
	q->probed = probed;
	q->capacity = probed;
	q->budget_ns = budget_ns;
	q->quantile_ppm = quantile_ppm;
	q->good_run = 0;
	q->shrinks = q->grows = 0;
	q->last_tail_ns = 0;
	q->last = probed ? QOE_IDLE : QOE_OFF;
	q->pending = 0;
	q->pending_stops = 0;
	copy_hist(q->snap, hist);
	q->window_start_ns = now_ns;
}

/* the host wait's verdict: over (as a candidate), hold or good; good when the rule is off */
static enum qoe_verdict wait_verdict(const struct qoe *q, uint32_t wait)
{
	if (!q->wait_ppm)
		return QOE_GOOD;
	if (wait >= q->wait_ppm)
		return QOE_OVER;
	return 2ull * wait <= q->wait_ppm ? QOE_GOOD : QOE_HOLD;
}

/* a window's verdict (delta: its packets per bucket, used: sessions carried, wait: its steal
 * share in ppm), without acting on it; *tail = its quantile's bucket when it shows one */
static enum qoe_verdict judge(const struct qoe *q, const uint64_t *delta, uint32_t used,
			      uint32_t wait, uint64_t *tail)
{
	uint64_t n = 0;
	for (unsigned i = 0; i < QOE_BUCKETS; i++)
		n += delta[i];
	/* at least one packet beyond the quantile, else the window says nothing about the tail */
	uint64_t beyond = 1000000u - q->quantile_ppm;
	enum qoe_verdict v;
	if (!beyond || n * beyond < 1000000u) {
		v = QOE_IDLE;
	} else {
		uint64_t rank = (n * q->quantile_ppm + 999999u) / 1000000u, cum = 0;
		unsigned b = QOE_BUCKETS - 1;
		if (rank == 0)
			rank = 1;
		for (unsigned i = 0; i < QOE_BUCKETS; i++) {
			cum += delta[i];
			if (cum >= rank) {
				b = i;
				break;
			}
		}
		uint64_t lo = b ? 1ull << b : 0, hi = 1ull << (b + 1);
		*tail = lo;
		if (lo >= q->budget_ns)
			v = QOE_OVER;
		else if (2 * hi <= q->budget_ns)
			v = QOE_GOOD;
		else
			v = QOE_HOLD;
	}
	enum qoe_verdict w = wait_verdict(q, wait);
	if (w > v && w != QOE_GOOD)       /* the worse of the two; idle stays idle unless waits */
		v = w;
	if (v == QOE_OVER && 2ull * used < q->capacity)
		v = QOE_HOLD;             /* over at a light load: the host's noise, not capacity */
	return v;
}

enum qoe_verdict qoe_window(struct qoe *q, const uint64_t *delta, uint32_t used, uint32_t wait)
{
	if (!q->probed)
		return q->last = QOE_OFF;
	q->pending = 0;
	enum qoe_verdict v = judge(q, delta, used, wait, &q->last_tail_ns);
	q->last_wait_ppm = q->wait_ppm ? wait : 0;
	if (v == QOE_OVER) {
		uint32_t c = (uint32_t)((uint64_t)used * 7 / 8);
		if (c > q->capacity)
			c = q->capacity;
		if (c < q->capacity)
			q->shrinks++;
		q->capacity = c;
		q->good_run = 0;
	} else if (v == QOE_HOLD) {
		q->good_run = 0;
	} else if (++q->good_run >= QOE_GROW_AFTER) {
		q->good_run = 0;
		if (q->capacity < q->probed) {
			uint32_t step = q->probed / 8 ? q->probed / 8 : 1;
			q->capacity = q->probed - q->capacity > step ? q->capacity + step : q->probed;
			q->grows++;
		}
	}
	return q->last = v;
}

enum qoe_verdict qoe_peek(struct qoe *q, const uint64_t *delta, uint32_t used, uint32_t wait)
{
	if (!q->probed)
		return QOE_OFF;
	uint64_t tail = 0;
	enum qoe_verdict v = judge(q, delta, used, wait, &tail);
	if (v == QOE_OVER && !q->pending) {
		q->pending = 1;
		q->pending_stops++;
	}
	return v;
}

void qoe_tick(struct qoe *q, const uint64_t *hist, uint32_t used, uint64_t steal_ns,
	      uint64_t now_ns)
{
	if (!q->probed || now_ns - q->window_start_ns < QOE_PEEK_NS)
		return;
	uint64_t delta[QOE_BUCKETS];
	for (unsigned i = 0; i < QOE_BUCKETS; i++)
		delta[i] = hist[i] >= q->snap[i] ? hist[i] - q->snap[i] : hist[i]; /* reset */
	uint64_t len = now_ns - q->window_start_ns;
	uint64_t st = steal_ns >= q->steal_snap ? steal_ns - q->steal_snap : 0;
	uint64_t wait = st >= len ? 1000000u : st * 1000000u / len;
	if (len < QOE_WINDOW_NS) {        /* QOE_PEEK_NS into it: the window so far */
		qoe_peek(q, delta, used, (uint32_t)wait);
		return;
	}
	qoe_window(q, delta, used, (uint32_t)wait);
	copy_hist(q->snap, hist);
	q->steal_snap = steal_ns;
	q->window_start_ns = now_ns;
}

uint32_t qoe_free(const struct qoe *q, uint32_t table_free, uint32_t used)
{
	if (!q->probed)
		return table_free;
	if (q->pending)
		return 0;
	uint32_t room = q->capacity > used ? q->capacity - used : 0;
	return room < table_free ? room : table_free;
}

const char *qoe_verdict_name(enum qoe_verdict v)
{
	static const char *const names[] = {"off", "idle", "good", "hold", "over"};
	return (unsigned)v < sizeof names / sizeof names[0] ? names[v] : "?";
}
