/* fluidvim VNF — internal structures of the packet engine (click*.c, cfgtext.c, match.c,
 * flowtable.c, elements/). Not part of the kernel interface: the kernel only uses include/click.h.
 *
 * Files and who calls whom (no cycles): click.c (runtime, data path, stats) and click_parse.c
 * (the language) use the element table (elements/elements.c, from elements/list.h); each element
 * class (elements/<file>.c) uses click_args.c and match.c for its arguments and packet.c for its
 * push; click.c uses packet.c too; click_args.c, click_parse.c and match.c use cfgtext.c, a leaf. */
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
#define CLICK_STATE_SIZE   (8 + 8 * CLICK_MAX_OUT + 8)   /* an element's state: Classifier's */

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

/* ---- configuration text (cfgtext.c) ---- */
struct cperr { bool set; size_t off; char msg[256]; };
/* printf-like, supports %s %d %u %c and %t (int len, const char *p: a source token, sanitised
 * and shortened). Only the first error is kept. */
void cperr_set(struct cperr *e, size_t off, const char *fmt, ...);
/* The same format into buf (always terminated when cap > 0). */
void cfg_fmt(char *buf, size_t cap, const char *fmt, ...);
/* 1-based line and column (UTF-8 code points) of byte offset off in s[0, n). */
void cfg_linecol(const char *s, size_t n, size_t off, int *line, int *col);
/* Next word of an argument: skips blanks and comments; a word is a run of characters other than
 * blanks, ',', '(' and ')'. Returns false at `end`. */
bool cfg_word(const char *s, size_t end, size_t *pos, size_t *ws, size_t *wl);
bool cfg_word_is(const char *s, size_t ws, size_t wl, const char *lit);
bool cfg_parse_u32(const char *s, size_t wl, uint32_t max, uint32_t *out);
/* ---- match expressions (match.c) ---- */
/* Compile a match expression from s[pos, end); ctx names the argument in messages. */
bool match_compile(const char *s, size_t pos, size_t end, struct match *m, const char *ctx,
		   struct cperr *e);
/* A.B.C.D or A.B.C.D/L (one word) -> host-order address and mask. */
bool match_parse_net(const char *s, size_t n, uint32_t *addr, uint32_t *mask);

/* ---- graph ---- */
/* The element classes: one value each, from elements/list.h. */
enum eclass {
#define ELEMENT(E, Name, file) EC_##E,
#include "elements/list.h"
#undef ELEMENT
	EC_NCLASSES
};

struct rule { struct match m; bool allow; };

/* Index of the first of rules[0..n) whose pattern matches pi, or n: Classifier's output port,
 * IPFilter's verdict rule. */
static inline int rules_first_match(const struct rule *rules, int n, const struct pinfo *pi)
{
	int i = 0;
	while (i < n && !match_eval(&rules[i].m, pi))
		i++;
	return i;
}

struct elem {
	uint8_t cls;
	uint8_t nout;                       /* number of output ports */
	bool named;
	int8_t out[CLICK_MAX_OUT];          /* target element per output port, -1 = unconnected */
	uint32_t out_off[CLICK_MAX_OUT];    /* source offset of each connection (errors) */
	uint32_t decl_off;
	char name[CLICK_NAME_MAX];          /* given name or Class@N */
	/* the element's own state: struct <class file>_state (ELEMENT_STATE), read by elem_state */
	_Alignas(uint64_t) unsigned char state[CLICK_STATE_SIZE];
};

/* An element class's state in struct elem: declared by its file, ELEMENT_STATE(file) { ... };
 * (may_alias: it lives in the state bytes), at most CLICK_STATE_SIZE bytes (ELEMENT_OPS checks). */
#define ELEMENT_STATE(file) struct __attribute__((may_alias)) file##_state
#define elem_state(e, file) ((struct file##_state *)(void *)(e)->state)
#define elem_cstate(e, file) ((const struct file##_state *)(const void *)(e)->state)

