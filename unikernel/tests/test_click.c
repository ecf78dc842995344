/* fluidvim VNF — host tests for the packet engine: config language, elements, sessions, stats. */
#include <stdlib.h>
#include "test.h"
#include "click.h"
#include "json.h"

/* ------------------------------------------------------------------ frames */

static const uint8_t MAC_A[6] = { 0x02, 0, 0, 0, 0, 0xaa };
static const uint8_t MAC_B[6] = { 0x02, 0, 0, 0, 0, 0xbb };
#define IP(a, b, c, d) (((uint32_t)(a) << 24) | ((uint32_t)(b) << 16) | ((uint32_t)(c) << 8) | (uint32_t)(d))
#define TH_FIN 0x01
#define TH_SYN 0x02
#define TH_RST 0x04
#define TH_PSH 0x08
#define TH_ACK 0x10

static uint8_t fr[2048];

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static void put32(uint8_t *p, uint32_t v) { put16(p, (uint16_t)(v >> 16)); put16(p + 2, (uint16_t)v); }
static uint16_t get16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static uint32_t get32(const uint8_t *p) { return ((uint32_t)get16(p) << 16) | get16(p + 2); }

static uint32_t sum16(const uint8_t *p, size_t n, uint32_t s)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		s += get16(p + i);
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	return s;
}
static uint16_t fold(uint32_t s)
{
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

static uint16_t mk_eth(uint8_t *b, uint16_t type)
{
	memcpy(b, MAC_B, 6);
	memcpy(b + 6, MAC_A, 6);
	put16(b + 12, type);
	return 14;
}

/* IPv4 header at b+off; returns the L4 offset */
static uint16_t mk_ip(uint8_t *b, uint16_t off, uint8_t proto, uint32_t s, uint32_t d, uint16_t l4len)
{
	uint8_t *ip = b + off;
	memset(ip, 0, 20);
	ip[0] = 0x45;
	put16(ip + 2, (uint16_t)(20 + l4len));
	put16(ip + 4, 0x1234);
	ip[8] = 64;
	ip[9] = proto;
	put32(ip + 12, s);
	put32(ip + 16, d);
	put16(ip + 10, fold(sum16(ip, 20, 0)));
	return (uint16_t)(off + 20);
}

static uint16_t l4_csum(const uint8_t *b, uint16_t l3)
{
	const uint8_t *ip = b + l3;
	uint16_t l4len = (uint16_t)(get16(ip + 2) - 20);
	uint32_t s = sum16(ip + 12, 8, 0) + ip[9] + l4len;
	return fold(sum16(b + l3 + 20, l4len, s));
}

static uint16_t mk_tcp(uint8_t *b, uint32_t s, uint32_t d, uint16_t sp, uint16_t dp, uint8_t flags, uint16_t plen)
{
	uint16_t l4 = mk_ip(b, mk_eth(b, 0x0800), 6, s, d, (uint16_t)(20 + plen));
	uint8_t *t = b + l4;
	memset(t, 0, 20);
	put16(t, sp);
	put16(t + 2, dp);
	put32(t + 4, 1000);
	t[12] = 0x50;
	t[13] = flags;
	put16(t + 14, 65535);
	for (uint16_t i = 0; i < plen; i++)
		t[20 + i] = (uint8_t)('a' + i % 26);
	put16(t + 16, l4_csum(b, 14));
	return (uint16_t)(l4 + 20 + plen);
}

static uint16_t mk_udp(uint8_t *b, uint32_t s, uint32_t d, uint16_t sp, uint16_t dp, uint16_t plen)
{
	uint16_t l4 = mk_ip(b, mk_eth(b, 0x0800), 17, s, d, (uint16_t)(8 + plen));
	uint8_t *u = b + l4;
	put16(u, sp);
	put16(u + 2, dp);
	put16(u + 4, (uint16_t)(8 + plen));
	put16(u + 6, 0);
	for (uint16_t i = 0; i < plen; i++)
		u[8 + i] = (uint8_t)i;
	put16(u + 6, l4_csum(b, 14));
	return (uint16_t)(l4 + 8 + plen);
}

static uint16_t mk_icmp(uint8_t *b, uint32_t s, uint32_t d, uint8_t type, uint16_t id)
{
	uint16_t l4 = mk_ip(b, mk_eth(b, 0x0800), 1, s, d, 16);
	uint8_t *c = b + l4;
	memset(c, 0, 16);
	c[0] = type;
	put16(c + 4, id);
	put16(c + 6, 1);
	put16(c + 2, fold(sum16(c, 16, 0)));
	return (uint16_t)(l4 + 16);
}

static uint16_t mk_arp(uint8_t *b)
{
	uint16_t o = mk_eth(b, 0x0806);
	memset(b, 0xff, 6);
	static const uint8_t arp[28] = { 0, 1, 8, 0, 6, 4, 0, 1, 0x02, 0, 0, 0, 0, 0xaa, 10, 0, 0, 1,
					 0, 0, 0, 0, 0, 0, 10, 0, 0, 2 };
	memcpy(b + o, arp, 28);
	return (uint16_t)(o + 28);
}

/* ------------------------------------------------------------------ helpers */

static struct click_err cerr;

static bool cfg(const char *text, uint32_t slots)
{
	memset(&cerr, 0, sizeof(cerr));
	int r = click_configure(text, strlen(text), slots, &cerr);
	if (r != 0)
		fprintf(stderr, "  config rejected: %d:%d %s\n", cerr.line, cerr.col, cerr.message);
	return r == 0;
}
#define CFG_OK(text) CHECK(cfg(text, 0))

/* Expect an error at line:col whose message contains `msg`; the running graph must be unchanged. */
static void cfg_err_at(const char *file, int lineno, const char *text, size_t len, int line, int col, const char *msg)
{
	bool was = click_configured();
	uint32_t n = click_element_count();
	memset(&cerr, 0, sizeof(cerr));
	int r = click_configure(text, len, 0, &cerr);
	if (r != -1 || cerr.line != line || cerr.col != col || !strstr(cerr.message, msg) ||
	    click_configured() != was || click_element_count() != n) {
		t_failed_checks++;
		fprintf(stderr, "  %s:%d: config \"%s\": got r=%d %d:%d \"%s\"; expected %d:%d containing \"%s\"\n",
			file, lineno, text, r, cerr.line, cerr.col, cerr.message, line, col, msg);
	}
	CHECK(strlen(cerr.message) < sizeof(cerr.message));
}
#define CFG_ERR(text, line, col, msg) cfg_err_at(__FILE__, __LINE__, text, strlen(text), line, col, msg)

static char sbuf[65536];
static char scr[4096];

static const char *stats(void)
{
	struct jw w;
	jw_init(&w, sbuf, sizeof(sbuf));
	jw_obj_begin(&w);
	jw_ku64(&w, "uptime_us", 1);
	jw_kbool(&w, "configured", click_configured());
	click_stats_json(&w);
	jw_obj_end(&w);
	CHECK(!w.overflow);
	struct jfield top[8];
	const char *err = NULL;
	int n = json_parse_object(sbuf, w.len, top, 8, scr, sizeof(scr), &err);
	CHECK_EQ(n, 6);
	if (n == 6) {
		CHECK_STR(top[2].key, "slots");
		CHECK_STR(top[3].key, "nics");
		CHECK_STR(top[4].key, "elements");
		CHECK_STR(top[5].key, "latency_ns");
		for (int i = 2; i < 6; i++)
			CHECK(top[i].type == JT_OTHER);
	}
	return sbuf;
}

/* Find the end of the balanced {...} or [...] at p (our stats contain no braces inside strings). */
static const char *balanced_end(const char *p)
{
	int depth = 0;
	for (; *p; p++) {
		if (*p == '{' || *p == '[')
			depth++;
		else if (*p == '}' || *p == ']') {
			if (--depth == 0)
				return p + 1;
		}
	}
	return NULL;
}

static struct jfield sf[24];
static char sscr[4096];

/* Parse the object value of "key" (nth < 0) or the nth object in the array value of "key". */
static int sub(const char *json, const char *key, int nth)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	const char *p = strstr(json, pat);
	if (!p)
		return -1;
	p += strlen(pat);
	if (nth >= 0) {
		if (*p != '[')
			return -1;
		p++;
		for (int i = 0; i < nth; i++) {
			if (*p != '{')
				return -1;
			p = balanced_end(p);
			if (!p || *p != ',')
				return -1;
			p++;
		}
	}
	if (*p != '{')
		return -1;
	const char *e = balanced_end(p);
	const char *err = NULL;
	return json_parse_object(p, (size_t)(e - p), sf, 24, sscr, sizeof(sscr), &err);
}

static int64_t num(int n, const char *key)
{
	const struct jfield *f = json_get(sf, n, key);
	if (!f || f->type != JT_NUMBER) {
		fprintf(stderr, "  no number '%s'\n", key);
		return -999;
	}
	return f->num;
}

/* The element object named `name` in stats; returns field count or -1. */
static int elem(const char *name)
{
	for (int i = 0; i < 64; i++) {
		int n = sub(sbuf, "elements", i);
		if (n < 0)
			return -1;
		const struct jfield *f = json_get(sf, n, "name");
		if (f && f->type == JT_STRING && strcmp(f->str, name) == 0)
			return n;
	}
	return -1;
}

static int64_t nic_stat(int nic, const char *key)
{
	stats();
	return num(sub(sbuf, "nics", nic), key);
}

static int64_t elem_stat(const char *name, const char *key)
{
	stats();
	int n = elem(name);
	if (n < 0) {
		fprintf(stderr, "  no element '%s'\n", name);
		return -999;
	}
	return num(n, key);
}

