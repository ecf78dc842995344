/* fluidvim VNF — session slots at the service's QoE (contract/PROTOCOL.md §4 `qoe`, issue 23).
 *
 * A slot is one more session the VNF can serve within the service's deadline at its quantile. The
 * launcher gives the VNF the capacity a stage-1 load probe measured for that deadline and quantile
 * (`probed`) and the VNF's own latency budget at that quantile (`budget_ns`: its processing-time
 * tail at the loads that met the deadline, with a margin). The VNF then corrects the capacity from
 * its own latency histogram, one window at a time:
 *
 *  - a window whose tail (lower bound of the log2 bucket holding the quantile) is >= budget_ns
 *    while the VNF carries at least half its capacity is *over*: capacity shrinks to 7/8 of the
 *    sessions it carries (never above what it was); a tail over budget at a light load is noise
 *    of the host, not a capacity problem, and changes nothing;
 *  - a window whose tail bucket lies wholly at or under budget_ns / 2 (or that has fewer packets
 *    than one beyond the quantile: no evidence) is *good*; QOE_GROW_AFTER good windows in a row
 *    grow the capacity by max(1, probed / 8) up to `probed`;
 *  - anything between the two (budget/2 .. budget) holds: the hysteresis band.
 *
 * The histogram runs from receive to transmit inside the engine: a frame that waits in the rings
 * or the tap while the host keeps this vCPU off a CPU is late without its tail showing it (on a
 * 2-core host shared with its traffic client: in-VNF p99 1 us, end-to-end p99 55 ms, the vCPU
 * waiting 4.6 s of a 9 s run; bench/results/slots.md). So with `wait_ppm` set, each window is
 * also judged by its host wait: the KVM steal time that accrued during it as a share of the
 * window (ppm). A share >= wait_ppm is over (the same load rule as the tail), one wholly <=
 * wait_ppm / 2 is good, between holds; the window's verdict is the worse of the tail's and the
 * wait's (a window too thin to show the tail stays idle unless its wait holds or is over).
 *
 * A window's verdict shrinks the capacity only when the window closes (>= 1 s), but sessions that
 * arrive meanwhile would be admitted past the knee (bench/results/slots.md: 327 sessions in, the
 * capacity shrunk to 286 a second later, all of them over). So a read at least QOE_PEEK_NS into a
 * window judges the window so far by the same rules (qoe_peek): over (under load) sets `pending`,
 * and while it is set no slot is announced free; the window's own verdict decides when it closes
 * (pending cleared: hold or good announce capacity - used again, over shrinks as before). The
 * capacity itself only moves on whole windows; the hysteresis band is the same.
 *
 * Announced free slots = min(flow-table free, capacity - used) (0 when used >= capacity, or while
 * the current window is already over: `pending`); with no capacity set, the flow table's free
 * slots. Pure arithmetic on a state struct, so the host tests
 * drive it window by window. */
#ifndef FLUIDVIM_QOE_H
#define FLUIDVIM_QOE_H
#include "kstd.h"

#define QOE_BUCKETS 32          /* = the engine's latency histogram (CLICK_LAT_BUCKETS) */
#define QOE_WINDOW_NS 1000000000ull
#define QOE_GROW_AFTER 3
#define QOE_PEEK_NS 250000000ull  /* a read this far into a window judges it so far (pending) */

enum qoe_verdict { QOE_OFF, QOE_IDLE, QOE_GOOD, QOE_HOLD, QOE_OVER };

struct qoe {
	uint32_t probed;             /* capacity from the load probe; 0 = no QoE capacity set */
	uint32_t capacity;           /* corrected capacity */
	uint64_t budget_ns;
	uint32_t quantile_ppm;       /* e.g. 990000 = p99 */
	uint32_t good_run;           /* consecutive good windows */
	uint64_t shrinks, grows;
	uint64_t last_tail_ns;       /* tail of the last evaluated window */
	enum qoe_verdict last;
	uint64_t snap[QOE_BUCKETS];  /* histogram at the start of the current window */
	uint64_t window_start_ns;
	uint32_t wait_ppm;           /* host-wait budget: steal share of a window, ppm; 0 = off */
	uint32_t last_wait_ppm;      /* steal share of the last evaluated window */
	uint64_t steal_snap;         /* steal time (ns) at the start of the current window */
	uint32_t pending;            /* the current window so far is over: nothing free until it closes */
	uint64_t pending_stops;      /* windows that stopped admission before they closed */
};

/* Set (or clear with probed == 0) the probe's capacity, budget, quantile and host-wait budget
 * (`wait_ppm`, 0 = no wait rule); starts a window at steal time `steal_ns`. */
void qoe_set(struct qoe *q, uint32_t probed, uint64_t budget_ns, uint32_t quantile_ppm,
	     uint32_t wait_ppm, const uint64_t *hist, uint64_t steal_ns, uint64_t now_ns);
/* One window: `delta` = packets per log2 bucket during it, `used` = sessions carried now,
 * `wait` = the window's steal share in ppm (ignored when q->wait_ppm is 0). */
enum qoe_verdict qoe_window(struct qoe *q, const uint64_t *delta, uint32_t used, uint32_t wait);
/* The current window so far (`delta`, `used`, `wait` as qoe_window), judged by the same rules
 * without acting on them but for `pending`: set when over (nothing free until the window closes). */
enum qoe_verdict qoe_peek(struct qoe *q, const uint64_t *delta, uint32_t used, uint32_t wait);
/* Close the current window if QOE_WINDOW_NS passed (cumulative histogram `hist`, cumulative
 * steal time `steal_ns`); else, QOE_PEEK_NS into it, judge it so far (sets or keeps `pending`). */
void qoe_tick(struct qoe *q, const uint64_t *hist, uint32_t used, uint64_t steal_ns,
	      uint64_t now_ns);
uint32_t qoe_free(const struct qoe *q, uint32_t table_free, uint32_t used);
const char *qoe_verdict_name(enum qoe_verdict v);

/* The VNF's one instance (click.c reads it for `stats`, control.c sets it) */
extern struct qoe click_qoe;

#endif
