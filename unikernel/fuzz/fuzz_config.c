/* fluidvim VNF — libFuzzer target for the configuration language and the data path.
 *
 * Input: config text, optionally followed by a NUL byte and raw frame bytes (a NUL can never be
 * part of a valid config). The target runs click_init + click_configure on the text and, if it is
 * accepted, pushes a fixed set of frames (TCP/UDP/ICMP/ARP/VLAN/fragments/truncated) plus the
 * fuzzed frame bytes (split into frames by a leading length byte) through the graph, runs the
 * scheduler with an advancing fake clock, renders the stats and checks invariants:
 *   - a rejected config has a 1-based line/col and a NUL-terminated, non-empty message, and leaves
 *     the shell unconfigured;
 *   - the stats JSON does not overflow a 64 KiB buffer and parses back as one object;
 *   - over all NICs, rx == tx + drop + (packets still queued): every packet ends exactly once;
 *   - a reconfigure with a broken config keeps the graph (element count unchanged).
 * Build and run: make -C unikernel fuzz-run FUZZ_SECONDS=300 (see FUZZING.md). */
#include <stdlib.h>
#include <stdio.h>
#include "click.h"
#include "json.h"

static uint64_t now_ns = 1000000000ull;
static long tx_count;

int plat_tx(int nic, const uint8_t *data, uint16_t len, const struct click_vh *vh)
{
	volatile uint8_t sink = 0;
	for (uint16_t i = 0; i < len; i++)      /* touch every byte: ASan checks the range */
		sink ^= data[i];
	if (vh)
		sink ^= vh->flags;
	(void)sink;
	tx_count++;
	return (nic == 1 && (tx_count % 7) == 0) ? -1 : 0;      /* sometimes the ring is full */
}

uint32_t plat_tx_room(void) { return 64; }

uint64_t plat_now_ns(void)
{
	now_ns += 1237;
	return now_ns;
}

uint64_t plat_steal_ns(void) { return now_ns / 3; }     /* the QoE correction's host wait */

static const uint8_t tcp_syn[] = {
	0x02,0,0,0,0,0xbb, 0x02,0,0,0,0,0xaa, 0x08,0x00,
	0x45,0,0,40, 0x12,0x34,0x40,0, 64,6,0,0, 10,0,0,1, 10,0,0,2,
	0x9c,0x40,0,80, 0,0,0,1, 0,0,0,0, 0x50,0x02,0xff,0xff, 0,0,0,0 };
static const uint8_t tcp_fin_rev[] = {
	0x02,0,0,0,0,0xaa, 0x02,0,0,0,0,0xbb, 0x08,0x00,
	0x45,0,0,40, 0x12,0x34,0x40,0, 64,6,0,0, 10,0,0,2, 10,0,0,1,
	0,80,0x9c,0x40, 0,0,0,1, 0,0,0,0, 0x50,0x11,0xff,0xff, 0,0,0,0 };
static const uint8_t udp53[] = {
	0x02,0,0,0,0,0xbb, 0x02,0,0,0,0,0xaa, 0x81,0x00, 0,5, 0x08,0x00,
	0x45,0,0,32, 0x12,0x34,0,0, 64,17,0,0, 192,168,1,1, 8,8,8,8,
	0x14,0xe9,0,53, 0,12,0,0, 1,2,3,4 };
static const uint8_t icmp_echo[] = {
	0x02,0,0,0,0,0xbb, 0x02,0,0,0,0,0xaa, 0x08,0x00,
	0x46,0,0,32, 0x12,0x34,0,0, 64,1,0,0, 172,16,0,1, 10,0,0,2, 1,1,1,1,
	8,0,0,0, 0,7,0,1 };
static const uint8_t frag[] = {
	0x02,0,0,0,0,0xbb, 0x02,0,0,0,0,0xaa, 0x08,0x00,
	0x45,0,0,28, 0x12,0x34,0x00,0x10, 64,17,0,0, 10,0,0,1, 10,0,0,2,
	0,53,0,53, 0,8,0,0 };
static const uint8_t arp[] = {
	0xff,0xff,0xff,0xff,0xff,0xff, 0x02,0,0,0,0,0xaa, 0x08,0x06,
	0,1,8,0,6,4,0,1, 0x02,0,0,0,0,0xaa, 10,0,0,1, 0,0,0,0,0,0, 10,0,0,2 };
static const uint8_t ip6[] = {
	0x33,0x33,0,0,0,1, 0x02,0,0,0,0,0xaa, 0x86,0xdd, 0x60,0,0,0, 0,0,58,255 };

struct frame { const uint8_t *d; uint16_t len; };
static const struct frame fixed[] = {
	{ tcp_syn, sizeof(tcp_syn) }, { tcp_fin_rev, sizeof(tcp_fin_rev) }, { udp53, sizeof(udp53) },
	{ icmp_echo, sizeof(icmp_echo) }, { frag, sizeof(frag) }, { arp, sizeof(arp) },
	{ ip6, sizeof(ip6) }, { tcp_syn, 37 }, { udp53, 20 }, { icmp_echo, 13 }, { arp, 0 },
};