static int64_t slot_stat(const char *key)
{
	stats();
	return num(sub(sbuf, "slots", -1), key);
}

/* ------------------------------------------------------------------ parser */

static const char *EXAMPLE =
	"// comments run to end of line; statements end with ';' or a newline\n"
	"fw :: IPFilter(allow tcp dst port 80, allow arp, deny all);\n"
	"FromDevice(0) -> Classifier(ip proto tcp, arp) -> fw -> Counter -> ToDevice(1);\n"
	"FromDevice(1) -> ToDevice(0);\n"
	"c :: Classifier(ip, -);  c[1] -> Discard;\n";

static void parse_protocol_examples(void)
{
	click_init(2, 1024, 30000);
	CHECK(!click_configured());
	CHECK_EQ(click_element_count(), 0);
	CFG_OK(EXAMPLE);
	CHECK(click_configured());
	CHECK_EQ(click_element_count(), 9);
	stats();
	CHECK(elem("fw") >= 0);
	CHECK(elem("Classifier@3") >= 0);
	CHECK(elem("Counter@4") >= 0);
	CHECK(elem("c") >= 0);
	CHECK(elem("Discard@9") >= 0);
	CHECK(elem("FromDevice@2") < 0);        /* devices are reported as NIC counters */

	CFG_OK("FromDevice(0) -> Counter -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);");
	CHECK_EQ(click_element_count(), 5);
	stats();
	CHECK(elem("Counter@2") >= 0);
	CFG_OK("q :: Queue(64); FromDevice(0) -> q -> ToDevice(1)");
	CHECK_EQ(elem_stat("q", "capacity"), 64);
	CHECK_EQ(elem_stat("q", "length"), 0);
}

static void parse_syntax_variants(void)
{
	click_init(4, 1024, 30000);
	/* multi-line chains, both comment styles, decl in chain, explicit ports, empty parens */
	CFG_OK("/* header\n comment */\n"
	       "FromDevice(0)\n"
	       "  -> cnt :: Counter()   // counts\n"
	       "  -> [0] cl :: Classifier(\n"
	       "       ip and tcp and dst port 80-88,  // web\n"
	       "       arp, /* anything else */ -)\n"
	       "  -> ToDevice(1);\n"
	       "cl[1] -> [0]ToDevice(1)\n"
	       "cl [2] ->\n"
	       "   Discard\n"
	       "FromDevice(1) -> EtherMirror -> ToDevice(1); FromDevice(2) -> Queue -> RateLimiter(5) -> ToDevice(3)\n"
	       "FromDevice(3) -> IPFilter(allow src net 10.0.0.0/8 and not udp, allow ethertype 0x86dd, deny all) -> ToDevice(2);;\n");
	CHECK_EQ(click_element_count(), 16);
	stats();
	CHECK_EQ(elem_stat("Queue@11", "capacity"), 1000);
	/* CRLF line endings, tabs, trailing statement without terminator */
	CFG_OK("\tFromDevice(0)\t->\tToDevice(1);\r\nFromDevice(1) -> ToDevice(0)\r\n");
	CHECK_EQ(click_element_count(), 4);
	/* several connections into one input are fine */
	CFG_OK("c :: Counter -> ToDevice(1); FromDevice(0) -> c; FromDevice(1) -> c;");
	CHECK_EQ(click_element_count(), 4);
	/* a cycle through a Queue is allowed */
	CFG_OK("q :: Queue(8); FromDevice(0) -> q -> Counter -> q;");
	/* a cycle without a Queue is not */
	CFG_ERR("a :: Counter; b :: Counter; FromDevice(0) -> a -> b -> a;", 1, 53,
		"connection cycle b -> a does not pass through a Queue");
}

