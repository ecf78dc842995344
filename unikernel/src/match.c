/* fluidvim VNF — frame parsing and match expressions (Classifier patterns, IPFilter rules).
 * See contract/PROTOCOL.md §5. Every read of the frame is bounds-checked against its length. */
#include "click_internal.h"

static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static inline uint32_t rd32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

#define ETH_IP4  0x0800
#define ETH_VLAN 0x8100
#define ETH_QINQ 0x88a8

void pinfo_parse(struct pinfo *p, const uint8_t *d, uint16_t len)
{
	memset(p, 0, sizeof(*p));
	if (len < 14)
		return;
	p->outer_type = p->type = rd16(d + 12);
	p->l3 = 14;
	if ((p->type == ETH_VLAN || p->type == ETH_QINQ) && len >= 18) {
		p->type = rd16(d + 16);     /* one tag */
		p->l3 = 18;
	}
	if (p->type != ETH_IP4 || len < (uint32_t)p->l3 + 20)
		return;
	const uint8_t *ip = d + p->l3;
	uint32_t ihl = (uint32_t)(ip[0] & 15) * 4;
	uint32_t tot = rd16(ip + 2);
	if ((ip[0] >> 4) != 4 || ihl < 20 || p->l3 + ihl > len || tot < ihl)
		return;
	p->ip4 = true;
	p->proto = ip[9];
	p->src = rd32(ip + 12);
	p->dst = rd32(ip + 16);
	p->first_frag = (rd16(ip + 6) & 0x1fff) == 0;
	uint32_t end = p->l3 + tot;             /* IP datagram end; the frame may be padded ... */
	if (end > len)
		end = len;                      /* ... or truncated */
	p->l4 = (uint16_t)(p->l3 + ihl);
	p->l4len = (uint16_t)(end - p->l4);
	if (!p->first_frag)
		return;
	const uint8_t *l4 = d + p->l4;
	if ((p->proto == 6 || p->proto == 17) && p->l4len >= 4) {
		p->ports = true;
		p->sport = rd16(l4);
		p->dport = rd16(l4 + 2);
		if (p->proto == 6 && p->l4len >= 20) {
			uint32_t doff = (uint32_t)(l4[12] >> 4) * 4;
			p->tcp_ok = true;
			p->tcp_flags = l4[13];
			p->tcp_payload = (tot > ihl + doff) ? tot - ihl - doff : 0;
		}
	} else if (p->proto == 1 && p->l4len >= 8) {
		p->icmp_id_ok = true;
		p->sport = p->dport = rd16(l4 + 4);
	}
}

static bool term_eval(const struct mterm *t, const struct pinfo *p)
{
	switch (t->kind) {
	case MT_ALL:
		return true;
	case MT_ETHER:
		return p->l3 != 0 && (p->type == t->lo || p->outer_type == t->lo);
	case MT_PROTO:
		return p->ip4 && p->proto == t->lo;
	case MT_HOST:
		if (!p->ip4)
			return false;
		if (t->dir != MD_DST && (p->src & t->mask) == t->addr)
			return true;
		return t->dir != MD_SRC && (p->dst & t->mask) == t->addr;
	case MT_PORT:
		if (!p->ip4 || !p->ports)
			return false;
		if (t->dir != MD_DST && p->sport >= t->lo && p->sport <= t->hi)
			return true;
		return t->dir != MD_SRC && p->dport >= t->lo && p->dport <= t->hi;
	}
	return false;
}

bool match_eval(const struct match *m, const struct pinfo *p)
{
	for (unsigned i = 0; i < m->nterms; i++)
		if (term_eval(&m->t[i], p) == (bool)m->t[i].neg)
			return false;
	return true;
}

/* ------------------------------------------------------------------ compiler */

static bool parse_ip4(const char *s, size_t n, uint32_t *out)
{
	uint32_t v = 0, part = 0;
	int parts = 0, digits = 0;
	for (size_t i = 0; i <= n; i++) {
		if (i == n || s[i] == '.') {
			if (!digits || parts == 4)
				return false;
			v = (v << 8) | part;
			parts++;
			part = 0;
			digits = 0;
		} else if (s[i] >= '0' && s[i] <= '9') {
			part = part * 10 + (uint32_t)(s[i] - '0');
			if (++digits > 3 || part > 255)
				return false;
		} else {
			return false;
		}
	}
	if (parts != 4)
		return false;
	*out = v;
	return true;
}