static char sbuf[65536];
static char scratch[4096];

static void rx_copy(int nic, const uint8_t *d, uint16_t len)
{
	/* exact-size heap copy so ASan flags any read past the frame */
	uint8_t *p = malloc(len ? len : 1);
	if (len)
		memcpy(p, d, len);
	/* every other frame with offload metadata derived from its bytes (GSO segment counting
	 * reads the TCP header at csum_start: must stay in bounds whatever the values) */
	static unsigned n;
	if (len >= 4 && (n++ & 1)) {
		struct click_vh vh = { (uint8_t)(d[0] & 3), (uint8_t)(d[1] & 0x87), d[2], (uint16_t)(d[3] | 1),
				       (uint16_t)(len > 40 ? 34 : d[2]), 16 };
		click_rx_vh(nic, p, len, &vh);
	} else
		click_rx(nic, p, len);
	free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	size_t clen = nul ? (size_t)(nul - data) : size;
	const uint8_t *fdata = nul ? nul + 1 : NULL;
	size_t flen = nul ? size - clen - 1 : 0;

	click_init(2, 8, 50);
	struct click_err err;
	memset(&err, 0x55, sizeof(err));
	/* exact-size copy of the text: the parser must not read past len */
	char *text = malloc(clen ? clen : 1);
	memcpy(text, data, clen);
	int r = click_configure(text, clen, 0, &err);
	free(text);
	if (r != 0) {
		if (err.line < 1 || err.col < 1 || memchr(err.message, 0, sizeof(err.message)) == NULL ||
		    err.message[0] == 0 || click_configured()) {
			fprintf(stderr, "bad error report: line %d col %d\n", err.line, err.col);
			abort();
		}
		return 0;
	}
	if (!click_configured() || click_element_count() == 0 || click_element_count() > 64)
		abort();
	uint64_t rx[2] = { 0, 0 };
	for (int round = 0; round < 3; round++) {
		for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
			int nic = (int)((i + round) & 1);
			rx_copy(nic, fixed[i].d, fixed[i].len);
			rx[nic]++;
		}
		/* fuzzed frames: [len byte][bytes...] */
		size_t off = 0;
		while (fdata && off < flen) {
			uint16_t l = fdata[off++];
			if (l > flen - off)
				l = (uint16_t)(flen - off);
			rx_copy((int)(off & 1), fdata + off, l);
			rx[off & 1]++;
			off += l;
		}
		for (int k = 0; k < 4; k++)
			click_run_tasks();
		now_ns += 20000000ull;          /* 20 ms: flows time out (50 ms), buckets refill */
	}
	/* stats render and parse back */
	struct jw w;
	jw_init(&w, sbuf, sizeof(sbuf));
	jw_obj_begin(&w);
	jw_ku64(&w, "uptime_us", 1);
	jw_kbool(&w, "configured", true);
	click_stats_json(&w);
	jw_obj_end(&w);
	if (w.overflow)
		abort();
	struct jfield f[8];
	const char *jerr;
	if (json_parse_object(sbuf, w.len, f, 8, scratch, sizeof(scratch), &jerr) != 6) {
		fprintf(stderr, "stats do not parse: %s\n%s\n", jerr, sbuf);
		abort();
	}
	/* NIC invariants: tx + drop <= rx over both NICs */
	{
		uint64_t tx = 0, drop = 0, rxs = 0;
		const char *p = sbuf;
		while ((p = strstr(p, "\"rx\":")) != NULL) {         /* each NIC: {"mac":…,"rx":… */
			unsigned long long a, b, c;
			if (sscanf(p, "\"rx\":%llu,\"tx\":%llu,\"drop\":%llu", &a, &b, &c) != 3)
				abort();
			rxs += a;
			tx += b;
			drop += c;
			p++;
		}
		/* every packet ends exactly once: transmitted, dropped/discarded, or still queued */
		uint64_t queued = 0;
		p = sbuf;
		while ((p = strstr(p, "\"length\":")) != NULL) {
			unsigned long long l;
			if (sscanf(p, "\"length\":%llu", &l) != 1)
				abort();
			queued += l;
			p++;
		}
		if (rxs != rx[0] + rx[1] || tx + drop + queued != rxs) {
			fprintf(stderr, "nic invariant: rx %llu (sent %llu) tx %llu drop %llu\n",
				(unsigned long long)rxs, (unsigned long long)(rx[0] + rx[1]),
				(unsigned long long)tx, (unsigned long long)drop);
			abort();
		}
	}
	/* a broken reconfigure keeps the running graph */
	uint32_t n = click_element_count();
	if (click_configure("FromDevice(0) -> Countr", 23, 0, &err) == 0 || click_element_count() != n)
		abort();
	return 0;
}