static void parse_errors(void)
{
	click_init(2, 1024, 30000);
	/* errors while unconfigured keep the shell unconfigured */
	CFG_ERR("", 1, 1, "empty config: nothing to run");
	CHECK(!click_configured());
	CFG_OK("FromDevice(0) -> ToDevice(1);");
	CFG_ERR("// only a comment\n  \n", 1, 1, "empty config");
	CFG_ERR("FromDevice(0) -> Countr -> ToDevice(1);", 1, 18,
		"unknown element class 'Countr' (known: FromDevice, ToDevice, Counter, Classifier, IPFilter, "
		"Queue, RateLimiter, EtherMirror, Discard, ARPResponder, FastUDPFlows, TimestampDiff)");
	CFG_ERR("FromDevice(0)\n  -> Counter\n  -> Countr\n  -> ToDevice(1);", 3, 6, "unknown element class 'Countr'");
	CFG_ERR("FromDevice(0) -> /* \xc3\xa9 */ Countr", 1, 26, "unknown element class 'Countr'");
	CFG_ERR("x :: Countr;", 1, 6, "unknown element class 'Countr'");
	CFG_ERR("FromDevice(0) -> Countr(1)", 1, 18, "unknown element class 'Countr'");
	CFG_ERR("FromDevice(5) -> ToDevice(1);", 1, 12, "FromDevice(5): NIC 5 does not exist (this VNF has 2 NICs: 0..1)");
	CFG_ERR("FromDevice(0) -> ToDevice(9);", 1, 27, "ToDevice(9): NIC 9 does not exist (this VNF has 2 NICs: 0..1)");
	CFG_ERR("FromDevice(x) -> ToDevice(1);", 1, 12, "FromDevice: NIC index must be a number, got 'x'");
	CFG_ERR("FromDevice -> ToDevice(1);", 1, 1, "FromDevice needs a NIC index, e.g. FromDevice(0)");
	CFG_ERR("FromDevice(0, 1) -> ToDevice(1);", 1, 14, "FromDevice takes one argument (a NIC index), got 2");
	CFG_ERR("FromDevice(0) -> c :: Counter -> ToDevice(1);\nc -> Discard;", 2, 3,
		"c output 0 connected twice (first at line 1 col 31)");
	CFG_ERR("src :: FromDevice(0); src -> ToDevice(1); src -> Discard", 1, 47, "src output 0 connected twice");
	CFG_ERR("FromDevice(0) -> fw -> ToDevice(1);\nfw :: IPFilter(allow all);", 1, 18,
		"element 'fw' used before declaration (declared at line 2 col 1");
	CFG_ERR("FromDevice(0) -> fw -> ToDevice(1);", 1, 18, "element 'fw' is undeclared");
	CFG_ERR("FromDevice(0) -> ToDevice(1) -> Counter;", 1, 30, "ToDevice has no outputs");
	CFG_ERR("FromDevice(0) -> Discard -> Counter;", 1, 26, "Discard has no outputs");
	CFG_ERR("FromDevice(0) -> FromDevice(1);", 1, 18, "FromDevice has no inputs");
	CFG_ERR("FromDevice(0) -> IPFilter(allow tcp, permit udp) -> ToDevice(1);", 1, 38,
		"IPFilter rule 2: expected 'allow' or 'deny', got 'permit'");
	CFG_ERR("FromDevice(0) -> IPFilter(allow) -> ToDevice(1);", 1, 27, "IPFilter rule 1: 'allow' needs a match expression");
	CFG_ERR("FromDevice(0) -> IPFilter() -> ToDevice(1);", 1, 18, "IPFilter needs rules");
	CFG_ERR("FromDevice(0) -> Queue(0) -> ToDevice(1);", 1, 24, "Queue capacity must be 1..4096");
	CFG_ERR("FromDevice(0) -> Queue(5000) -> ToDevice(1);", 1, 24, "Queue capacity must be 1..4096, got '5000'");
	CFG_ERR("FromDevice(0) -> Queue(big) -> ToDevice(1);", 1, 24, "Queue capacity must be 1..4096, got 'big'");
	CFG_ERR("FromDevice(0) -> Queue(1 2) -> ToDevice(1);", 1, 26, "Queue capacity: unexpected '2' after '1'");
	CFG_ERR("FromDevice(0) -> RateLimiter(0) -> ToDevice(1);", 1, 30, "RateLimiter rate must be > 0");
	CFG_ERR("FromDevice(0) -> RateLimiter(10, 0) -> ToDevice(1);", 1, 34, "RateLimiter burst must be 1..1000000");
	CFG_ERR("FromDevice(0) -> RateLimiter -> ToDevice(1);", 1, 18, "RateLimiter takes (rate [, burst])");
	CFG_ERR("FromDevice(0) -> ToDevice(1);\nFromDevice(0) -> Discard;", 2, 1,
		"FromDevice(0) declared twice (each NIC may have one FromDevice");
	CFG_ERR("c :: Counter; c -> ToDevice(1);", 1, 1, "config has no FromDevice: nothing would be forwarded");
	CFG_ERR("FromDevice(0) -> [1] ToDevice(1);", 1, 18, "ToDevice@2 has only input [0]; input [1] does not exist");
	CFG_ERR("FromDevice(0)[1] -> ToDevice(1);", 1, 14, "FromDevice@1 has 1 output ([0]); output [1] does not exist");
	CFG_ERR("FromDevice(0) -> c :: Classifier(ip, -); c[2] -> Discard", 1, 43,
		"c has 2 outputs ([0]..[1]); output [2] does not exist");
	CFG_ERR("FromDevice(0)[x] -> ToDevice(1);", 1, 14, "expected a port number in '[ ]'");
	CFG_ERR("FromDevice(0)[300] -> ToDevice(1);", 1, 15, "port number '300' is too large");
	CFG_ERR("FromDevice(0)[1 -> ToDevice(1);", 1, 17, "expected ']' after port number");
	CFG_ERR("[0] FromDevice(0) -> ToDevice(1);", 1, 1, "a chain cannot start with an input port");
	CFG_ERR("FromDevice(0) -> c :: Classifier(ip, -) -> ToDevice(1); c[1];", 1, 58, "output [1] of c is not connected");
	CFG_ERR("FromDevice(0) -> /* unterminated", 1, 18, "unterminated /* comment");
	CFG_ERR("FromDevice(0 -> ToDevice(1);", 1, 11, "missing ')' for the '(' of FromDevice opened here");
	CFG_ERR("# comment\nFromDevice(0) -> ToDevice(1);", 1, 1, "unexpected '#' (comments start with //)");
	CFG_ERR("FromDevice(0) => ToDevice(1);", 1, 15, "unexpected character '='");
	CFG_ERR("FromDevice(0) - ToDevice(1);", 1, 15, "unexpected '-' (connections are written '->')");
	CFG_ERR("c : Counter;", 1, 3, "unexpected ':' (declarations use '::'");
	CFG_ERR("FromDevice(0), ToDevice(1);", 1, 14, "unexpected ',' outside parentheses");
	CFG_ERR("FromDevice(0) ->", 1, 17, "expected an element after '->', got end of config");
	CFG_ERR("FromDevice(0) -> ;", 1, 18, "expected an element after '->', got ';'");
	CFG_ERR("FromDevice(0) Counter", 1, 15, "expected '->', ';' or a newline, got 'Counter'");
	CFG_ERR("-> Counter", 1, 1, "expected an element (e.g. 'FromDevice(0)'), got '->'");
	CFG_ERR("x :: Counter; x :: Counter;", 1, 15, "element 'x' declared twice (first at line 1 col 1)");
	CFG_ERR("Counter :: Counter;", 1, 1, "'Counter' is a class name; choose another element name (e.g. 'counter')");
	CFG_ERR("x :: ;", 1, 6, "expected a class name after '::', got ';'");
	CFG_ERR("FromDevice(0) -> Counter(5) -> ToDevice(1)", 1, 26, "Counter takes no arguments");
	CFG_ERR("c :: Counter; FromDevice(0) -> c(1)", 1, 33, "'c' is an element, not a class");
	CFG_ERR("FromDevice(0) -> Classifier(ip, , arp) -> ToDevice(1);", 1, 33, "Classifier argument 2 is empty");
	CFG_ERR("FromDevice(0) -> Classifier(ip, tpc) -> ToDevice(1);", 1, 33, "Classifier pattern 2: unknown term 'tpc'");
	CFG_ERR("FromDevice(0) -> Classifier(src host 10.0.0.300) -> ToDevice(1);", 1, 38,
		"Classifier pattern 1: bad host address '10.0.0.300'");
	CFG_ERR("FromDevice(0) -> Classifier(dst net 10.0.0.0/33) -> ToDevice(1);", 1, 37,
		"bad network '10.0.0.0/33' (expected A.B.C.D/L, L = 0..32)");
	CFG_ERR("FromDevice(0) -> Classifier(dst net 10.0.0.0) -> ToDevice(1);", 1, 37, "bad network '10.0.0.0'");
	CFG_ERR("FromDevice(0) -> Classifier(dst port 70000) -> ToDevice(1);", 1, 38, "bad port '70000'");
	CFG_ERR("FromDevice(0) -> Classifier(port 90-80) -> ToDevice(1);", 1, 34, "bad port '90-80'");
	CFG_ERR("FromDevice(0) -> Classifier(src 1.2.3.4) -> ToDevice(1);", 1, 33, "expected 'host', 'net' or 'port' after 'src'");
	CFG_ERR("FromDevice(0) -> Classifier(ip proto gre) -> ToDevice(1);", 1, 38, "unknown protocol 'gre'");
	CFG_ERR("FromDevice(0) -> Classifier(ethertype 0x1ffff) -> ToDevice(1);", 1, 39, "bad ethertype '0x1ffff'");
	CFG_ERR("FromDevice(0) -> Classifier(ip and) -> ToDevice(1);", 1, 32, "'and' at the end needs a term after it");
	CFG_ERR("FromDevice(0) -> Classifier(and ip) -> ToDevice(1);", 1, 29, "'and' must join two terms");
	CFG_ERR("FromDevice(0) -> Classifier(not) -> ToDevice(1);", 1, 29, "'not' must be followed by a term");
	CFG_ERR("FromDevice(0) -> Classifier(tcp port) -> ToDevice(1);", 1, 33, "'port' needs a value, e.g. 'port 80'");
	CFG_ERR("FromDevice(0) -> Classifier(ip and ip and ip and ip and ip and ip and ip and ip and ip) -> ToDevice(1);",
		1, 85, "too many terms (max 8)");
	CFG_ERR("FromDevice(0) -> Classifier(a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q) -> ToDevice(1);", 1, 61,
		"Classifier has 17 patterns; at most 16 are supported");
	CFG_ERR("averyveryveryverylongelementname1 :: Counter", 1, 1, "is too long (max 31 characters)");
	{
		static const char nul[] = "FromDevice(0)\0 -> ToDevice(1)";
		cfg_err_at(__FILE__, __LINE__, nul, sizeof(nul) - 1, 1, 14, "unexpected byte 0x00");
	}
	/* too many elements */
	{
		static char big[2048];
		strcpy(big, "FromDevice(0)");
		for (int i = 0; i < 64; i++)
			strcat(big, "->Counter");
		CFG_ERR(big, 1, 14 + 63 * 9 + 2, "too many elements (max 64)");
	}
	/* slots out of range */
	CHECK_EQ(click_configure("FromDevice(0) -> ToDevice(1)", 28, 65537, &cerr), -1);
	CHECK_EQ(cerr.line, 0);
	CHECK_STR(cerr.message, "slots must be 1..65536");
	/* one NIC / no NICs */
	click_init(1, 16, 1000);
	CFG_ERR("FromDevice(1) -> ToDevice(0);", 1, 12, "NIC 1 does not exist (this VNF has 1 NIC: 0)");
	click_init(0, 16, 1000);
	CFG_ERR("FromDevice(0) -> ToDevice(0);", 1, 12, "NIC 0 does not exist (this VNF has no NICs)");
	/* a NULL text is an empty config */
	CHECK_EQ(click_configure(NULL, 0, 0, &cerr), -1);
	CHECK_CONTAINS(cerr.message, "empty config");
}

/* ------------------------------------------------------------------ forwarding */

static void forward_basic(void)
{
	click_init(2, 1024, 30000);
	uint16_t n = mk_arp(fr);
	click_rx(0, fr, n);                     /* unconfigured: counted as a drop */
	CHECK_EQ(h_tx_total[1], 0);
	CHECK_EQ(nic_stat(0, "rx"), 1);
	CHECK_EQ(nic_stat(0, "drop"), 1);
	CFG_OK("FromDevice(0) -> Counter -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);");
	click_rx(0, fr, n);
	CHECK_EQ(h_nframes, 1);
	CHECK_EQ(h_frames[0].nic, 1);
	CHECK_EQ(h_frames[0].len, n);
	CHECK(memcmp(h_frames[0].data, fr, n) == 0);
	uint16_t t = mk_tcp(fr, IP(10, 0, 0, 1), IP(10, 0, 0, 2), 40000, 80, TH_SYN, 0);
	click_rx(0, fr, t);
	CHECK_EQ(h_nframes, 2);
	CHECK(memcmp(h_frames[1].data, fr, t) == 0);
	uint16_t r = mk_tcp(fr, IP(10, 0, 0, 2), IP(10, 0, 0, 1), 80, 40000, TH_SYN | TH_ACK, 0);
	click_rx(1, fr, r);
	CHECK_EQ(h_nframes, 3);
	CHECK_EQ(h_frames[2].nic, 0);
	click_rx(7, fr, r);                     /* a NIC that does not exist is ignored */
	click_rx(-1, fr, r);
	CHECK_EQ(h_nframes, 3);
	CHECK_EQ(elem_stat("Counter@2", "count"), 2);
	CHECK_EQ(elem_stat("Counter@2", "bytes"), n + t);
	CHECK_EQ(nic_stat(0, "rx"), 3);
	CHECK_EQ(nic_stat(0, "rx_bytes"), 2 * n + t);
	CHECK_EQ(nic_stat(0, "drop"), 1);
	CHECK_EQ(nic_stat(1, "tx"), 2);
	CHECK_EQ(nic_stat(1, "tx_bytes"), n + t);
	CHECK_EQ(nic_stat(1, "rx"), 1);
	CHECK_EQ(nic_stat(0, "tx"), 1);
	CHECK_EQ(slot_stat("used"), 1);         /* SYN and SYN-ACK are one session */
	/* TX failure counts as a drop on the ingress NIC */
	h_tx_fail[1] = 1;
	click_rx(0, fr, t);
	CHECK_EQ(nic_stat(0, "drop"), 2);
	CHECK_EQ(nic_stat(1, "tx"), 2);
	/* NULL data is an empty frame */
	click_rx(0, NULL, 10);
	CHECK_EQ(nic_stat(0, "rx"), 5);
}

