/* fluidvim VNF — host tests for session slots at the service's QoE (qoe.c, include/qoe.h). */
#include "test.h"
#include "qoe.h"

static uint64_t d[QOE_BUCKETS];

/* a window of n packets, all in bucket b except `tail` of them in bucket tb */
static const uint64_t *win(uint64_t n, unsigned b, uint64_t tail, unsigned tb)
{
	memset(d, 0, sizeof d);
	d[b] = n - tail;
	d[tb] += tail;
	return d;
}

static void off_is_flow_table(void)
{
	struct qoe q;
	memset(&q, 0, sizeof q);
	qoe_set(&q, 0, 0, 0, 0, NULL, 0, 0);
	CHECK_EQ(qoe_free(&q, 250, 6), 250);
	CHECK_EQ(qoe_window(&q, win(1000, 20, 0, 0), 6, 0), QOE_OFF);
	CHECK_EQ(qoe_free(&q, 250, 6), 250);
}

static void free_is_min_of_table_and_capacity(void)
{
	struct qoe q;
	qoe_set(&q, 200, 8192, 990000, 0, NULL, 0, 0);
	CHECK_EQ(q.capacity, 200);
	CHECK_EQ(qoe_free(&q, 1018, 6), 194);       /* capacity - used */
	CHECK_EQ(qoe_free(&q, 10, 6), 10);          /* the flow table is smaller */
	CHECK_EQ(qoe_free(&q, 800, 200), 0);
	CHECK_EQ(qoe_free(&q, 800, 230), 0);        /* carrying more than capacity: none, not negative */
}

static void tail_over_budget_under_load_shrinks(void)
{
	struct qoe q;
	qoe_set(&q, 200, 8192, 990000, 0, NULL, 0, 0);
	/* p99 in bucket 16 (65536 ns) >= budget, 160 sessions >= capacity / 2 */
	CHECK_EQ(qoe_window(&q, win(10000, 10, 200, 16), 160, 0), QOE_OVER);
	CHECK_EQ(q.capacity, 140);                  /* 7/8 of 160 */
	CHECK_EQ(q.last_tail_ns, 65536);
	CHECK_EQ(q.shrinks, 1);
	CHECK_EQ(qoe_free(&q, 1000, 160), 0);
	/* still over with 150 carried: 7/8 of 150 = 131 */
	CHECK_EQ(qoe_window(&q, win(10000, 10, 200, 16), 150, 0), QOE_OVER);
	CHECK_EQ(q.capacity, 131);
	/* over, but carrying more than capacity: never grows by shrinking */
	CHECK_EQ(qoe_window(&q, win(10000, 10, 200, 16), 200, 0), QOE_OVER);
	CHECK_EQ(q.capacity, 131);
}

static void tail_over_at_light_load_holds(void)
{
	struct qoe q;
	qoe_set(&q, 200, 8192, 990000, 0, NULL, 0, 0);
	CHECK_EQ(qoe_window(&q, win(10000, 10, 200, 16), 99, 0), QOE_HOLD);   /* < capacity / 2 */
	CHECK_EQ(q.capacity, 200);
	CHECK_EQ(q.shrinks, 0);
}

static void only_the_quantile_counts(void)
{
	struct qoe q;
	qoe_set(&q, 200, 8192, 990000, 0, NULL, 0, 0);
	/* 0.5 % of packets over budget: p99 still in bucket 10 -> good */
	CHECK_EQ(qoe_window(&q, win(10000, 10, 50, 16), 190, 0), QOE_GOOD);
	CHECK_EQ(q.last_tail_ns, 1024);
	/* 2 % over budget: p99 over */
	CHECK_EQ(qoe_window(&q, win(10000, 10, 200, 16), 190, 0), QOE_OVER);
}

