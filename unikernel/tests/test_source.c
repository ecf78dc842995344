/* fluidvim VNF — host tests for the traffic generator: FastUDPFlows (a source element run as an
 * engine task) and TimestampDiff (its latency and loss meter), on the fake clock and NICs of
 * harness.c. */
#include <stdlib.h>
#include "test.h"
#include "click.h"
#include "json.h"

#define MS 1000000ull
#define GEN "g :: FastUDPFlows(%s, %s, %s, 52:54:00:00:00:01, 10.0.0.1, 52:54:00:00:00:02, 10.0.0.2, %s); "

static struct click_err cerr;
static char cbuf[1024], sbuf[65536];

static bool cfgf(const char *fmt, const char *rate, const char *limit, const char *len, const char *flows)
{
	snprintf(cbuf, sizeof cbuf, fmt, rate, limit, len, flows);
	memset(&cerr, 0, sizeof cerr);
	int r = click_configure(cbuf, strlen(cbuf), 0, &cerr);
	if (r)
		fprintf(stderr, "  config rejected: %d:%d %s\n  %s\n", cerr.line, cerr.col, cerr.message, cbuf);
	return r == 0;
}

/* A rejected config: its message must contain msg. */
static void cfg_bad(const char *text, const char *msg)
{
	memset(&cerr, 0, sizeof cerr);
	int r = click_configure(text, strlen(text), 0, &cerr);
	CHECK_EQ(r, -1);
	if (r != -1 || !strstr(cerr.message, msg)) {
		t_failed_checks++;
		fprintf(stderr, "  config \"%s\": got \"%s\", expected \"%s\"\n", text, cerr.message, msg);
	}
}

static const char *stats(void)
{
	struct jw w;
	jw_init(&w, sbuf, sizeof sbuf);
	jw_obj_begin(&w);
	click_stats_json(&w);
	jw_obj_end(&w);
	CHECK(!w.overflow);
	return sbuf;
}

/* The number `key` of the element named `name` in a fresh stats reply (-1 if absent). */
static int64_t est(const char *name, const char *key)
{
	char pat[80];
	stats();
	snprintf(pat, sizeof pat, "\"name\":\"%s\"", name);
	const char *p = strstr(sbuf, pat);
	if (!p)
		return -1;
	const char *end = strchr(p, '}');
	snprintf(pat, sizeof pat, "\"%s\":", key);
	const char *k = strstr(p, pat);
	if (!k || k > end)
		return -1;
	return strtoll(k + strlen(pat), NULL, 10);
}

static uint16_t g16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint64_t g64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static uint16_t csum(const uint8_t *d, size_t n, uint32_t s)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		s += g16(d + i);
	if (n & 1)
		s += (uint32_t)d[n - 1] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/* Run scheduler rounds at time t (the fake clock stands still within a round). */
static void rounds_at(uint64_t t, int n)
{
	h_now = t;
	while (n--)
		click_run_tasks();
}

static void source_config_errors(void)
{
	click_init(2, 1024, 30000);
	cfg_bad("FastUDPFlows(10) -> ToDevice(0)", "FastUDPFlows takes (RATE, LIMIT, LENGTH");
	cfg_bad("FastUDPFlows(20000000, -1, 60, 52:54:00:00:00:01, 10.0.0.1, 52:54:00:00:00:02, 10.0.0.2, 1)"
		" -> ToDevice(0)", "RATE must be 0..10000000");
	cfg_bad("FastUDPFlows(10, -2, 60, 52:54:00:00:00:01, 10.0.0.1, 52:54:00:00:00:02, 10.0.0.2, 1)"
		" -> ToDevice(0)", "LIMIT must be a number of frames");
	cfg_bad("FastUDPFlows(10, -1, 59, 52:54:00:00:00:01, 10.0.0.1, 52:54:00:00:00:02, 10.0.0.2, 1)"
		" -> ToDevice(0)", "LENGTH must be 60..1514");
	cfg_bad("FastUDPFlows(10, -1, 60, 52:54:00:00:01, 10.0.0.1, 52:54:00:00:00:02, 10.0.0.2, 1)"
		" -> ToDevice(0)", "SRCETH must be a MAC address");
	cfg_bad("FastUDPFlows(10, -1, 60, 52:54:00:00:00:01, 10.0.0.0/24, 52:54:00:00:00:02, 10.0.0.2, 1)"
		" -> ToDevice(0)", "SRCIP must be an IPv4 address");
	cfg_bad("FastUDPFlows(10, -1, 60, 52:54:00:00:00:01, 10.0.0.1, 52:54:00:00:00:02, 10.0.0.2, 0)"
		" -> ToDevice(0)", "FLOWS must be 1..64512");
	cfg_bad("FromDevice(0) -> FastUDPFlows(10, -1, 60, 52:54:00:00:00:01, 10.0.0.1, 52:54:00:00:00:02,"
		" 10.0.0.2, 1)", "FastUDPFlows has no inputs");
	cfg_bad("FromDevice(0) -> TimestampDiff -> Discard; FromDevice(1) -> TimestampDiff -> Discard",
		"at most one TimestampDiff");
	cfg_bad("FromDevice(0) -> TimestampDiff(1) -> Discard", "TimestampDiff takes no arguments");
	CHECK(!click_configured());
	/* a generator alone is a config: it has something to send */
	CHECK(cfgf(GEN "g -> ToDevice(0)", "10", "-1", "60", "1"));
}