static void ipfilter_rules(void)
{
	click_init(2, 1024, 30000);
	CFG_OK("fw :: IPFilter(allow tcp dst port 80, allow arp, deny all);\n"
	       "FromDevice(0) -> fw -> ToDevice(1);");
	uint16_t n = mk_tcp(fr, IP(10, 0, 0, 1), IP(10, 0, 0, 2), 40000, 80, TH_SYN, 0);
	click_rx(0, fr, n);
	CHECK_EQ(h_tx_total[1], 1);
	n = mk_tcp(fr, IP(10, 0, 0, 1), IP(10, 0, 0, 2), 40000, 22, TH_SYN, 0);
	click_rx(0, fr, n);
	CHECK_EQ(h_tx_total[1], 1);             /* denied, output 1 unconnected: dropped */
	n = mk_udp(fr, IP(10, 0, 0, 1), IP(10, 0, 0, 2), 40000, 80, 4);
	click_rx(0, fr, n);
	CHECK_EQ(h_tx_total[1], 1);             /* udp to 80 is not 'tcp dst port 80' */
	n = mk_arp(fr);
	click_rx(0, fr, n);
	CHECK_EQ(h_tx_total[1], 2);
	CHECK_EQ(elem_stat("fw", "allowed"), 2);
	CHECK_EQ(elem_stat("fw", "denied"), 2);
	CHECK_EQ(elem_stat("fw", "unmatched"), 0);
	CHECK_EQ(nic_stat(0, "drop"), 2);
	/* deny to output 1 when connected; no matching rule drops */
	CFG_OK("fw :: IPFilter(allow src host 10.0.0.1 and udp, deny src net 192.168.0.0/16);\n"
	       "FromDevice(0) -> fw -> ToDevice(1); fw[1] -> d :: Counter -> Discard;");
	n = mk_udp(fr, IP(10, 0, 0, 1), IP(10, 0, 0, 2), 1, 2, 0);
	click_rx(0, fr, n);
	n = mk_udp(fr, IP(192, 168, 7, 1), IP(10, 0, 0, 2), 1, 2, 0);
	click_rx(0, fr, n);
	n = mk_udp(fr, IP(172, 16, 0, 1), IP(10, 0, 0, 2), 1, 2, 0);
	click_rx(0, fr, n);
	CHECK_EQ(h_tx_total[1], 3);
	CHECK_EQ(elem_stat("d", "count"), 1);
	CHECK_EQ(elem_stat("Discard@5", "count"), 1);
	CHECK_EQ(elem_stat("fw", "allowed"), 1);
	CHECK_EQ(elem_stat("fw", "denied"), 1);
	CHECK_EQ(elem_stat("fw", "unmatched"), 1);
}

static void classifier_outputs(void)
{
	click_init(2, 1024, 30000);
	CFG_OK("c :: Classifier(ip proto tcp, arp, icmp, udp and dst port 53, ip6, -);\n"
	       "FromDevice(0) -> c -> t :: Counter -> ToDevice(1);\n"
	       "c[1] -> a :: Counter -> ToDevice(1);\n"
	       "c[2] -> i :: Counter -> Discard;\n"
	       "c[3] -> dns :: Counter -> ToDevice(1);\n"
	       "c[5] -> rest :: Counter -> Discard;\n");
	uint16_t n;
	n = mk_tcp(fr, IP(1, 1, 1, 1), IP(2, 2, 2, 2), 1, 2, TH_SYN, 0); click_rx(0, fr, n);
	n = mk_arp(fr); click_rx(0, fr, n);
	n = mk_arp(fr); click_rx(0, fr, n);
	n = mk_icmp(fr, IP(1, 1, 1, 1), IP(2, 2, 2, 2), 8, 7); click_rx(0, fr, n);
	n = mk_udp(fr, IP(1, 1, 1, 1), IP(2, 2, 2, 2), 5353, 53, 10); click_rx(0, fr, n);
	n = mk_udp(fr, IP(1, 1, 1, 1), IP(2, 2, 2, 2), 5353, 54, 10); click_rx(0, fr, n);
	n = mk_eth(fr, 0x86dd); memset(fr + n, 0x60, 40); click_rx(0, fr, (uint16_t)(n + 40));
	n = mk_eth(fr, 0x88cc); click_rx(0, fr, 60);
	CHECK_EQ(elem_stat("t", "count"), 1);
	CHECK_EQ(elem_stat("a", "count"), 2);
	CHECK_EQ(elem_stat("i", "count"), 1);
	CHECK_EQ(elem_stat("dns", "count"), 1);
	CHECK_EQ(elem_stat("rest", "count"), 2);
	stats();
	CHECK_CONTAINS(sbuf, "{\"name\":\"c\",\"class\":\"Classifier\",\"outputs\":[1,2,1,1,1,2],\"unmatched\":0}");
	CHECK_EQ(h_tx_total[1], 4);
	CHECK_EQ(nic_stat(0, "drop"), 4);       /* 1 icmp + 2 rest discarded, ip6 output unconnected */
	/* no pattern matches: dropped and counted */
	CFG_OK("FromDevice(0) -> c :: Classifier(arp) -> ToDevice(1);");
	n = mk_udp(fr, IP(1, 1, 1, 1), IP(2, 2, 2, 2), 1, 2, 0);
	click_rx(0, fr, n);
	CHECK_EQ(elem_stat("c", "unmatched"), 1);
}

static void match_details(void)
{
	click_init(2, 1024, 30000);
	CFG_OK("c :: Classifier(src host 10.0.0.1, dst port 53, port 8000-8010, net 172.16.0.0/12, "
	       "ethertype 0x0806, not ip, -);\n"
	       "FromDevice(0) -> c -> Discard; c[1] -> Discard; c[2] -> Discard; c[3] -> Discard; "
	       "c[4] -> Discard; c[5] -> Discard; c[6] -> Discard;");
	uint16_t n;
	/* VLAN-tagged IPv4 from 10.0.0.1 matches src host */
	n = mk_udp(fr + 4, IP(10, 0, 0, 1), IP(10, 0, 0, 2), 1, 2, 0);
	memmove(fr, fr + 4, 12);
	put16(fr + 12, 0x8100);
	put16(fr + 14, 0x0064);
	put16(fr + 16, 0x0800);
	click_rx(0, fr, (uint16_t)(n + 4));
	/* a non-first fragment never matches port terms */
	n = mk_udp(fr, IP(10, 9, 9, 9), IP(10, 0, 0, 2), 1000, 53, 8);
	put16(fr + 14 + 6, 0x0010);             /* fragment offset 16*8 */
	click_rx(0, fr, n);
	/* ... but the first fragment does (MF set, offset 0) */
	n = mk_udp(fr, IP(10, 9, 9, 9), IP(10, 0, 0, 2), 1000, 53, 8);
	put16(fr + 14 + 6, 0x2000);
	click_rx(0, fr, n);
	/* port range either direction */
	n = mk_tcp(fr, IP(10, 9, 9, 9), IP(10, 0, 0, 2), 8005, 40000, TH_SYN, 0);
	click_rx(0, fr, n);
	/* net in either direction */
	n = mk_tcp(fr, IP(10, 9, 9, 9), IP(172, 31, 255, 1), 1, 2, TH_SYN, 0);
	click_rx(0, fr, n);
	n = mk_arp(fr);
	click_rx(0, fr, n);
	n = mk_eth(fr, 0x86dd);
	click_rx(0, fr, 60);                    /* not ip */
	/* IPv4 with a bad header (IHL 4) does not match host/port terms: falls to '-' */
	n = mk_udp(fr, IP(10, 0, 0, 1), IP(10, 0, 0, 2), 1, 53, 0);
	fr[14] = 0x44;
	click_rx(0, fr, n);
	/* IPv4 with options (IHL 6): ports found after the options */
	n = mk_udp(fr, IP(10, 9, 9, 9), IP(10, 0, 0, 2), 1, 53, 4);
	memmove(fr + 38, fr + 34, (size_t)(n - 34));
	memset(fr + 34, 1, 4);
	fr[14] = 0x46;
	put16(fr + 16, (uint16_t)(get16(fr + 16) + 4));
	click_rx(0, fr, (uint16_t)(n + 4));
	stats();
	CHECK_CONTAINS(sbuf, "\"outputs\":[1,2,1,1,1,1,2]");
}