static void grows_back_with_hysteresis(void)
{
	struct qoe q;
	qoe_set(&q, 200, 8192, 990000, 0, NULL, 0, 0);
	qoe_window(&q, win(10000, 10, 200, 16), 160, 0);
	CHECK_EQ(q.capacity, 140);
	/* the hysteresis band: tail in bucket 12 = [4096, 8192) is under budget but not under
	 * budget / 2: holds, however long */
	for (int i = 0; i < 10; i++)
		CHECK_EQ(qoe_window(&q, win(10000, 12, 0, 0), 100, 0), QOE_HOLD);
	CHECK_EQ(q.capacity, 140);
	/* good = the tail's bucket wholly <= budget / 2 (bucket 11 = [2048, 4096)) */
	CHECK_EQ(qoe_window(&q, win(10000, 11, 0, 0), 100, 0), QOE_GOOD);
	CHECK_EQ(qoe_window(&q, win(10000, 11, 0, 0), 100, 0), QOE_GOOD);
	CHECK_EQ(q.capacity, 140);                  /* not yet: QOE_GROW_AFTER good windows */
	/* a hold in between restarts the count */
	CHECK_EQ(qoe_window(&q, win(10000, 12, 0, 0), 100, 0), QOE_HOLD);
	for (int i = 0; i < QOE_GROW_AFTER - 1; i++)
		qoe_window(&q, win(10000, 11, 0, 0), 100, 0);
	CHECK_EQ(q.capacity, 140);
	qoe_window(&q, win(10000, 11, 0, 0), 100, 0);
	CHECK_EQ(q.capacity, 165);                  /* + probed / 8 */
	CHECK_EQ(q.grows, 1);
	for (int i = 0; i < 3 * QOE_GROW_AFTER; i++)
		qoe_window(&q, win(10000, 11, 0, 0), 100, 0);
	CHECK_EQ(q.capacity, 200);                  /* never above the probe's capacity */
	CHECK_EQ(q.grows, 3);
}

static void too_few_packets_is_no_evidence(void)
{
	struct qoe q;
	qoe_set(&q, 200, 8192, 990000, 0, NULL, 0, 0);
	qoe_window(&q, win(10000, 10, 200, 16), 160, 0);
	CHECK_EQ(q.capacity, 140);
	/* 99 packets cannot show a p99: idle, which counts towards growing back */
	CHECK_EQ(qoe_window(&q, win(99, 20, 0, 0), 160, 0), QOE_IDLE);
	CHECK_EQ(q.capacity, 140);
	CHECK_EQ(qoe_window(&q, win(0, 0, 0, 0), 0, 0), QOE_IDLE);
	CHECK_EQ(qoe_window(&q, win(0, 0, 0, 0), 0, 0), QOE_IDLE);
	CHECK_EQ(q.capacity, 165);
	/* p50 needs 2 packets */
	qoe_set(&q, 8, 8192, 500000, 0, NULL, 0, 0);
	CHECK_EQ(qoe_window(&q, win(2, 16, 0, 0), 8, 0), QOE_OVER);
	CHECK_EQ(q.capacity, 7);
}

static void tick_closes_windows_of_one_second(void)
{
	struct qoe q;
	uint64_t hist[QOE_BUCKETS];
	memset(hist, 0, sizeof hist);
	hist[10] = 5000;                            /* before the window: not counted */
	qoe_set(&q, 200, 8192, 990000, 0, hist, 0, 1000000000ull);
	hist[10] += 9800;
	hist[16] += 200;
	qoe_tick(&q, hist, 160, 0, 1200000000ull);     /* under QOE_PEEK_NS: nothing */
	CHECK_EQ(q.pending, 0);
	CHECK_EQ(qoe_free(&q, 1000, 160), 40);
	qoe_tick(&q, hist, 160, 0, 1500000000ull);     /* half a window: judged so far */
	CHECK_EQ(q.capacity, 200);                  /* the capacity moves on whole windows only */
	CHECK_EQ(q.last, QOE_IDLE);
	CHECK_EQ(q.pending, 1);                     /* ... but no slot is free until it closes */
	CHECK_EQ(qoe_free(&q, 1000, 160), 0);
	qoe_tick(&q, hist, 160, 0, 2000000000ull);
	CHECK_EQ(q.last, QOE_OVER);
	CHECK_EQ(q.capacity, 140);
	CHECK_EQ(q.pending, 0);
	CHECK_EQ(q.pending_stops, 1);
	/* the histogram was reset (a reconfigure): its counts are the window's */
	memset(hist, 0, sizeof hist);
	hist[11] = 300;
	qoe_tick(&q, hist, 100, 0, 3000000000ull);
	CHECK_EQ(q.last, QOE_GOOD);
	CHECK_EQ(q.last_tail_ns, 2048);
}

/* the host wait (steal share of a window): the engine's tail cannot see a frame that waits for
 * the vCPU outside it */
