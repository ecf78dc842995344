/* RateLimiter(rate [, burst]): a token bucket in packets/s; conforming packets to output 0, the
 * rest to output 1. */
#include "elements.h"

#define NS_PER_TOKEN 1000000000ull      /* token bucket: one packet = 1e9 units */

bool ratelimiter_configure(struct cparse *p, struct elem *e, int idx, size_t cls_off, int nargs)
{
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
	e->u.rl.rate = rate;
	e->u.rl.burst = burst;
	e->nout = 2;
	return true;
}

void ratelimiter_initialize(struct elem *e, uint64_t now_ns)
{
	e->u.rl.tokens = e->u.rl.burst * NS_PER_TOKEN;   /* start with a full bucket */
	e->u.rl.last_ns = now_ns;
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

int ratelimiter_push(struct graph *g, struct elem *e, struct pkt *p)
{
	if (rate_take(e, p->now, p->segs)) {
		e->u.rl.passed += p->segs;
		return 0;
	}
	e->u.rl.limited += p->segs;
	return 1;
}

void ratelimiter_stats(struct jw *w, const struct elem *e)
{
	jw_ku64(w, "passed", e->u.rl.passed);
	jw_ku64(w, "limited", e->u.rl.limited);
}