/* Frames at the configured rate, one per 10^9/RATE ns from the start, each a valid
 * Ethernet/IPv4/UDP frame with the stamp; flows round robin. */
static void source_paces_and_stamps(void)
{
	click_init(2, 1024, 30000);
	uint64_t t0 = h_now;
	CHECK(cfgf(GEN "g -> ToDevice(0)", "1000", "-1", "100", "3"));
	rounds_at(t0, 1);
	CHECK_EQ(h_tx_total[0], 1);                     /* the first one is due at once */
	CHECK_EQ(click_next_timer_ns(t0), t0 + 1 * MS);  /* the tickless wake-up: the next one */
	rounds_at(t0 + 10 * MS - 1, 1);
	CHECK_EQ(h_tx_total[0], 10);
	rounds_at(t0 + 10 * MS, 1);
	CHECK_EQ(h_tx_total[0], 11);
	CHECK_EQ(click_next_timer_ns(t0 + 10 * MS), t0 + 11 * MS);
	CHECK_EQ(h_nframes, 11);
	for (int i = 0; i < h_nframes; i++) {
		const uint8_t *f = h_frames[i].data, *ip = f + 14, *udp = f + 34;
		CHECK_EQ(h_frames[i].len, 100);
		CHECK_EQ(h_frames[i].has_vh, 0);
		CHECK_EQ(g16(f + 12), 0x0800);
		CHECK_EQ(f[0], 0x52);
		CHECK_EQ(f[5], 0x02);
		CHECK_EQ(f[11], 0x01);
		CHECK_EQ(csum(ip, 20, 0), 0);               /* a valid IPv4 header checksum */
		CHECK_EQ(g16(ip + 2), 86);
		CHECK_EQ(ip[9], 17);
		CHECK_EQ(g16(udp + 4), 66);
		uint32_t ph = g16(ip + 12) + g16(ip + 14) + g16(ip + 16) + g16(ip + 18) + 17u + 66u;
		CHECK_EQ(csum(udp, 66, ph), 0);             /* a valid UDP checksum */
		CHECK_EQ(g16(udp), 1024 + i % 3);           /* flow i mod 3 */
		CHECK_EQ(g16(udp + 2), 7);
		CHECK_EQ(g16(udp + 8), 0xF1D0);
		CHECK_EQ(g64(udp + 10), i);                 /* sequence number */
		CHECK_EQ(g64(udp + 18), i < 10 ? (i ? t0 + 10 * MS - 1 : t0) : t0 + 10 * MS);
	}
	CHECK_EQ(est("g", "sent"), 11);
	CHECK_EQ(est("g", "refused"), 0);
	CHECK_EQ(est("g", "missed"), 0);
	CHECK_EQ(est("g", "rate"), 1000);
	CHECK_EQ(est("g", "flows"), 3);
	CHECK_EQ(est("g", "active_ns"), 10 * MS);
	/* generated frames are no NIC's rx and not in the VNF's own latency histogram */
	CHECK_CONTAINS(stats(), "\"rx\":0,");
	CHECK_CONTAINS(sbuf, "\"latency_ns\":{\"buckets_log2\":[],\"count\":0");
}

/* A non-integer interval (3 frames/s): the remainder is carried, no drift over a second. */
static void source_rate_remainder(void)
{
	click_init(1, 1024, 30000);
	uint64_t t0 = h_now;
	CHECK(cfgf(GEN "g -> ToDevice(0)", "3", "-1", "60", "1"));
	for (uint64_t t = t0; t <= t0 + 3000 * MS; t += 1 * MS)
		rounds_at(t, 1);
	CHECK_EQ(h_tx_total[0], 10);                    /* at 0, 1/3, 2/3, 1, ..., 3 s */
}