static void host_wait_over_budget_shrinks(void)
{
	struct qoe q;
	qoe_set(&q, 176, 8192, 990000, 200000, NULL, 0, 0);
	/* in-VNF tail good (bucket 10), but the vCPU waited 48 % of the window: over */
	CHECK_EQ(qoe_window(&q, win(17600, 10, 0, 0), 176, 480000), QOE_OVER);
	CHECK_EQ(q.capacity, 154);                  /* 7/8 of 176 */
	CHECK_EQ(q.last_wait_ppm, 480000);
	CHECK_EQ(q.shrinks, 1);
	/* exactly at the budget is over too; at a light load it holds */
	CHECK_EQ(qoe_window(&q, win(17600, 10, 0, 0), 150, 200000), QOE_OVER);
	CHECK_EQ(q.capacity, 131);
	CHECK_EQ(qoe_window(&q, win(17600, 10, 0, 0), 60, 900000), QOE_HOLD);
	CHECK_EQ(q.capacity, 131);
}

static void host_wait_hysteresis(void)
{
	struct qoe q;
	qoe_set(&q, 176, 8192, 990000, 200000, NULL, 0, 0);
	qoe_window(&q, win(17600, 10, 0, 0), 176, 300000);
	CHECK_EQ(q.capacity, 154);
	/* between budget / 2 and the budget: holds however long, the tail being good */
	for (int i = 0; i < 10; i++)
		CHECK_EQ(qoe_window(&q, win(17600, 10, 0, 0), 154, 100001), QOE_HOLD);
	CHECK_EQ(q.capacity, 154);
	/* at or under budget / 2 with a good tail: good, and grows back after QOE_GROW_AFTER */
	for (int i = 0; i < QOE_GROW_AFTER - 1; i++)
		CHECK_EQ(qoe_window(&q, win(17600, 10, 0, 0), 154, 100000), QOE_GOOD);
	CHECK_EQ(q.capacity, 154);
	CHECK_EQ(qoe_window(&q, win(17600, 10, 0, 0), 154, 0), QOE_GOOD);
	CHECK_EQ(q.capacity, 176);                  /* + probed / 8 = 22, capped at probed */
	/* a tail over budget still shrinks with no wait at all */
	CHECK_EQ(qoe_window(&q, win(10000, 10, 200, 16), 176, 0), QOE_OVER);
	/* a window too thin to show the tail: idle unless it waited */
	CHECK_EQ(qoe_window(&q, win(10, 10, 0, 0), 100, 0), QOE_IDLE);
	CHECK_EQ(qoe_window(&q, win(10, 10, 0, 0), 100, 150000), QOE_HOLD);
	CHECK_EQ(qoe_window(&q, win(10, 10, 0, 0), 100, 250000), QOE_OVER);
}

static void host_wait_off_is_ignored(void)
{
	struct qoe q;
	qoe_set(&q, 176, 8192, 990000, 0, NULL, 0, 0);
	CHECK_EQ(qoe_window(&q, win(17600, 10, 0, 0), 176, 1000000), QOE_GOOD);
	CHECK_EQ(q.capacity, 176);
	CHECK_EQ(q.last_wait_ppm, 0);
}

static void tick_measures_the_windows_steal(void)
{
	struct qoe q;
	uint64_t hist[QOE_BUCKETS];
	memset(hist, 0, sizeof hist);
	/* 3 s of steal before the window do not count */
	qoe_set(&q, 176, 8192, 990000, 200000, hist, 3000000000ull, 1000000000ull);
	hist[10] = 17600;
	/* 0.5 s of steal in a window of 2 s: 250000 ppm >= the budget */
	qoe_tick(&q, hist, 176, 3500000000ull, 3000000000ull);
	CHECK_EQ(q.last_wait_ppm, 250000);
	CHECK_EQ(q.last, QOE_OVER);
	CHECK_EQ(q.capacity, 154);
	/* 0.1 s in the next second: good */
	hist[10] += 17600;
	qoe_tick(&q, hist, 154, 3600000000ull, 4000000000ull);
	CHECK_EQ(q.last_wait_ppm, 100000);
	CHECK_EQ(q.last, QOE_GOOD);
	/* a steal counter that went back (never, but no wrap to a huge share) counts as none */
	hist[10] += 17600;
	qoe_tick(&q, hist, 154, 0, 5000000000ull);
	CHECK_EQ(q.last_wait_ppm, 0);
}

/* sessions arriving during a window that is already over are not admitted: the window so far is
 * judged at each read QOE_PEEK_NS into it; its own verdict decides when it closes */