static void queue_bound_and_drain(void)
{
	click_init(2, 1024, 30000);
	CFG_OK("FromDevice(0) -> q :: Queue(4) -> ToDevice(1);");
	uint16_t n;
	for (int i = 0; i < 6; i++) {
		n = mk_udp(fr, IP(10, 0, 0, 1), IP(10, 0, 0, 2), (uint16_t)(1000 + i), 53, 0);
		click_rx(0, fr, n);
	}
	CHECK_EQ(h_tx_total[1], 0);
	CHECK_EQ(elem_stat("q", "length"), 4);
	CHECK_EQ(elem_stat("q", "drops"), 2);
	CHECK_EQ(elem_stat("q", "highwater"), 4);
	CHECK_EQ(elem_stat("q", "capacity"), 4);
	CHECK_EQ(nic_stat(0, "drop"), 2);
	h_now += 5000;                          /* time spent in the queue counts as latency */
	CHECK(click_run_tasks());
	CHECK_EQ(h_tx_total[1], 4);
	for (int i = 0; i < 4; i++)             /* FIFO order */
		CHECK_EQ(get16(h_frames[i].data + 34), 1000 + i);
	CHECK_EQ(elem_stat("q", "length"), 0);
	CHECK_EQ(elem_stat("q", "highwater"), 4);
	CHECK(!click_run_tasks());
	stats();
	CHECK_CONTAINS(sbuf, "\"latency_ns\":{\"buckets_log2\":[0,0,0,0,0,0,0,0,0,0,0,0,4],\"count\":4,"
			     "\"p50\":4096,\"p99\":4096}");
	/* the packet pool (1024 buffers) bounds what all queues hold together */
	CFG_OK("FromDevice(0) -> q :: Queue(4096) -> ToDevice(1);");
	n = mk_arp(fr);
	for (int i = 0; i < 1100; i++)
		click_rx(0, fr, n);
	CHECK_EQ(elem_stat("q", "length"), 1024);
	CHECK_EQ(elem_stat("q", "drops"), 76);
	/* frames longer than a pool buffer (GSO superframes) are queued in a chain of buffers */
	static uint8_t big[3000];
	memcpy(big, fr, n);
	for (size_t i = (size_t)n; i < sizeof big; i++)
		big[i] = (uint8_t)(i * 7);
	CFG_OK("FromDevice(0) -> q :: Queue(10) -> ToDevice(1);");
	int before = (int)nic_stat(0, "drop");
	CHECK_EQ(before, 2 + 76 + 1024);        /* reconfigure released the 1024 queued frames as drops */
	click_rx(0, big, sizeof(big));
	CHECK_EQ(elem_stat("q", "drops"), 0);
	CHECK_EQ(elem_stat("q", "length"), 1);
	int f0 = h_nframes;
	CHECK(click_run_tasks());
	CHECK_EQ(h_tx_total[1], 5);
	CHECK_EQ(h_frames[f0].len, sizeof big);
	CHECK(memcmp(h_frames[f0].data, big, sizeof big) == 0);
	/* the pool was returned: 10 more fit */
	for (int i = 0; i < 10; i++)
		click_rx(0, fr, n);
	CHECK_EQ(elem_stat("q", "length"), 10);
	CHECK(click_run_tasks());
	CHECK_EQ(h_tx_total[1], 5 + 10);
	/* draining is bounded per round (256 per queue) */
	CFG_OK("FromDevice(0) -> q :: Queue(600) -> ToDevice(1);");
	for (int i = 0; i < 600; i++)
		click_rx(0, fr, n);
	CHECK(click_run_tasks());
	CHECK_EQ(elem_stat("q", "length"), 600 - 256);
	CHECK(click_run_tasks());
	CHECK(click_run_tasks());
	CHECK_EQ(elem_stat("q", "length"), 0);
	CHECK_EQ(h_tx_total[1], 15 + 600);
}

/* Offloaded frames (partial checksum, TCP GSO superframes) pass through unchanged, with their
 * metadata; filters see the real headers; counters count wire packets (segments). */
static void offload_passthrough(void)
{
	static uint8_t sf[8192];
	click_init(2, 1024, 30000);
	CFG_OK("fw :: IPFilter(allow tcp dst port 80, deny all);\n"
	       "FromDevice(0) -> fw -> c :: Counter -> q :: Queue(8) -> ToDevice(1);\n"
	       "fw[1] -> d :: Counter -> Discard;");
	uint16_t n = mk_tcp(sf, IP(10, 0, 0, 1), IP(10, 0, 0, 2), 40000, 80, TH_ACK, 4000);
	struct click_vh vh = { CLICK_VH_NEEDS_CSUM, CLICK_GSO_TCPV4, 54, 1448, 34, 16 };
	uint64_t wb;
	CHECK_EQ(click_segs(sf, n, &vh, &wb), 3);               /* 1448 + 1448 + 1104 */
	CHECK_EQ(wb, (uint64_t)n + 2 * 54);
	int f0 = h_nframes;
	click_rx_vh(0, sf, n, &vh);
	CHECK_EQ(elem_stat("q", "length"), 1);                  /* queued as a chain of buffers */
	CHECK(click_run_tasks());
	CHECK_EQ(h_tx_total[1], 1);
	CHECK_EQ(h_frames[f0].len, n);
	CHECK(memcmp(h_frames[f0].data, sf, n) == 0);
	CHECK(h_frames[f0].has_vh);
	CHECK(memcmp(&h_frames[f0].vh, &vh, sizeof vh) == 0);
	CHECK_EQ(elem_stat("fw", "allowed"), 3);
	CHECK_EQ(elem_stat("c", "count"), 3);
	CHECK_EQ(elem_stat("c", "bytes"), (int64_t)n + 2 * 54);
	CHECK_EQ(nic_stat(0, "rx"), 3);
	CHECK_EQ(nic_stat(1, "tx"), 3);
	CHECK_EQ(nic_stat(1, "tx_bytes"), (int64_t)n + 2 * 54);
	/* the same superframe to port 22: denied as 3 packets */
	n = mk_tcp(sf, IP(10, 0, 0, 1), IP(10, 0, 0, 2), 40000, 22, TH_ACK, 4000);
	click_rx_vh(0, sf, n, &vh);
	CHECK_EQ(elem_stat("fw", "denied"), 3);
	CHECK_EQ(elem_stat("d", "count"), 3);
	CHECK_EQ(nic_stat(0, "drop"), 3);
	/* a partial checksum without GSO: one packet, metadata kept; DATA_VALID-only too */
	n = mk_tcp(fr, IP(10, 0, 0, 1), IP(10, 0, 0, 2), 40000, 80, TH_ACK, 100);
	struct click_vh cs = { CLICK_VH_NEEDS_CSUM, CLICK_GSO_NONE, 0, 0, 34, 16 };
	f0 = h_nframes;
	click_rx_vh(0, fr, n, &cs);
	CHECK(click_run_tasks());
	CHECK(h_frames[f0].has_vh && memcmp(&h_frames[f0].vh, &cs, sizeof cs) == 0);
	CHECK_EQ(elem_stat("c", "count"), 4);
	/* no metadata (all zero) = a plain frame */
	struct click_vh none = { 0, 0, 0, 0, 0, 0 };
	f0 = h_nframes;
	click_rx_vh(0, fr, n, &none);
	CHECK(click_run_tasks());
	CHECK(!h_frames[f0].has_vh);
	CHECK_EQ(elem_stat("c", "count"), 5);
}

static void queue_cycle_bounded(void)
{
	click_init(2, 1024, 30000);
	CFG_OK("q :: Queue(8); FromDevice(0) -> q -> c :: Counter -> q;");
	uint16_t n = mk_arp(fr);
	click_rx(0, fr, n);
	click_rx(0, fr, n);
	for (int i = 0; i < 5; i++)
		CHECK(click_run_tasks());       /* each round moves the packets once around */
	CHECK_EQ(elem_stat("c", "count"), 10);
	CHECK_EQ(elem_stat("q", "length"), 2);
}

static void ratelimiter_tokens(void)
{
	click_init(2, 1024, 30000);
	CFG_OK("FromDevice(0) -> rl :: RateLimiter(10, 2) -> ToDevice(1); rl[1] -> over :: Counter -> Discard;");
	uint16_t n = mk_arp(fr);
	for (int i = 0; i < 5; i++)
		click_rx(0, fr, n);             /* bucket starts full: 2 pass */
	CHECK_EQ(h_tx_total[1], 2);
	CHECK_EQ(elem_stat("over", "count"), 3);
	h_now += 100000000;                     /* +100 ms = 1 token at 10/s */
	click_rx(0, fr, n);
	click_rx(0, fr, n);
	CHECK_EQ(h_tx_total[1], 3);
	h_now += 50000000;                      /* half a token */
	click_rx(0, fr, n);
	CHECK_EQ(h_tx_total[1], 3);
	h_now += 50000000;                      /* the other half */
	click_rx(0, fr, n);
	CHECK_EQ(h_tx_total[1], 4);
	h_now += 20000000000ull;                /* long idle: bucket capped at burst */
	for (int i = 0; i < 3; i++)
		click_rx(0, fr, n);
	CHECK_EQ(h_tx_total[1], 6);
	CHECK_EQ(elem_stat("rl", "passed"), 6);
	CHECK_EQ(elem_stat("rl", "limited"), 6);
	/* default burst = rate/10; excess without output 1 is dropped */
	CFG_OK("FromDevice(0) -> rl :: RateLimiter(1000) -> ToDevice(1);");
	for (int i = 0; i < 150; i++)
		click_rx(0, fr, n);
	CHECK_EQ(elem_stat("rl", "passed"), 100);
	CHECK_EQ(elem_stat("rl", "limited"), 50);
	CHECK_EQ(nic_stat(0, "drop"), 6 + 50);  /* 6 discarded by the first graph */
}

