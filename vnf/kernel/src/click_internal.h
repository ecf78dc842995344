/* fluidvim VNF — internal structures of the packet engine (click*.c, match.c, flowtable.c).
 * Not part of the kernel interface: the kernel only uses include/click.h. */
#ifndef FLUIDVIM_CLICK_INTERNAL_H
#define FLUIDVIM_CLICK_INTERNAL_H
#include "kstd.h"
#include "click.h"

/* ---- static limits ---- */
#define CLICK_MAX_ELEMENTS 64     /* elements per graph */
#define CLICK_MAX_CONNS    256    /* connections per graph */
#define CLICK_MAX_OUT      16     /* output ports per element (=> Classifier patterns) */
#define CLICK_MAX_RULES    256    /* Classifier patterns + IPFilter rules per graph */
#define CLICK_MAX_IPF_RULES 64    /* rules per IPFilter */
#define CLICK_MAX_ARGS     64     /* arguments per element */
#define CLICK_NAME_MAX     32     /* element names: at most 31 characters */
#define CLICK_POOL_BUFS    1024   /* packet buffers for packets held in Queues */
#define CLICK_BUF_SIZE     2048   /* bytes per buffer; longer frames cannot be queued */
#define CLICK_QUEUE_MAX    4096
#define CLICK_QUEUE_DEFAULT 1000
#define CLICK_LAT_BUCKETS  32
#define CLICK_MAX_HOPS     (2 * CLICK_MAX_ELEMENTS)   /* run-time bound on a push path */
#define MATCH_MAX_TERMS    8

/* ARPResponder: at most this many addresses (host or A.B.C.D/L) per element */
#define CLICK_MAX_ARP_ADDRS 16

/* ---- frame parsing (match.c) ---- */
struct pinfo {
	uint16_t outer_type;   /* ethertype of the outer header (0 if the frame is < 14 bytes) */
	uint16_t type;         /* ethertype after an optional 802.1Q / 802.1ad tag */
	uint16_t l3;           /* offset of the L3 header */
	uint16_t l4;           /* offset of the L4 header (ip4 only) */
	uint16_t l4len;        /* L4 bytes present (bounded by IP total length and frame length) */
	bool ip4;              /* a well-formed IPv4 header is present */
	bool first_frag;       /* IPv4 fragment offset == 0 */
	bool ports;            /* TCP/UDP ports present (first fragment, >= 4 bytes of L4) */
	bool icmp_id_ok;       /* ICMP header with id present (>= 8 bytes of L4) */
	bool tcp_ok;           /* TCP header with flags present (>= 20 bytes of L4) */
	uint8_t proto;
	uint8_t tcp_flags;
	uint16_t sport, dport; /* host order; for ICMP: both = the identifier */
	uint32_t src, dst;     /* host order */
	uint32_t tcp_payload;  /* TCP payload bytes according to the IP/TCP headers */
};
void pinfo_parse(struct pinfo *p, const uint8_t *d, uint16_t len);

enum mkind { MT_ALL, MT_ETHER, MT_PROTO, MT_HOST, MT_PORT };
enum mdir { MD_SRC, MD_DST, MD_ANY };
struct mterm {
	uint8_t kind, dir, neg, pad;
	uint16_t lo, hi;       /* MT_ETHER: lo = type; MT_PROTO: lo = proto; MT_PORT: range */
	uint32_t addr, mask;   /* MT_HOST: host order */
};
struct match { uint8_t nterms; struct mterm t[MATCH_MAX_TERMS]; };
bool match_eval(const struct match *m, const struct pinfo *p);

/* ---- configuration errors ---- */
struct cperr { bool set; size_t off; char msg[160]; };
/* printf-like, supports %s %d %u %c and %t (int len, const char *p: a source token, sanitised
 * and shortened). Only the first error is kept. */
void cperr_set(struct cperr *e, size_t off, const char *fmt, ...);
/* Next word of an argument: skips blanks and comments; a word is a run of characters other than
 * blanks, ',', '(' and ')'. Returns false at `end`. */
bool cfg_word(const char *s, size_t end, size_t *pos, size_t *ws, size_t *wl);
bool cfg_word_is(const char *s, size_t ws, size_t wl, const char *lit);
bool cfg_parse_u32(const char *s, size_t wl, uint32_t max, uint32_t *out);
/* Compile a match expression from s[pos, end); ctx names the argument in messages. */
bool match_compile(const char *s, size_t pos, size_t end, struct match *m, const char *ctx,
		   struct cperr *e);
/* A.B.C.D or A.B.C.D/L (one word) -> host-order address and mask. */
bool match_parse_net(const char *s, size_t n, uint32_t *addr, uint32_t *mask);

/* ---- graph ---- */
enum eclass { EC_FROMDEVICE, EC_TODEVICE, EC_COUNTER, EC_CLASSIFIER, EC_IPFILTER, EC_QUEUE,
	      EC_RATELIMITER, EC_ETHERMIRROR, EC_DISCARD, EC_ARPRESPONDER, EC_NCLASSES };
extern const char *const click_class_names[EC_NCLASSES];

struct rule { struct match m; bool allow; };

struct elem {
	uint8_t cls;
	uint8_t nout;                       /* number of output ports */
	bool named;
	int8_t out[CLICK_MAX_OUT];          /* target element per output port, -1 = unconnected */
	uint32_t out_off[CLICK_MAX_OUT];    /* source offset of each connection (errors) */
	uint32_t decl_off;
	char name[CLICK_NAME_MAX];          /* given name or Class@N */
	union {
		struct { int nic; } dev;
		struct { uint64_t count, bytes; } counter;
		struct { uint16_t first, n; uint64_t hits[CLICK_MAX_OUT]; uint64_t nomatch; } cls;
		struct { uint16_t first, n; uint64_t allowed, denied, nomatch; } ipf;
		struct { uint32_t cap, len, hw; int32_t head, tail; uint64_t drops; } q;
		struct { uint64_t rate, burst, tokens, last_ns, passed, limited; } rl;
		struct { uint64_t count; } discard;
		struct { uint64_t count; } mirror;
		struct { uint16_t first, n; uint64_t replies, other; } arp;  /* host terms in rules[] */
	} u;
};

struct graph {
	int nelem, nconn, nrules;
	int8_t from[CLICK_MAX_NICS];        /* FromDevice element per NIC, -1 = none */
	struct elem e[CLICK_MAX_ELEMENTS];
	struct rule rules[CLICK_MAX_RULES];
};

/* click_parse.c: build *g from text; returns false and fills *err on error. */
bool click_parse(struct graph *g, const char *text, size_t len, int nics, struct click_err *err);

/* ---- flow table (flowtable.c) ---- */
void flow_init(uint32_t slots, uint32_t timeout_ms, uint64_t seed);
void flow_set_slots(uint32_t slots);    /* flushes the table */
/* Session accounting for one frame at ToDevice. Returns false if the frame must be dropped
 * because it starts a new flow and the table is full (rejected is counted). */
bool flow_account(const struct pinfo *p, uint32_t now_ms);
bool flow_sweep(uint32_t now_ms, unsigned budget);     /* true if something was freed */
/* The earliest time (ms, same clock as now_ms) an in-use flow expires; false if none is in use.
 * Frees the flows already expired when the previous answer has passed. */
bool flow_next_expiry(uint32_t now_ms, uint32_t *at_ms);
uint32_t flow_total(void);
uint32_t flow_used(void);
uint64_t flow_rejected(void);

#endif
