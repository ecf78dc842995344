/* RateLimiter(rate [, burst]): a token bucket in packets/s; conforming packets to output 0, the
 * rest to output 1. */
#include "elements.h"

ELEMENT_STATE(ratelimiter) { uint64_t rate, burst, tokens, last_ns, passed, limited; };

#define NS_PER_TOKEN 1000000000ull      /* token bucket: one packet = 1e9 units */

static bool ratelimiter_configure(struct cparse *p, struct elem *e, int idx, size_t cls_off, int nargs)
{
	struct ratelimiter_state *rl = elem_state(e, ratelimiter);
	uint32_t rate, burst;
	if (nargs == 0 || nargs > 2) {
		cperr_set(&p->err, nargs ? p->args[2].start : cls_off,
			  "RateLimiter takes (rate [, burst]) in packets/s and packets, e.g. RateLimiter(1000)");
		return false;
	}
	if (!click_arg_num(p, &p->args[0], "RateLimiter rate", 1, 1000000000,
			   "RateLimiter rate must be > 0 and <= 1000000000 packets/s", &rate))
		return false;
	burst = rate / 10 ? rate / 10 : 1;
	if (nargs == 2 && !click_arg_num(p, &p->args[1], "RateLimiter burst", 1, 1000000,
					 "RateLimiter burst must be 1..1000000 packets", &burst))
		return false;
	rl->rate = rate;
	rl->burst = burst;
	e->nout = 2;
	return true;
}

static void ratelimiter_initialize(struct elem *e, uint64_t now_ns)
{
	struct ratelimiter_state *rl = elem_state(e, ratelimiter);
	rl->tokens = rl->burst * NS_PER_TOKEN;   /* start with a full bucket */
	rl->last_ns = now_ns;
}

static bool rate_take(struct elem *e, uint64_t now, uint32_t n)
{
	struct ratelimiter_state *rl = elem_state(e, ratelimiter);
	uint64_t cap = rl->burst * NS_PER_TOKEN;
	if (now > rl->last_ns) {
		uint64_t dt = now - rl->last_ns;
		rl->last_ns = now;
		if (dt >= 10 * NS_PER_TOKEN) {
			rl->tokens = cap;
		} else {
			rl->tokens += dt * rl->rate;    /* dt < 1e10, rate <= 1e9: no overflow */
			if (rl->tokens > cap)
				rl->tokens = cap;
		}
	}
	if (rl->tokens >= n * NS_PER_TOKEN) {        /* a superframe needs one per segment */
		rl->tokens -= n * NS_PER_TOKEN;
		return true;
	}
	return false;
}

static int ratelimiter_push(struct graph *g, struct elem *e, struct pkt *p)
{
	struct ratelimiter_state *rl = elem_state(e, ratelimiter);
	if (rate_take(e, p->now, p->segs)) {
		rl->passed += p->segs;
		return 0;
	}
	rl->limited += p->segs;
	return 1;
}

static void ratelimiter_stats(struct jw *w, const struct elem *e)
{
	const struct ratelimiter_state *rl = elem_cstate(e, ratelimiter);
	jw_ku64(w, "passed", rl->passed);
	jw_ku64(w, "limited", rl->limited);
}

ELEMENT_OPS(ratelimiter, .initialize = ratelimiter_initialize,
	    .stats = ratelimiter_stats);