static void ethermirror_swaps(void)
{
	click_init(2, 1024, 30000);
	CFG_OK("FromDevice(0) -> EtherMirror -> ToDevice(0);");
	uint16_t n = mk_tcp(fr, IP(10, 0, 0, 1), IP(10, 0, 0, 2), 40000, 7, TH_SYN | TH_PSH, 10);
	click_rx(0, fr, n);
	CHECK_EQ(h_nframes, 1);
	const uint8_t *o = h_frames[0].data;
	CHECK_EQ(h_frames[0].len, n);
	CHECK(memcmp(o, MAC_A, 6) == 0);
	CHECK(memcmp(o + 6, MAC_B, 6) == 0);
	CHECK_EQ(get32(o + 26), IP(10, 0, 0, 2));
	CHECK_EQ(get32(o + 30), IP(10, 0, 0, 1));
	CHECK_EQ(get16(o + 34), 7);
	CHECK_EQ(get16(o + 36), 40000);
	CHECK_EQ(fold(sum16(o + 14, 20, 0)), 0);       /* IP header checksum still valid */
	CHECK_EQ(l4_csum(o, 14), 0);                   /* TCP checksum still valid */
	CHECK(memcmp(o + 54, fr + 54, 10) == 0);       /* payload untouched */
	CHECK_EQ(get32(fr + 26), IP(10, 0, 0, 1));     /* the received frame was not modified */
	n = mk_udp(fr, IP(192, 168, 1, 1), IP(8, 8, 8, 8), 5353, 53, 3);
	click_rx(0, fr, n);
	o = h_frames[1].data;
	CHECK_EQ(get16(o + 34), 53);
	CHECK_EQ(get16(o + 36), 5353);
	CHECK_EQ(l4_csum(o, 14), 0);
	/* short frames are mirrored as far as they go */
	uint8_t s[10] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
	click_rx(0, s, sizeof(s));
	CHECK_EQ(h_frames[2].len, 10);
	CHECK(memcmp(h_frames[2].data, s, 10) == 0);
	n = mk_arp(fr);
	click_rx(0, fr, n);
	CHECK(memcmp(h_frames[3].data, MAC_A, 6) == 0);
	CHECK(memcmp(h_frames[3].data + 6, "\xff\xff\xff\xff\xff\xff", 6) == 0);
	/* mirrored twice = original; through a queue (pool buffer, in place) */
	CFG_OK("FromDevice(0) -> EtherMirror -> q :: Queue(4) -> EtherMirror -> ToDevice(1);");
	n = mk_tcp(fr, IP(10, 0, 0, 1), IP(10, 0, 0, 2), 40000, 7, TH_SYN, 0);
	click_rx(0, fr, n);
	click_run_tasks();
	CHECK_EQ(h_nframes, 5);
	CHECK(memcmp(h_frames[4].data, fr, n) == 0);
	CHECK_EQ(elem_stat("EtherMirror@2", "count"), 1);
}

static void arpresponder_answers_with_own_mac(void)
{
	static const uint8_t M0[6] = { 0xfa, 0x16, 0x3e, 0x00, 0x00, 0x01 };
	static const uint8_t M1[6] = { 0xfa, 0x16, 0x3e, 0x00, 0x00, 0x02 };
	click_init(2, 1024, 30000);
	click_set_mac(0, M0);
	click_set_mac(1, M1);
	CHECK(memcmp(click_mac(1), M1, 6) == 0);
	CFG_OK("FromDevice(0) -> a :: ARPResponder(10.0.0.2, 192.168.0.0/16) -> ToDevice(0);\n"
	       "a[1] -> ToDevice(1);\n"
	       "FromDevice(1) -> b :: ARPResponder(10.0.0.2) -> ToDevice(1);");
	uint16_t n = mk_arp(fr);                 /* who-has 10.0.0.2 tell 10.0.0.1 (02:..:aa) */
	click_rx(0, fr, n);
	CHECK_EQ(h_nframes, 1);
	const uint8_t *o = h_frames[0].data;
	CHECK_EQ(h_frames[0].nic, 0);
	CHECK_EQ(h_frames[0].len, n);
	CHECK(memcmp(o, MAC_A, 6) == 0);                 /* to the asker */
	CHECK(memcmp(o + 6, M0, 6) == 0);                /* from NIC 0's own MAC */
	CHECK_EQ(get16(o + 12), 0x0806);
	CHECK_EQ(get16(o + 20), 2);                      /* is-at */
	CHECK(memcmp(o + 22, M0, 6) == 0);               /* sender hardware = us */
	CHECK_EQ(get32(o + 28), IP(10, 0, 0, 2));        /* sender protocol = the address asked for */
	CHECK(memcmp(o + 32, MAC_A, 6) == 0);
	CHECK_EQ(get32(o + 38), IP(10, 0, 0, 1));
	CHECK_EQ(get16(fr + 20), 1);                     /* the received frame was not modified */
	/* the same request on NIC 1 is answered from NIC 1's MAC */
	click_rx(1, fr, n);
	CHECK(memcmp(h_frames[1].data + 6, M1, 6) == 0 && memcmp(h_frames[1].data + 22, M1, 6) == 0);
	/* a new MAC (what configure's macs does) is used from the next packet on */
	click_set_mac(0, M1);
	fr[41] = 7;                                      /* who-has 192.168.0.7: the /16 */
	fr[38] = 192; fr[39] = 168; fr[40] = 0;
	click_rx(0, fr, n);
	CHECK(memcmp(h_frames[2].data + 6, M1, 6) == 0);
	CHECK_EQ(get32(h_frames[2].data + 28), IP(192, 168, 0, 7));
	/* not ours, a reply, or not ARP: output 1 (NIC 0) or dropped (NIC 1, unconnected) */
	fr[38] = 10; fr[39] = 0; fr[40] = 0; fr[41] = 9;
	click_rx(0, fr, n);
	CHECK_EQ(h_frames[3].nic, 1);
	CHECK(memcmp(h_frames[3].data, fr, n) == 0);
	fr[21] = 2;
	click_rx(0, fr, n);
	CHECK_EQ(h_frames[4].nic, 1);
	n = mk_udp(fr, IP(10, 0, 0, 1), IP(10, 0, 0, 2), 1, 2, 0);
	click_rx(1, fr, n);
	CHECK_EQ(h_nframes, 5);
	CHECK_EQ(elem_stat("a", "replies"), 2);
	CHECK_EQ(elem_stat("a", "other"), 2);
	CHECK_EQ(elem_stat("b", "replies"), 1);
	CHECK_EQ(elem_stat("b", "other"), 1);
	CHECK_CONTAINS(stats(), "\"nics\":[{\"mac\":\"fa:16:3e:00:00:02\",");
	/* errors */
	CHECK(!cfg("FromDevice(0) -> ARPResponder -> ToDevice(0);", 0));
	CHECK_CONTAINS(cerr.message, "needs the IPv4 addresses");
	CHECK(!cfg("FromDevice(0) -> ARPResponder(10.0.0.300) -> ToDevice(0);", 0));
	CHECK_CONTAINS(cerr.message, "bad address '10.0.0.300'");
	CHECK(!cfg("FromDevice(0) -> ARPResponder(10.0.0.1/33) -> ToDevice(0);", 0));
	CHECK_EQ(cerr.col, 31);
}