static void a_window_over_so_far_stops_admission(void)
{
	struct qoe q;
	uint64_t hist[QOE_BUCKETS];
	memset(hist, 0, sizeof hist);
	qoe_set(&q, 300, 8192, 990000, 370000, hist, 0, 0);
	/* 0.3 s in, 200 sessions, the vCPU waited 60 % of it: over so far, nothing free */
	hist[10] = 6000;
	qoe_tick(&q, hist, 200, 180000000ull, 300000000ull);
	CHECK_EQ(q.pending, 1);
	CHECK_EQ(qoe_free(&q, 1000, 200), 0);
	CHECK_EQ(q.capacity, 300);
	/* at a light load the same wait is the host's noise: no stop */
	struct qoe l;
	qoe_set(&l, 300, 8192, 990000, 370000, NULL, 0, 0);
	qoe_tick(&l, hist, 100, 180000000ull, 300000000ull);
	CHECK_EQ(l.pending, 0);
	CHECK_EQ(qoe_free(&l, 1000, 100), 200);
	/* the window closes in the hysteresis band (wait 30 %: under the budget, over half of
	 * it): pending cleared, capacity unchanged, room announced again */
	hist[10] += 14000;
	qoe_tick(&q, hist, 200, 300000000ull, 1000000000ull);
	CHECK_EQ(q.last, QOE_HOLD);
	CHECK_EQ(q.pending, 0);
	CHECK_EQ(qoe_free(&q, 1000, 200), 100);
	CHECK_EQ(q.pending_stops, 1);
	/* a window good so far leaves it alone; one over again at its close shrinks as before */
	hist[10] += 6000;
	qoe_tick(&q, hist, 200, 330000000ull, 1300000000ull);
	CHECK_EQ(q.pending, 0);
	hist[10] += 14000;
	qoe_tick(&q, hist, 240, 800000000ull, 2000000000ull);
	CHECK_EQ(q.last, QOE_OVER);
	CHECK_EQ(q.capacity, 210);                  /* 7/8 of 240 */
	CHECK_EQ(q.pending, 0);
	/* a new qoe clears it */
	q.pending = 1;
	qoe_set(&q, 300, 8192, 990000, 370000, hist, 0, 3000000000ull);
	CHECK_EQ(q.pending, 0);
	CHECK_EQ(q.pending_stops, 0);
}

static char sbuf[8192];

static void stats_announce_qoe_free(void)
{
	struct jw w;
	click_init(2, 64, 30000);
	CHECK_EQ(click_configure("FromDevice(0) -> ToDevice(1);", 29, 0, &(struct click_err){0}), 0);
	jw_init(&w, sbuf, sizeof sbuf);
	jw_obj_begin(&w);
	click_stats_json(&w);
	jw_obj_end(&w);
	sbuf[w.len] = 0;
	CHECK_CONTAINS(sbuf, "\"slots\":{\"total\":64,\"used\":0,\"free\":64,\"rejected\":0,\"opened\":0}");
	click_qoe_set(20, 8192, 990000, 0);
	jw_init(&w, sbuf, sizeof sbuf);
	jw_obj_begin(&w);
	click_stats_json(&w);
	jw_obj_end(&w);
	sbuf[w.len] = 0;
	CHECK_CONTAINS(sbuf, "\"free\":20,\"rejected\":0,\"opened\":0,\"qoe\":{\"probed\":20,\"capacity\":20,"
		       "\"budget_ns\":8192,\"quantile_ppm\":990000,\"tail_ns\":0,\"window\":\"idle\"");
	CHECK(strstr(sbuf, "wait_ppm") == NULL);    /* no host-wait rule: not shown */
	click_qoe_set(20, 8192, 990000, 200000);
	jw_init(&w, sbuf, sizeof sbuf);
	jw_obj_begin(&w);
	click_stats_json(&w);
	jw_obj_end(&w);
	sbuf[w.len] = 0;
	CHECK_CONTAINS(sbuf, "\"tail_ns\":0,\"wait_budget_ppm\":200000,\"wait_ppm\":0,\"window\":\"idle\"");
	click_qoe_set(0, 0, 0, 0);
}

void run_qoe_tests(void)
{
	RUN(off_is_flow_table);
	RUN(free_is_min_of_table_and_capacity);
	RUN(tail_over_budget_under_load_shrinks);
	RUN(tail_over_at_light_load_holds);
	RUN(only_the_quantile_counts);
	RUN(grows_back_with_hysteresis);
	RUN(too_few_packets_is_no_evidence);
	RUN(tick_closes_windows_of_one_second);
	RUN(host_wait_over_budget_shrinks);
	RUN(host_wait_hysteresis);
	RUN(host_wait_off_is_ignored);
	RUN(tick_measures_the_windows_steal);
	RUN(a_window_over_so_far_stops_admission);
	RUN(stats_announce_qoe_free);
}