bool match_parse_net(const char *s, size_t n, uint32_t *addr, uint32_t *mask)
{
	size_t slash = n;
	uint32_t a, plen = 32;
	for (size_t i = 0; i < n; i++)
		if (s[i] == '/') { slash = i; break; }
	if (!parse_ip4(s, slash, &a))
		return false;
	if (slash < n && !cfg_parse_u32(s + slash + 1, n - slash - 1, 32, &plen))
		return false;
	*mask = plen ? 0xffffffffu << (32 - plen) : 0;
	*addr = a & *mask;
	return true;
}

static bool parse_proto(const char *w, size_t wl, uint32_t *out)
{
	if (cfg_word_is(w, 0, wl, "tcp")) { *out = 6; return true; }
	if (cfg_word_is(w, 0, wl, "udp")) { *out = 17; return true; }
	if (cfg_word_is(w, 0, wl, "icmp")) { *out = 1; return true; }
	return cfg_parse_u32(w, wl, 255, out);
}

#define WORD_IS(lit) cfg_word_is(s, ws, wl, lit)

bool match_compile(const char *s, size_t pos, size_t end, struct match *m, const char *ctx,
		   struct cperr *e)
{
	size_t ws, wl;
	size_t and_off = 0;
	bool pending_and = false;
	memset(m, 0, sizeof(*m));
	while (cfg_word(s, end, &pos, &ws, &wl)) {
		if (WORD_IS("and") || WORD_IS("&&")) {
			if (m->nterms == 0 || pending_and) {
				cperr_set(e, ws, "%s: 'and' must join two terms", ctx);
				return false;
			}
			pending_and = true;
			and_off = ws;
			continue;
		}
		pending_and = false;
		if (m->nterms == MATCH_MAX_TERMS) {
			cperr_set(e, ws, "%s: too many terms (max %d)", ctx, MATCH_MAX_TERMS);
			return false;
		}
		struct mterm *t = &m->t[m->nterms];
		memset(t, 0, sizeof(*t));
		if (WORD_IS("not") || WORD_IS("!")) {
			size_t nws = ws;
			t->neg = 1;
			if (!cfg_word(s, end, &pos, &ws, &wl)) {
				cperr_set(e, nws, "%s: 'not' must be followed by a term", ctx);
				return false;
			}
		}
		if (WORD_IS("-") || WORD_IS("all")) {
			t->kind = MT_ALL;
		} else if (WORD_IS("ip")) {
			size_t p2 = pos, ws2, wl2;
			if (cfg_word(s, end, &p2, &ws2, &wl2) && cfg_word_is(s, ws2, wl2, "proto")) {
				uint32_t v;
				pos = p2;
				if (!cfg_word(s, end, &pos, &ws, &wl)) {
					cperr_set(e, ws2, "%s: 'ip proto' needs a protocol (tcp, udp, icmp or 0..255)", ctx);
					return false;
				}
				if (!parse_proto(s + ws, wl, &v)) {
					cperr_set(e, ws, "%s: unknown protocol '%t' (use tcp, udp, icmp or a number 0..255)",
						  ctx, (int)wl, s + ws);
					return false;
				}
				t->kind = MT_PROTO;
				t->lo = (uint16_t)v;
			} else {
				t->kind = MT_ETHER;
				t->lo = 0x0800;
			}
		} else if (WORD_IS("arp")) {
			t->kind = MT_ETHER;
			t->lo = 0x0806;
		} else if (WORD_IS("ip6")) {
			t->kind = MT_ETHER;
			t->lo = 0x86dd;
		} else if (WORD_IS("ethertype")) {
			size_t kws = ws;
			uint32_t v;
			if (!cfg_word(s, end, &pos, &ws, &wl)) {
				cperr_set(e, kws, "%s: 'ethertype' needs a value, e.g. 'ethertype 0x0806'", ctx);
				return false;
			}
			if (!cfg_parse_u32(s + ws, wl, 0xffff, &v)) {
				cperr_set(e, ws, "%s: bad ethertype '%t' (expected 0x0000..0xffff)", ctx, (int)wl, s + ws);
				return false;
			}
			t->kind = MT_ETHER;
			t->lo = (uint16_t)v;
		} else if (WORD_IS("tcp") || WORD_IS("udp") || WORD_IS("icmp")) {
			uint32_t v = 0;
			parse_proto(s + ws, wl, &v);
			t->kind = MT_PROTO;
			t->lo = (uint16_t)v;
		} else if (WORD_IS("src") || WORD_IS("dst") || WORD_IS("host") || WORD_IS("net") ||
			   WORD_IS("port")) {
			size_t kws = ws, kwl = wl;
			t->dir = MD_ANY;
			if (WORD_IS("src") || WORD_IS("dst")) {
				t->dir = WORD_IS("src") ? MD_SRC : MD_DST;
				if (!cfg_word(s, end, &pos, &ws, &wl) ||
				    !(WORD_IS("host") || WORD_IS("net") || WORD_IS("port"))) {
					size_t at = (ws > kws) ? ws : kws;
					cperr_set(e, at, "%s: expected 'host', 'net' or 'port' after '%t'", ctx,
						  (int)kwl, s + kws);
					return false;
				}
				kws = ws;
				kwl = wl;
			}
			bool is_port = WORD_IS("port"), is_net = WORD_IS("net");
			if (!cfg_word(s, end, &pos, &ws, &wl)) {
				cperr_set(e, kws, "%s: '%t' needs a value, e.g. '%s'", ctx, (int)kwl, s + kws,
					  is_port ? "port 80" : is_net ? "net 10.0.0.0/8" : "host 10.0.0.1");
				return false;
			}
			if (is_port) {
				size_t dash = wl;
				uint32_t lo, hi;
				for (size_t i = 1; i < wl; i++)
					if (s[ws + i] == '-') { dash = i; break; }
				bool ok = cfg_parse_u32(s + ws, dash, 65535, &lo);
				hi = lo;
				if (ok && dash < wl)
					ok = cfg_parse_u32(s + ws + dash + 1, wl - dash - 1, 65535, &hi) && lo <= hi;
				if (!ok) {
					cperr_set(e, ws, "%s: bad port '%t' (expected N or N-M with 0 <= N <= M <= 65535)",
						  ctx, (int)wl, s + ws);
					return false;
				}
				t->kind = MT_PORT;
				t->lo = (uint16_t)lo;
				t->hi = (uint16_t)hi;
			} else {
				size_t slash = wl;
				uint32_t addr, plen = 32;
				for (size_t i = 0; i < wl; i++)
					if (s[ws + i] == '/') { slash = i; break; }
				bool ok = parse_ip4(s + ws, slash, &addr);
				if (ok && slash < wl)
					ok = is_net && cfg_parse_u32(s + ws + slash + 1, wl - slash - 1, 32, &plen);
				else if (ok && is_net)
					ok = false;
				if (!ok) {
					if (is_net)
						cperr_set(e, ws, "%s: bad network '%t' (expected A.B.C.D/L, L = 0..32)",
							  ctx, (int)wl, s + ws);
					else
						cperr_set(e, ws, "%s: bad host address '%t' (expected A.B.C.D)",
							  ctx, (int)wl, s + ws);
					return false;
				}
				t->kind = MT_HOST;
				t->mask = plen ? 0xffffffffu << (32 - plen) : 0;
				t->addr = addr & t->mask;
			}
		} else {
			cperr_set(e, ws, "%s: unknown term '%t' (known: all - ip arp ip6 ethertype"
				  " tcp udp icmp 'ip proto' src dst host net port not)", ctx, (int)wl, s + ws);
			return false;
		}
		m->nterms++;
	}
	if (pending_and) {
		cperr_set(e, and_off, "%s: 'and' at the end needs a term after it", ctx);
		return false;
	}
	if (m->nterms == 0) {
		cperr_set(e, pos, "%s: empty match expression (use 'all' or '-' to match everything)", ctx);
		return false;
	}
	return true;
}