static void session_slots(void)
{
	click_init(2, 2, 30000);
	CFG_OK("FromDevice(0) -> ToDevice(1); FromDevice(1) -> ToDevice(0);");
	CHECK_EQ(click_slots_total(), 2);
	uint16_t n;
	n = mk_udp(fr, IP(10, 0, 0, 1), IP(10, 0, 0, 2), 1000, 53, 0);          /* flow A */
	click_rx(0, fr, n);
	n = mk_tcp(fr, IP(10, 0, 0, 1), IP(10, 0, 0, 2), 2000, 80, TH_SYN, 0);  /* flow B */
	click_rx(0, fr, n);
	CHECK_EQ(click_slots_used(), 2);
	CHECK_EQ(slot_stat("opened"), 2);
	CHECK_EQ(h_tx_total[1], 2);
	n = mk_udp(fr, IP(10, 0, 0, 3), IP(10, 0, 0, 2), 1, 53, 0);             /* flow C: table full */
	click_rx(0, fr, n);
	CHECK_EQ(h_tx_total[1], 2);
	CHECK_EQ(slot_stat("rejected"), 1);
	CHECK_EQ(slot_stat("opened"), 2);               /* a rejected flow never opened */
	CHECK_EQ(nic_stat(0, "drop"), 1);
	n = mk_udp(fr, IP(10, 0, 0, 2), IP(10, 0, 0, 1), 53, 1000, 0);          /* A reversed: same session */
	click_rx(1, fr, n);
	CHECK_EQ(h_tx_total[0], 1);
	CHECK_EQ(click_slots_used(), 2);
	n = mk_arp(fr);                                                          /* ARP never uses slots */
	click_rx(0, fr, n);
	CHECK_EQ(h_tx_total[1], 3);
	n = mk_icmp(fr, IP(10, 0, 0, 1), IP(10, 0, 0, 9), 8, 77);               /* ICMP is a flow too */
	click_rx(0, fr, n);
	CHECK_EQ(h_tx_total[1], 3);
	CHECK_EQ(slot_stat("rejected"), 2);
	n = mk_tcp(fr, IP(10, 0, 0, 5), IP(10, 0, 0, 6), 3, 4, TH_ACK, 0);      /* bare ACK, no flow: no slot */
	click_rx(0, fr, n);
	n = mk_tcp(fr, IP(10, 0, 0, 5), IP(10, 0, 0, 6), 3, 4, TH_RST, 0);      /* RST, no flow: no slot */
	click_rx(0, fr, n);
	CHECK_EQ(h_tx_total[1], 5);
	n = mk_tcp(fr, IP(10, 0, 0, 5), IP(10, 0, 0, 6), 3, 4, TH_ACK | TH_PSH, 5); /* data needs a slot */
	click_rx(0, fr, n);
	CHECK_EQ(h_tx_total[1], 5);
	CHECK_EQ(slot_stat("rejected"), 3);
	/* FIN from both sides frees B */
	n = mk_tcp(fr, IP(10, 0, 0, 1), IP(10, 0, 0, 2), 2000, 80, TH_FIN | TH_ACK, 0);
	click_rx(0, fr, n);
	CHECK_EQ(click_slots_used(), 2);
	n = mk_tcp(fr, IP(10, 0, 0, 1), IP(10, 0, 0, 2), 2000, 80, TH_FIN | TH_ACK, 0);  /* same side again */
	click_rx(0, fr, n);
	CHECK_EQ(click_slots_used(), 2);
	n = mk_tcp(fr, IP(10, 0, 0, 2), IP(10, 0, 0, 1), 80, 2000, TH_FIN | TH_ACK, 0);
	click_rx(1, fr, n);
	CHECK_EQ(click_slots_used(), 1);
	n = mk_tcp(fr, IP(10, 0, 0, 1), IP(10, 0, 0, 2), 2000, 80, TH_ACK, 0);  /* last ACK: no new session */
	click_rx(0, fr, n);
	CHECK_EQ(click_slots_used(), 1);
	/* now C fits */
	n = mk_udp(fr, IP(10, 0, 0, 3), IP(10, 0, 0, 2), 1, 53, 0);
	click_rx(0, fr, n);
	CHECK_EQ(click_slots_used(), 2);
	CHECK_EQ(slot_stat("free"), 0);
	CHECK_EQ(slot_stat("opened"), 3);
	/* idle timeout: nothing for 30 s, the sweep frees A and C */
	h_now += 29999ull * 1000000;
	for (int i = 0; i < 4; i++)
		click_run_tasks();
	CHECK_EQ(click_slots_used(), 2);
	h_now += 2ull * 1000000;
	CHECK(click_run_tasks());
	CHECK_EQ(click_slots_used(), 0);
	/* RST in one direction frees */
	n = mk_tcp(fr, IP(10, 0, 0, 1), IP(10, 0, 0, 2), 5000, 443, TH_SYN, 0);
	click_rx(0, fr, n);
	CHECK_EQ(click_slots_used(), 1);
	n = mk_tcp(fr, IP(10, 0, 0, 2), IP(10, 0, 0, 1), 443, 5000, TH_RST | TH_ACK, 0);
	click_rx(1, fr, n);
	CHECK_EQ(click_slots_used(), 0);
	CHECK_EQ(h_tx_total[0], 3);
	/* a full table reclaims expired flows before rejecting */
	n = mk_udp(fr, IP(10, 0, 0, 1), IP(10, 0, 0, 2), 1, 1, 0);
	click_rx(0, fr, n);
	n = mk_udp(fr, IP(10, 0, 0, 1), IP(10, 0, 0, 2), 2, 2, 0);
	click_rx(0, fr, n);
	h_now += 31000ull * 1000000;
	n = mk_udp(fr, IP(10, 0, 0, 1), IP(10, 0, 0, 2), 3, 3, 0);
	click_rx(0, fr, n);
	CHECK_EQ(click_slots_used(), 1);
	CHECK_EQ(slot_stat("rejected"), 3);
	CHECK_EQ(slot_stat("opened"), 7);
	/* a flow seen again after its timeout (not yet swept) restarts in place: a new session */
	h_now += 31000ull * 1000000;
	click_rx(0, fr, n);
	CHECK_EQ(click_slots_used(), 1);
	CHECK_EQ(slot_stat("opened"), 8);
	/* reconfigure with the same slots keeps flows, another count flushes */
	CFG_OK("FromDevice(0) -> ToDevice(1); FromDevice(1) -> ToDevice(0);");
	CHECK_EQ(click_slots_used(), 1);
	CHECK(cfg("FromDevice(0) -> ToDevice(1); FromDevice(1) -> ToDevice(0);", 2));
	CHECK_EQ(click_slots_used(), 1);
	CHECK(cfg("FromDevice(0) -> ToDevice(1); FromDevice(1) -> ToDevice(0);", 3));
	CHECK_EQ(click_slots_total(), 3);
	CHECK_EQ(click_slots_used(), 0);
	stats();
	/* opened is monotonic: a flush of the table keeps it */
	CHECK_CONTAINS(sbuf, "\"slots\":{\"total\":3,\"used\":0,\"free\":3,\"rejected\":3,\"opened\":8}");
	/* non-first fragments and other protocols */
	n = mk_udp(fr, IP(10, 0, 0, 1), IP(10, 0, 0, 2), 7, 7, 8);
	put16(fr + 20, 0x0020);
	click_rx(0, fr, n);                     /* keyed with ports 0 */
	n = mk_udp(fr, IP(10, 0, 0, 1), IP(10, 0, 0, 2), 7, 7, 8);
	fr[23] = 47;                            /* GRE: no session */
	click_rx(0, fr, n);
	CHECK_EQ(click_slots_used(), 1);
}

/* The idle loop sleeps until click_next_timer_ns (tickless): no flows, no wake-up; else the
 * earliest expiry, and a wake-up at that time frees what expired. */
static void tickless_next_timer(void)
{
	click_init(2, 8, 1000);
	CFG_OK("FromDevice(0) -> ToDevice(1); FromDevice(1) -> ToDevice(0);");
	h_now_step = 0;
	h_now = 5000ull * 1000000;
	CHECK_EQ(click_next_timer_ns(h_now), 0);                 /* no session: never */
	uint16_t n = mk_udp(fr, IP(10, 0, 0, 1), IP(10, 0, 0, 2), 1, 53, 0);
	click_rx(0, fr, n);                                      /* flow A at 5.000 s */
	CHECK_EQ(click_next_timer_ns(h_now), 6000ull * 1000000);
	h_now += 300ull * 1000000;
	n = mk_udp(fr, IP(10, 0, 0, 1), IP(10, 0, 0, 2), 2, 53, 0);
	click_rx(0, fr, n);                                      /* flow B at 5.300 s */
	CHECK_EQ(click_next_timer_ns(h_now), 6000ull * 1000000);  /* still A's expiry */
	h_now = 6000ull * 1000000;                               /* the wake-up: A expired */
	CHECK_EQ(click_next_timer_ns(h_now), 6300ull * 1000000);
	CHECK_EQ(click_slots_used(), 1);
	h_now = 6100ull * 1000000;
	n = mk_udp(fr, IP(10, 0, 0, 2), IP(10, 0, 0, 1), 53, 2, 0);
	click_rx(1, fr, n);                                      /* B seen again: expires later */
	CHECK_EQ(click_next_timer_ns(h_now), 6300ull * 1000000);  /* early wake-up is harmless */
	h_now = 6300ull * 1000000;
	CHECK_EQ(click_next_timer_ns(h_now), 7100ull * 1000000);
	CHECK_EQ(click_slots_used(), 1);
	h_now = 7100ull * 1000000;
	CHECK_EQ(click_next_timer_ns(h_now), 0);
	CHECK_EQ(click_slots_used(), 0);
}

static void session_many_flows(void)
{
	click_init(2, 65536, 1000);
	CFG_OK("FromDevice(0) -> ToDevice(1);");
	uint16_t n = 0;
	for (uint32_t i = 0; i < 70000; i++) {
		n = mk_udp(fr, IP(10, 0, 0, 1) + (i >> 16), IP(10, 1, 0, 1), (uint16_t)i, 53, 0);
		click_rx(0, fr, n);
	}
	CHECK_EQ(click_slots_used(), 65536);
	CHECK_EQ(slot_stat("rejected"), 70000 - 65536);
	h_now += 2000ull * 1000000;
	int rounds = 0;
	while (click_slots_used() && rounds < 100000) {
		click_run_tasks();
		rounds++;
	}
	CHECK_EQ(click_slots_used(), 0);
	CHECK(rounds <= 65536 / 32 + 1);
}

