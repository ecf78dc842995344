/* fluidvim VNF — the `macs` field of `configure`: validation only; control.c applies the result
 * after the configuration itself was accepted, so a rejected request changes nothing. */
#include "nicmac.h"

struct sb { char *b; size_t cap, len; };

static void sb_s(struct sb *s, const char *t)
{
	while (*t && s->len + 1 < s->cap)
		s->b[s->len++] = *t++;
	if (s->cap)
		s->b[s->len] = 0;
}

static void sb_sn(struct sb *s, const char *t, size_t n)
{
	for (size_t i = 0; i < n && s->len + 1 < s->cap; i++) {
		char c = t[i];
		s->b[s->len++] = (c >= 0x20 && c < 0x7f && c != '\'') ? c : '?';
	}
	if (s->cap)
		s->b[s->len] = 0;
}

static void sb_u(struct sb *s, unsigned v)
{
	char d[12];
	int i = 0;
	do {
		d[i++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (i && s->len + 1 < s->cap)
		s->b[s->len++] = d[--i];
	if (s->cap)
		s->b[s->len] = 0;
}

static int hexv(char c)
{
	if (c >= '0' && c <= '9') return c - '0';
	if (c >= 'a' && c <= 'f') return c - 'a' + 10;
	if (c >= 'A' && c <= 'F') return c - 'A' + 10;
	return -1;
}

bool mac_parse(const char *s, size_t n, uint8_t out[6])
{
	if (n != 17)
		return false;
	for (int i = 0; i < 6; i++) {
		int hi = hexv(s[3 * i]), lo = hexv(s[3 * i + 1]);
		if (hi < 0 || lo < 0 || (i < 5 && s[3 * i + 2] != ':'))
			return false;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return true;
}

static int fail(int rc, struct sb *fs, struct sb *ms, int idx, const char *what, const char *val, size_t vlen)
{
	sb_s(fs, "macs");
	if (idx >= 0) {
		sb_s(fs, "[");
		sb_u(fs, (unsigned)idx);
		sb_s(fs, "]");
	}
	sb_s(ms, fs->b);
	sb_s(ms, ": ");
	if (val) {
		sb_s(ms, "'");
		sb_sn(ms, val, vlen > 40 ? 40 : vlen);
		sb_s(ms, "' ");
	}
	sb_s(ms, what);
	return rc;
}

int macs_from_json(const struct jfield *f, int nics, struct macs_req *out, char *field, size_t fcap,
		   char *msg, size_t mcap, char *scratch, size_t scap)
{
	struct sb fs = { field, fcap, 0 }, ms = { msg, mcap, 0 };
	struct jfield items[NICMAC_MAX];
	const char *emsg = NULL;
	memset(out, 0, sizeof(*out));
	sb_s(&fs, "");
	sb_s(&ms, "");
	if (!f || f->type == JT_NULL)
		return MACS_OK;
	if (f->type != JT_OTHER || !f->is_array)
		return fail(MACS_BAD_REQUEST, &fs, &ms, -1, "must be an array with one MAC address "
			    "string (or null = keep) per NIC", NULL, 0);
	int n = json_parse_array(f->raw, f->raw_len, items, NICMAC_MAX, scratch, scap, &emsg);
	if (n < 0)
		return fail(MACS_BAD_REQUEST, &fs, &ms, -1, emsg ? emsg : "is not a JSON array", NULL, 0);
	if (n != nics) {
		sb_s(&fs, "macs");
		sb_s(&ms, "macs: ");
		sb_u(&ms, (unsigned)n);
		sb_s(&ms, n == 1 ? " entry for " : " entries for ");
		sb_u(&ms, (unsigned)nics);
		sb_s(&ms, nics == 1 ? " NIC" : " NICs");
		sb_s(&ms, ": give one MAC address (or null = keep) per NIC");
		return MACS_CONFIG;
	}
	for (int i = 0; i < n; i++) {
		const struct jfield *it = &items[i];
		if (it->type == JT_NULL)
			continue;
		if (it->type != JT_STRING)
			return fail(MACS_CONFIG, &fs, &ms, i, "must be a MAC address string or null", NULL, 0);
		if (!mac_parse(it->str, it->str_len, out->mac[i]))
			return fail(MACS_CONFIG, &fs, &ms, i, "is not a MAC address (expected six hex pairs "
				    "like 52:54:00:12:34:56)", it->str, it->str_len);
		if (out->mac[i][0] & 1)
			return fail(MACS_CONFIG, &fs, &ms, i, "is a multicast address (the first octet must "
				    "be even): a NIC needs a unicast address", it->str, it->str_len);
		static const uint8_t zero[6];
		if (!memcmp(out->mac[i], zero, 6))
			return fail(MACS_CONFIG, &fs, &ms, i, "is the all-zero address: a NIC needs a "
				    "unicast address", it->str, it->str_len);
		out->set[i] = true;
	}
	out->n = n;
	return MACS_OK;
}