/* LIMIT, at most SRC_BURST (32) per round, FLOWSIZE churn, a paused source. */
static void source_limit_burst_churn(void)
{
	click_init(1, 1024, 30000);
	uint64_t t0 = h_now;
	CHECK(cfgf(GEN "g -> ToDevice(0)", "1000000", "100", "60", "2"));
	rounds_at(t0 + 1 * MS, 1);
	CHECK_EQ(h_tx_total[0], 32);
	rounds_at(t0 + 1 * MS, 10);
	CHECK_EQ(h_tx_total[0], 100);                   /* LIMIT */
	/* done: no wake-up of its own, only the sessions' expiry (30 s) */
	CHECK_EQ(click_next_timer_ns(t0 + 1 * MS), t0 + 1 * MS + 30000 * MS);
	CHECK(!click_run_tasks());

	h_reset();
	click_init(1, 1024, 30000);
	h_now = t0 + 1000 * MS;
	snprintf(cbuf, sizeof cbuf, "FastUDPFlows(1000, 12, 60, 52:54:00:00:00:01, 10.0.0.1, "
		 "52:54:00:00:00:02, 10.0.0.2, 2, 3) -> ToDevice(0)");
	CHECK_EQ(click_configure(cbuf, strlen(cbuf), 0, &cerr), 0);
	rounds_at(t0 + 1011 * MS, 1);
	CHECK_EQ(h_nframes, 12);
	/* flows 0,1 round robin; after 3 frames each they take the next ports (2, 3), then 4, 5 */
	static const int port[12] = { 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3 };
	for (int i = 0; i < 12 && i < h_nframes; i++)
		CHECK_EQ(g16(h_frames[i].data + 34), 1024 + port[i]);
	CHECK_EQ(click_slots_used(), 4);                /* four sessions through ToDevice */

	h_reset();
	click_init(1, 1024, 30000);
	CHECK(cfgf(GEN "g -> ToDevice(0)", "0", "-1", "60", "1"));
	rounds_at(t0 + 2000 * MS, 3);
	CHECK_EQ(h_tx_total[0], 0);
	CHECK_EQ(click_next_timer_ns(t0 + 2000 * MS), 0);
}

/* Behind its schedule it catches up, SRC_BURST per round, up to 200 ms; a longer gap is skipped
 * (missed), not sent in one burst. A frame the egress refuses is tried again in the next round
 * (backpressure) and its sequence number stays. */
static void source_catch_up_missed_refused(void)
{
	click_init(1, 1024, 30000);
	uint64_t t0 = h_now;
	CHECK(cfgf(GEN "g -> ToDevice(0)", "1000", "-1", "60", "1"));
	rounds_at(t0, 1);
	rounds_at(t0 + 150 * MS, 1);
	CHECK_EQ(h_tx_total[0], 33);                    /* 1 + one burst */
	rounds_at(t0 + 150 * MS, 9);
	CHECK_EQ(h_tx_total[0], 151);                   /* caught up: every frame, none missed */
	CHECK_EQ(est("g", "missed"), 0);
	rounds_at(t0 + 500 * MS, 1);
	CHECK_EQ(est("g", "missed"), 349);              /* due at 151..499 ms; the one at 500 ms goes */
	CHECK_EQ(h_tx_total[0], 152);
	h_tx_fail[0] = 1;
	rounds_at(t0 + 501 * MS, 1);
	rounds_at(t0 + 502 * MS, 1);
	CHECK_EQ(est("g", "refused"), 2);
	CHECK_EQ(est("g", "sent"), 152);
	h_tx_fail[0] = 0;
	rounds_at(t0 + 503 * MS, 1);
	CHECK_EQ(est("g", "sent"), 155);                /* the refused frame and the two after it */
	CHECK_EQ(est("g", "missed"), 349);
	for (int i = 150; i < 155; i++)                 /* no gap in the sequence numbers */
		CHECK_EQ(g64(h_frames[i].data + 34 + 10), i);
	CHECK_EQ(g64(h_frames[152].data + 34 + 18), t0 + 503 * MS);
}

/* No more frames per round than the NICs have room for beyond what RX needs (plat_tx_room); frames
 * due without room keep the loop busy, and go when room comes back. */