static void stats_json_shape(void)
{
	click_init(2, 256, 30000);
	h_now_step = 100;                       /* every packet takes 100 ns: bucket 6 */
	CFG_OK("FromDevice(0) -> cnt :: Counter -> c :: Classifier(arp, -) -> q :: Queue(64) -> ToDevice(1);\n"
	       "c[1] -> f :: IPFilter(allow udp, deny all) -> rl :: RateLimiter(100, 1) -> ToDevice(1);\n"
	       "f[1] -> Discard; rl[1] -> m :: EtherMirror -> Discard;\n"
	       "FromDevice(1) -> ToDevice(0);");
	uint16_t n = mk_arp(fr);
	click_rx(0, fr, n);
	n = mk_udp(fr, IP(1, 2, 3, 4), IP(5, 6, 7, 8), 1, 2, 0);
	click_rx(0, fr, n);
	click_rx(0, fr, n);                     /* rate limited -> mirror -> discard */
	n = mk_tcp(fr, IP(1, 2, 3, 4), IP(5, 6, 7, 8), 1, 2, TH_SYN, 0);
	click_rx(0, fr, n);                     /* denied -> discard */
	const char *s = stats();
	CHECK_CONTAINS(s, "{\"uptime_us\":1,\"configured\":true,\"slots\":{\"total\":256,\"used\":1,\"free\":255,"
			  "\"rejected\":0,\"opened\":1},\"nics\":[{\"mac\":\"00:00:00:00:00:00\",\"rx\":4,\"tx\":0,\"drop\":2,"
			  "\"rx_bytes\":180,\"tx_bytes\":0},"
			  "{\"mac\":\"00:00:00:00:00:00\",\"rx\":0,\"tx\":1,\"drop\":0,\"rx_bytes\":0,\"tx_bytes\":42}]");
	CHECK_CONTAINS(s, "\"elements\":[{\"name\":\"cnt\",\"class\":\"Counter\",\"count\":4,\"bytes\":");
	CHECK_CONTAINS(s, "{\"name\":\"c\",\"class\":\"Classifier\",\"outputs\":[1,3],\"unmatched\":0}");
	CHECK_CONTAINS(s, "{\"name\":\"q\",\"class\":\"Queue\",\"length\":1,\"capacity\":64,\"drops\":0,\"highwater\":1}");
	CHECK_CONTAINS(s, "{\"name\":\"f\",\"class\":\"IPFilter\",\"allowed\":2,\"denied\":1,\"unmatched\":0}");
	CHECK_CONTAINS(s, "{\"name\":\"rl\",\"class\":\"RateLimiter\",\"passed\":1,\"limited\":1}");
	CHECK_CONTAINS(s, "{\"name\":\"m\",\"class\":\"EtherMirror\",\"count\":1}");
	CHECK_CONTAINS(s, "{\"name\":\"Discard@9\",\"class\":\"Discard\",\"count\":1}");
	CHECK_CONTAINS(s, "{\"name\":\"Discard@11\",\"class\":\"Discard\",\"count\":1}");
	/* 3 completed packets (1 tx + 2 discards) at 100 ns; the queued one is not done yet */
	CHECK_CONTAINS(s, "\"latency_ns\":{\"buckets_log2\":[0,0,0,0,0,0,3],\"count\":3,\"p50\":64,\"p99\":64}}");
	int k = sub(s, "slots", -1);
	CHECK_EQ(k, 5);
	CHECK_EQ(num(k, "total"), 256);
	CHECK_EQ(num(k, "used"), 1);
	CHECK_EQ(num(k, "opened"), 1);
	k = sub(s, "nics", 1);
	CHECK_EQ(k, 6);                         /* mac, rx, tx, drop, rx_bytes, tx_bytes */
	CHECK_EQ(num(k, "rx"), 0);
	CHECK_EQ(num(k, "tx"), 1);
	k = sub(s, "latency_ns", -1);
	CHECK_EQ(k, 4);
	CHECK_EQ(num(k, "count"), 3);
	/* quantiles: 98 fast + 2 slow packets: p50 in the fast bucket, p99 in the slow one */
	CFG_OK("FromDevice(1) -> ToDevice(0);");
	n = mk_arp(fr);
	h_now_step = 1000;                      /* bucket 9 (512..1023)? no: 1000 -> bucket 9 */
	for (int i = 0; i < 95; i++)
		click_rx(1, fr, n);
	h_now_step = 1u << 20;                  /* bucket 20 */
	for (int i = 0; i < 2; i++)
		click_rx(1, fr, n);
	stats();
	k = sub(sbuf, "latency_ns", -1);
	CHECK_EQ(num(k, "count"), 100);
	CHECK_EQ(num(k, "p50"), 512);
	CHECK_EQ(num(k, "p99"), 1 << 20);
	/* unconfigured shell: empty elements list, nics present, latency empty */
	click_init(3, 8, 1000);
	s = stats();
	CHECK_CONTAINS(s, "\"configured\":false,\"slots\":{\"total\":8,\"used\":0,\"free\":8,\"rejected\":0,\"opened\":0},"
			  "\"nics\":[{\"mac\":\"00:00:00:00:00:00\",\"rx\":0,\"tx\":0,\"drop\":0,\"rx_bytes\":0,"
			  "\"tx_bytes\":0},{");
	CHECK_CONTAINS(s, "\"elements\":[],\"latency_ns\":{\"buckets_log2\":[],\"count\":0,\"p50\":0,\"p99\":0}}");
	CHECK_EQ(sub(s, "nics", 2), 6);
	CHECK_EQ(sub(s, "nics", 3), -1);
}

static void reconfigure_keeps_old_graph(void)
{
	click_init(2, 1024, 30000);
	CFG_OK("FromDevice(0) -> keep :: Counter -> ToDevice(1);");
	uint16_t n = mk_arp(fr);
	click_rx(0, fr, n);
	CHECK_EQ(h_tx_total[1], 1);
	CFG_ERR("FromDevice(0) -> Countr -> ToDevice(0);", 1, 18, "unknown element class");
	CFG_ERR("FromDevice(0) -> x :: Counter -> ToDevice(0); FromDevice(1) -> Queue(0)", 1, 70, "Queue capacity");
	click_rx(0, fr, n);
	CHECK_EQ(h_tx_total[1], 2);
	CHECK_EQ(h_tx_total[0], 0);
	CHECK_EQ(click_element_count(), 3);
	CHECK_EQ(elem_stat("keep", "count"), 2);
	/* a second failure after a swap (the spare slot is now the other one) */
	CFG_OK("FromDevice(0) -> keep2 :: Counter -> ToDevice(0);");
	CFG_ERR("FromDevice(0) -> ToDevice(7)", 1, 27, "NIC 7 does not exist");
	click_rx(0, fr, n);
	CHECK_EQ(h_tx_total[0], 1);
	CHECK_EQ(elem_stat("keep2", "count"), 1);
	/* NIC counters survive reconfiguration, element counters start over */
	CHECK_EQ(nic_stat(0, "rx"), 3);
	CFG_OK("FromDevice(0) -> keep2 :: Counter -> ToDevice(0);");
	CHECK_EQ(elem_stat("keep2", "count"), 0);
	CHECK_EQ(nic_stat(0, "rx"), 3);
	/* reconfigure releases queued packets (counted as drops on their ingress NIC) */
	CFG_OK("FromDevice(0) -> Queue(8) -> ToDevice(1); FromDevice(1) -> Queue -> ToDevice(0);");
	click_rx(0, fr, n);
	click_rx(0, fr, n);
	click_rx(1, fr, n);
	CFG_OK("FromDevice(0) -> ToDevice(1);");
	CHECK_EQ(nic_stat(0, "drop"), 2);
	CHECK_EQ(nic_stat(1, "drop"), 1);
	CHECK(!click_run_tasks());
}

static void truncated_frames(void)
{
	click_init(2, 64, 30000);
	CFG_OK("FromDevice(0) -> c :: Classifier(ip proto tcp and src port 80, arp, ip6, src net 10.0.0.0/8, -);\n"
	       "c -> EtherMirror -> q :: Queue(4096) -> ToDevice(1);\n"
	       "c[1] -> ToDevice(1); c[2] -> Discard;\n"
	       "c[3] -> f :: IPFilter(allow udp and dst port 1-100, allow icmp, deny all) -> ToDevice(1);\n"
	       "c[4] -> EtherMirror -> ToDevice(1);");
	static uint8_t base[4][128];
	uint16_t lens[4];
	lens[0] = mk_tcp(base[0], IP(10, 0, 0, 1), IP(10, 0, 0, 2), 80, 1234, TH_SYN, 6);
	lens[1] = mk_udp(base[1], IP(10, 0, 0, 1), IP(10, 0, 0, 2), 80, 53, 6);
	lens[2] = mk_icmp(base[2], IP(10, 0, 0, 1), IP(10, 0, 0, 2), 8, 1);
	lens[3] = mk_arp(base[3]);
	long sent = 0;
	for (int b = 0; b < 4; b++) {
		for (uint16_t len = 0; len <= 60 && len <= lens[b]; len++) {
			/* exact-size heap copies so ASan catches any read past the end */
			uint8_t *p = malloc(len ? len : 1);
			memcpy(p, base[b], len);
			click_rx(0, p, len);
			sent++;
			/* corrupted variants: huge IHL, tiny total length, VLAN tag */
			if (len > 14) {
				p[14 < len ? 14 : 0] = 0x4f;
				click_rx(0, p, len);
				sent++;
			}
			if (len > 17) {
				memcpy(p, base[b], len);
				p[16] = 0;
				p[17] = 0;
				click_rx(0, p, len);
				sent++;
			}
			if (len >= 18) {
				memcpy(p, base[b], len);
				p[12] = 0x81;
				p[13] = 0x00;
				click_rx(0, p, len);
				sent++;
			}
			free(p);
		}
	}
	while (click_run_tasks())
		;
	CHECK_EQ(nic_stat(0, "rx"), sent);
	int64_t queued = elem_stat("q", "length");
	CHECK_EQ(queued, 0);
	CHECK_EQ(nic_stat(1, "tx") + nic_stat(0, "drop"), sent);
	CHECK(nic_stat(1, "tx") > 0);
	CHECK(nic_stat(0, "drop") > 0);
}

static void four_nics(void)
{
	click_init(4, 1024, 30000);
	CFG_OK("FromDevice(3) -> ToDevice(2); FromDevice(2) -> ToDevice(3); FromDevice(0) -> Discard");
	uint16_t n = mk_arp(fr);
	click_rx(3, fr, n);
	click_rx(2, fr, n);
	click_rx(1, fr, n);                     /* no FromDevice(1): dropped */
	click_rx(0, fr, n);
	CHECK_EQ(h_tx_total[2], 1);
	CHECK_EQ(h_tx_total[3], 1);
	CHECK_EQ(nic_stat(1, "drop"), 1);
	CHECK_EQ(nic_stat(0, "drop"), 1);
	CHECK_EQ(elem_stat("Discard@6", "count"), 1);
	/* click_init clamps the NIC count to CLICK_MAX_NICS */
	click_init(9, 0, 30000);
	CHECK_EQ(click_slots_total(), 1024);
	CHECK_EQ(sub(stats(), "nics", 3), 6);
	CHECK_EQ(sub(sbuf, "nics", 4), -1);
}

void run_click_tests(void)
{
	RUN(parse_protocol_examples);
	RUN(parse_syntax_variants);
	RUN(parse_errors);
	RUN(forward_basic);
	RUN(ipfilter_rules);
	RUN(classifier_outputs);
	RUN(match_details);
	RUN(queue_bound_and_drain);
	RUN(queue_cycle_bounded);
	RUN(offload_passthrough);
	RUN(ratelimiter_tokens);
	RUN(ethermirror_swaps);
	RUN(arpresponder_answers_with_own_mac);
	RUN(session_slots);
	RUN(tickless_next_timer);
	RUN(session_many_flows);
	RUN(stats_json_shape);
	RUN(reconfigure_keeps_old_graph);
	RUN(truncated_frames);
	RUN(four_nics);
}