/* Queue's state: the runtime drains Queues (click_run_tasks) and frees what they hold. */
ELEMENT_STATE(queue) { uint32_t cap, len, hw; int32_t head, tail; uint64_t drops; };

struct graph {
	int nelem, nconn, nrules;
	int8_t from[CLICK_MAX_NICS];        /* FromDevice element per NIC, -1 = none */
	struct elem e[CLICK_MAX_ELEMENTS];
	struct rule rules[CLICK_MAX_RULES];
};

/* click_parse.c: build *g from text; returns false and fills *err on error. */
bool click_parse(struct graph *g, const char *text, size_t len, int nics, struct click_err *err);

/* ---- an element's arguments (click_parse.c fills, click_args.c reads) ---- */
struct arg { size_t start, end; };      /* one argument: s[start, end) */

/* The parse of one config: the text, the graph being built, the first error, and the arguments
 * of the element being declared. */
struct cparse {
	const char *s;
	size_t n, pos;
	struct graph *g;
	int nics;
	struct cperr err;
	struct arg args[CLICK_MAX_ARGS];
};

/* click_args.c: argument checks shared by elements' configure; false with p->err set. */
/* The argument must be exactly one word (what names it in messages). */
bool click_arg_word(struct cparse *p, const struct arg *a, const char *what, size_t *ws, size_t *wl);
/* One number in [min, max]; range_msg is the message when it is not. */
bool click_arg_num(struct cparse *p, const struct arg *a, const char *what, uint32_t min,
		   uint32_t max, const char *range_msg, uint32_t *out);
/* The single argument of FromDevice/ToDevice (class cn at cls_off): an existing NIC's index. */
bool click_arg_nic(struct cparse *p, const char *cn, size_t cls_off, int nargs, int *nic);
/* An element without arguments (class cn). */
bool click_arg_none(struct cparse *p, const char *cn, int nargs);
/* Room for nargs more Classifier patterns, IPFilter rules or ARPResponder addresses. */
bool click_rules_room(struct cparse *p, size_t cls_off, int nargs);

/* ---- the data path's packet (click.c) ---- */
struct pkt {
	const uint8_t *data;
	uint8_t *wdata;         /* == data when writable (pool buffer or packet.c's copy) */
	uint16_t len;
	uint8_t nic;            /* ingress NIC */
	int32_t buf;            /* pool buffer or -1 */
	uint64_t t0, now;
	bool pi_ok;
	bool has_vh;            /* vh holds offload metadata (partial checksum, GSO) */
	uint32_t segs;          /* wire packets (click_segs) */
	uint64_t wbytes;        /* their bytes */
	struct click_vh vh;
	struct pinfo pi;
};

/* How a packet's trip ends: transmitted, discarded (Discard), dropped, or held in a Queue. */
enum fate { FATE_TX, FATE_DISCARD, FATE_DROP, FATE_QUEUED };

/* An element's push returns the output port the packet leaves by (>= 0; a port without a
 * connection drops it) or PUSH_FATE(f) when its trip ends here. */
#define PUSH_FATE(f) (-1 - (int)(f))

/* The packet's parsed headers (parsed once, on first use). */
static inline const struct pinfo *pkt_info(struct pkt *p)
{
	if (!p->pi_ok) {
		pinfo_parse(&p->pi, p->data, p->len);
		p->pi_ok = true;
	}
	return &p->pi;
}

/* packet.c: the packet services of the runtime and the elements' push. */
struct nicstat { uint64_t rx, tx, drop, rx_bytes, tx_bytes; };
/* The "ingress NIC" of a packet a source element made (click_emit): its drops count here, in no
 * NIC's `stats` entry, and its time is not in the VNF's latency histogram. */