static void source_leaves_rx_its_room(void)
{
	click_init(1, 1024, 30000);
	uint64_t t0 = h_now;
	CHECK(cfgf(GEN "g -> ToDevice(0)", "1000", "-1", "60", "1"));
	h_tx_room = 5;
	rounds_at(t0 + 20 * MS, 1);
	CHECK_EQ(h_tx_total[0], 5);
	h_tx_room = 0;
	CHECK(click_run_tasks());                       /* frames due, no room: still work */
	CHECK_EQ(h_tx_total[0], 5);
	h_tx_room = 1000;
	rounds_at(t0 + 20 * MS, 1);
	CHECK_EQ(h_tx_total[0], 21);                    /* 0..20 ms: 5 + SRC_BURST would be 37 */
	CHECK_EQ(est("g", "refused"), 0);
	CHECK_EQ(est("g", "missed"), 0);
	CHECK(!click_run_tasks());                      /* nothing due until 21 ms */
}

/* Frames back on NIC 1 after a known delay: TimestampDiff's latency, loss, stale and other. */
static void timestampdiff_measures(void)
{
	click_init(2, 1024, 30000);
	uint64_t t0 = h_now;
	CHECK(cfgf(GEN "g -> ToDevice(0); FromDevice(1) -> td :: TimestampDiff -> Discard; "
		   "td[1] -> c :: Counter -> Discard", "1000", "100", "60", "4"));
	for (int i = 0; i < 100; i++)
		rounds_at(t0 + (uint64_t)i * MS, 1);
	CHECK_EQ(h_nframes, 100);
	/* frame i comes back after (i + 1) * 10 us; frames 50 and 51 are lost */
	for (int i = 0; i < 100; i++) {
		if (i == 50 || i == 51)
			continue;
		h_now = t0 + (uint64_t)i * MS + (uint64_t)(i + 1) * 10000u;
		click_rx(1, h_frames[i].data, h_frames[i].len);
	}
	CHECK_EQ(est("td", "count"), 98);
	CHECK_EQ(est("td", "lost"), 2);
	CHECK_EQ(est("td", "min_ns"), 10000);
	CHECK_EQ(est("td", "max_ns"), 1000000);
	int64_t p50 = est("td", "p50_ns"), p99 = est("td", "p99_ns");
	/* true p50 = the 49th smallest = 490 us, p99 = the 98th value = 1000 us (nearest rank) */
	CHECK(p50 >= 490000 * 0.968 && p50 <= 490000 * 1.032);
	CHECK(p99 >= 1000000 * 0.968 && p99 <= 1000000);
	int64_t mean = est("td", "mean_ns");
	CHECK(mean > 490000 && mean < 520000);
	/* a frame stamped before this graph started (a previous step's) is stale, not measured */
	uint8_t old[60];
	memcpy(old, h_frames[0].data, 60);
	old[34 + 18 + 7] = 0;
	old[34 + 18 + 6] = 0;                           /* send time far before t0 */
	click_rx(1, old, 60);
	CHECK_EQ(est("td", "stale"), 1);
	/* anything without the stamp goes to output 1 */
	uint8_t plain[60];
	memcpy(plain, h_frames[0].data, 60);
	plain[34 + 8] = 0;
	click_rx(1, plain, 60);
	CHECK_EQ(est("td", "other"), 1);
	CHECK_EQ(est("c", "count"), 1);
	CHECK_EQ(est("td", "count"), 98);
	/* a new graph starts a new measurement */
	CHECK(cfgf(GEN "g -> ToDevice(0); FromDevice(1) -> td :: TimestampDiff -> Discard", "1000", "0",
		   "60", "4"));
	click_rx(1, h_frames[5].data, h_frames[5].len);
	CHECK_EQ(est("td", "count"), 0);
	CHECK_EQ(est("td", "stale"), 1);
	CHECK_EQ(est("td", "p99_ns"), 0);
}

/* Through a Queue: the generated frame is copied into the pool and sent by the drain. */
static void source_through_queue(void)
{
	click_init(1, 1024, 30000);
	uint64_t t0 = h_now;
	CHECK(cfgf(GEN "g -> q :: Queue(8) -> ToDevice(0)", "1000", "5", "60", "1"));
	for (int i = 0; i < 5; i++)
		rounds_at(t0 + (uint64_t)i * MS, 1);
	rounds_at(t0 + 10 * MS, 1);
	CHECK_EQ(h_tx_total[0], 5);
	for (int i = 0; i < 5; i++)
		CHECK_EQ(g64(h_frames[i].data + 34 + 10), i);
}

void run_source_tests(void)
{
	RUN(source_config_errors);
	RUN(source_paces_and_stamps);
	RUN(source_rate_remainder);
	RUN(source_limit_burst_churn);
	RUN(source_catch_up_missed_refused);
	RUN(source_leaves_rx_its_room);
	RUN(timestampdiff_measures);
	RUN(source_through_queue);
}