#define CLICK_SRC_NIC CLICK_MAX_NICS
extern struct nicstat click_nicst[CLICK_MAX_NICS + 1]; /* per NIC + CLICK_SRC_NIC, reset by click_init */
/* Reset the NIC counters and addresses, empty the pool (click_init). */
void click_pkt_init(void);
/* Give back the pool buffers of a packet that is in the pool (p->buf >= 0). */
void click_pkt_free(struct pkt *p);
/* Take the first packet held in the list head/tail into *p (a chained frame is gathered into a
 * contiguous buffer); the list must not be empty. */
void click_pkt_unhold(int32_t *head, int32_t *tail, struct pkt *p, uint64_t now);
/* Free every packet held in the list head/tail, counted as drops of their ingress NICs. */
void click_pkt_drop_held(int32_t *head, int32_t *tail);
/* Make the packet's bytes writable (received frames are const: copied once); returns them. */
uint8_t *click_pkt_writable(struct pkt *p);
/* Queue: keep the packet in pool buffers at the tail of the list head/tail (the Queue then owns
 * it); false when the pool has too few free buffers. */
bool click_pkt_hold(struct pkt *p, int32_t *head, int32_t *tail);

/* ---- element classes (elements/list.h: the list; elements/<file>.c: one each; elements.c: the
 * table) ---- */
struct element_ops {
	/* Check the arguments (p->args[0, nargs)) of element e (graph index idx; its class name is
	 * at cls_off), fill e->u and e->nout; false with p->err set. */
	bool (*configure)(struct cparse *p, struct elem *e, int idx, size_t cls_off, int nargs);
	/* Called when the configured graph starts running (NULL: nothing to do). */
	void (*initialize)(struct elem *e, uint64_t now_ns);
	/* Process one packet (see PUSH_FATE). */
	int (*push)(struct graph *g, struct elem *e, struct pkt *p);
	/* Write the element's counters into its stats object (NULL: the element is not listed; the
	 * NIC counters cover FromDevice and ToDevice). */
	void (*stats)(struct jw *w, const struct elem *e);
	/* The element's task (Click's Task with its Timer; NULL: none), run every scheduler round
	 * (click_run_tasks) at now_ns: a source pushes the packets that are due (click_emit). Returns
	 * true if it did work; sets *wake_ns to when it next has work (0 = not before a packet or a
	 * request), which the tickless idle sleeps until at the latest (click_next_timer_ns). */
	bool (*run_task)(struct graph *g, struct elem *e, uint64_t now_ns, uint64_t *wake_ns);
	bool no_inputs;                     /* a source (FromDevice, FastUDPFlows): nothing feeds it */
};
struct element_class {
	const char *name;                   /* the class name in configs */
	const struct element_ops *ops;      /* defined by its file (ELEMENT_OPS, elements/elements.h) */
};
extern const struct element_class click_elements[EC_NCLASSES];

/* click.c: a source element's task sends a packet it made (data: its own writable buffer, which
 * the trip may rewrite) from e's output 0, as if received at now_ns on CLICK_SRC_NIC, and follows
 * it to its fate: FATE_TX, FATE_DISCARD, FATE_QUEUED (copied into the pool), or FATE_DROP (e.g.
 * the egress NIC's TX ring is full, or an unconnected output). */
enum fate click_emit(struct graph *g, struct elem *e, uint8_t *data, uint16_t len, uint64_t now_ns);

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
uint64_t flow_opened(void);       /* sessions ever opened since boot */

/* ---- transmission (packet.c's NIC counters, the flow table) ---- */
/* ToDevice: session accounting, transmit on nic, NIC counters; FATE_TX or FATE_DROP. Inline:
 * every forwarded packet ends here. */
static inline enum fate click_pkt_tx(int out, struct pkt *p)
{
	if (!flow_account(pkt_info(p), (uint32_t)(p->now / 1000000u)))
		return FATE_DROP;
	if (plat_tx(out, p->data, p->len, p->has_vh ? &p->vh : NULL) != 0)
		return FATE_DROP;
	click_nicst[out].tx += p->segs;
	click_nicst[out].tx_bytes += p->wbytes;
	return FATE_TX;
}

#endif
