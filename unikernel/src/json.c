/* fluidvim VNF — minimal JSON writer and reader for the control channel (contract/PROTOCOL.md §2).
 * Freestanding: no libc beyond kstd.h, no allocation, no floating point.
 *
 * Writer: appends into a caller buffer; the buffer is always NUL-terminated (one byte is reserved);
 * on overflow ->overflow is set and nothing more is written. Commas are inserted automatically:
 * every value / key / container opening is preceded by ',' when ->need_comma is set; jw_key clears
 * it (the value follows the ':'), values and container ends set it. jw_raw appends verbatim and then
 * sets need_comma unless the appended text ends in '{', '[', ',' or ':' (so jw_raw(w, "{\"ev\":1")
 * followed by jw_key works as expected).
 * Strings are escaped per RFC 8259; bytes that are not valid UTF-8 are written as \ufffd so the
 * output line is always valid UTF-8 even when it echoes hostile input.
 *
 * Reader: one object per line; top-level members are returned as struct jfield; nested objects and
 * arrays are validated and skipped (JT_OTHER), nesting depth is limited to JSON_MAX_DEPTH. */
#include "json.h"

#define JSON_MAX_DEPTH 16

/* ------------------------------------------------------------------ writer */

void jw_init(struct jw *w, char *buf, size_t cap)
{
	w->buf = buf;
	w->cap = cap;
	w->len = 0;
	w->overflow = (cap == 0);
	w->need_comma = false;
	if (cap)
		buf[0] = '\0';
}

static void jw_putn(struct jw *w, const char *s, size_t n)
{
	if (w->overflow)
		return;
	if (n >= w->cap - w->len) {       /* keep one byte for the terminating NUL */
		w->overflow = true;
		return;
	}
	memcpy(w->buf + w->len, s, n);
	w->len += n;
	w->buf[w->len] = '\0';
}

static void jw_putc(struct jw *w, char c) { jw_putn(w, &c, 1); }

static void jw_sep(struct jw *w)
{
	if (w->need_comma)
		jw_putc(w, ',');
	w->need_comma = false;
}

void jw_raw(struct jw *w, const char *s)
{
	size_t n = strlen(s);
	jw_putn(w, s, n);
	if (n) {
		char c = s[n - 1];
		w->need_comma = !(c == '{' || c == '[' || c == ',' || c == ':');
	}
}

void jw_obj_begin(struct jw *w) { jw_sep(w); jw_putc(w, '{'); w->need_comma = false; }
void jw_obj_end(struct jw *w)   { jw_putc(w, '}'); w->need_comma = true; }
void jw_arr_begin(struct jw *w) { jw_sep(w); jw_putc(w, '['); w->need_comma = false; }
void jw_arr_end(struct jw *w)   { jw_putc(w, ']'); w->need_comma = true; }

static const char hexdig[] = "0123456789abcdef";

/* Length of the valid UTF-8 sequence starting at s[0] (n bytes available), or 0 if invalid. */
static size_t utf8_seq_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	size_t need;
	uint32_t cp;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) { need = 2; cp = c & 0x1f; }
	else if (c >= 0xe0 && c <= 0xef) { need = 3; cp = c & 0x0f; }
	else if (c >= 0xf0 && c <= 0xf4) { need = 4; cp = c & 0x07; }
	else return 0;
	if (n < need)
		return 0;
	for (size_t i = 1; i < need; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if (need == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff)))
		return 0;
	if (need == 4 && (cp < 0x10000 || cp > 0x10ffff))
		return 0;
	return need;
}

static void jw_escaped(struct jw *w, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	jw_putc(w, '"');
	size_t i = 0;
	while (i < n && !w->overflow) {
		/* copy a run of plain characters at once */
		size_t j = i;
		while (j < n && p[j] >= 0x20 && p[j] < 0x80 && p[j] != '"' && p[j] != '\\')
			j++;
		if (j > i) {
			jw_putn(w, s + i, j - i);
			i = j;
			continue;
		}
		unsigned char c = p[i];
		char e[8];
		if (c == '"' || c == '\\') {
			e[0] = '\\'; e[1] = (char)c;
			jw_putn(w, e, 2);
			i++;
		} else if (c < 0x20) {
			e[0] = '\\';
			switch (c) {
			case '\n': e[1] = 'n'; jw_putn(w, e, 2); break;
			case '\t': e[1] = 't'; jw_putn(w, e, 2); break;
			case '\r': e[1] = 'r'; jw_putn(w, e, 2); break;
			case '\b': e[1] = 'b'; jw_putn(w, e, 2); break;
			case '\f': e[1] = 'f'; jw_putn(w, e, 2); break;
			default:
				e[1] = 'u'; e[2] = '0'; e[3] = '0';
				e[4] = hexdig[c >> 4]; e[5] = hexdig[c & 15];
				jw_putn(w, e, 6);
			}
			i++;
		} else {
			size_t k = utf8_seq_len(p + i, n - i);
			if (k) {
				jw_putn(w, s + i, k);
				i += k;
			} else {
				jw_putn(w, "\\ufffd", 6);
				i++;
			}
		}
	}
	jw_putc(w, '"');
}

void jw_key(struct jw *w, const char *key)
{
	jw_sep(w);
	jw_escaped(w, key, strlen(key));
	jw_putc(w, ':');
	w->need_comma = false;
}

void jw_strn(struct jw *w, const char *s, size_t n)
{
	jw_sep(w);
	jw_escaped(w, s, n);
	w->need_comma = true;
}

void jw_str(struct jw *w, const char *s) { jw_strn(w, s, strlen(s)); }

void jw_u64(struct jw *w, uint64_t v)
{
	char tmp[24];
	int i = (int)sizeof(tmp);
	do {
		tmp[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	jw_sep(w);
	jw_putn(w, tmp + i, sizeof(tmp) - (size_t)i);
	w->need_comma = true;
}

void jw_i64(struct jw *w, int64_t v)
{
	if (v < 0) {
		jw_sep(w);
		jw_putc(w, '-');
		/* -(v+1)+1 avoids overflow for INT64_MIN */
		jw_u64(w, (uint64_t)(-(v + 1)) + 1);
	} else {
		jw_u64(w, (uint64_t)v);
	}
}

void jw_bool(struct jw *w, bool v)
{
	jw_sep(w);
	if (v)
		jw_putn(w, "true", 4);
	else
		jw_putn(w, "false", 5);
	w->need_comma = true;
}

void jw_kstr(struct jw *w, const char *k, const char *v) { jw_key(w, k); jw_str(w, v); }
void jw_ku64(struct jw *w, const char *k, uint64_t v)   { jw_key(w, k); jw_u64(w, v); }
void jw_kbool(struct jw *w, const char *k, bool v)      { jw_key(w, k); jw_bool(w, v); }

/* ------------------------------------------------------------------ reader */

struct jr {
	const unsigned char *p, *end;
	char *scratch;
	size_t scap, slen;
	const char *err;
};

static void jr_ws(struct jr *r)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
		r->p++;
}

static bool jr_fail(struct jr *r, const char *msg)
{
	if (!r->err)
		r->err = msg;
	return false;
}

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9') return c - '0';
	if (c >= 'a' && c <= 'f') return c - 'a' + 10;
	if (c >= 'A' && c <= 'F') return c - 'A' + 10;
	return -1;
}

static bool jr_hex4(struct jr *r, uint32_t *out)
{
	if (r->end - r->p < 4)
		return jr_fail(r, "truncated \\u escape");
	uint32_t v = 0;
	for (int i = 0; i < 4; i++) {
		int h = hexval(r->p[i]);
		if (h < 0)
			return jr_fail(r, "invalid \\u escape (expected 4 hex digits)");
		v = (v << 4) | (uint32_t)h;
	}
	r->p += 4;
	*out = v;
	return true;
}

/* Output sink for a string: either the scratch buffer (out==NULL) or a fixed buffer (keys). */
struct jsink { char *buf; size_t cap, len; bool trunc, has_nul; };

static void sink_put(struct jsink *s, const char *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (b[i] == '\0')
			s->has_nul = true;
		if (s->len < s->cap)
			s->buf[s->len++] = b[i];
		else
			s->trunc = true;
	}
}

static size_t utf8_encode(uint32_t cp, char *o)
{
	if (cp < 0x80) { o[0] = (char)cp; return 1; }
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | (cp >> 18));
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* Parse a string starting at the opening quote; unescaped bytes go to `s` (may be NULL: validate only). */
static bool jr_string(struct jr *r, struct jsink *s)
{
	struct jsink dummy = { 0 };
	if (!s)
		s = &dummy;             /* cap 0: everything counts as truncated, which is ignored */
	r->p++;                         /* opening quote */
	for (;;) {
		const unsigned char *run = r->p;
		while (r->p < r->end && *r->p != '"' && *r->p != '\\' && *r->p >= 0x20)
			r->p++;
		if (r->p > run)
			sink_put(s, (const char *)run, (size_t)(r->p - run));
		if (r->p >= r->end)
			return jr_fail(r, "unterminated string");
		unsigned char c = *r->p;
		if (c == '"') {
			r->p++;
			return true;
		}
		if (c < 0x20)
			return jr_fail(r, "control character in string (must be escaped)");
		/* backslash */
		r->p++;
		if (r->p >= r->end)
			return jr_fail(r, "unterminated string");
		c = *r->p++;
		char o[4];
		switch (c) {
		case '"': case '\\': case '/': o[0] = (char)c; sink_put(s, o, 1); break;
		case 'b': sink_put(s, "\b", 1); break;
		case 'f': sink_put(s, "\f", 1); break;
		case 'n': sink_put(s, "\n", 1); break;
		case 'r': sink_put(s, "\r", 1); break;
		case 't': sink_put(s, "\t", 1); break;
		case 'u': {
			uint32_t cp;
			if (!jr_hex4(r, &cp))
				return false;
			if (cp >= 0xd800 && cp <= 0xdbff) {
				/* high surrogate: combine with a following \uDC00..\uDFFF, else U+FFFD */
				uint32_t lo;
				if (r->end - r->p >= 6 && r->p[0] == '\\' && r->p[1] == 'u') {
					const unsigned char *save = r->p;
					r->p += 2;
					if (!jr_hex4(r, &lo))
						return false;
					if (lo >= 0xdc00 && lo <= 0xdfff) {
						cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
					} else {
						cp = 0xfffd;
						r->p = save;    /* re-read the second escape on its own */
					}
				} else {
					cp = 0xfffd;
				}
			} else if (cp >= 0xdc00 && cp <= 0xdfff) {
				cp = 0xfffd;            /* lone low surrogate */
			}
			sink_put(s, o, utf8_encode(cp, o));
			break;
		}
		default:
			return jr_fail(r, "invalid escape in string");
		}
	}
}

static bool isdigit_(unsigned char c) { return c >= '0' && c <= '9'; }

static bool jr_number(struct jr *r, int64_t *num, bool *is_int)
{
	bool neg = false, ovf = false;
	uint64_t mag = 0;
	if (r->p < r->end && *r->p == '-') {
		neg = true;
		r->p++;
	}
	if (r->p >= r->end || !isdigit_(*r->p))
		return jr_fail(r, "invalid number");
	if (*r->p == '0') {
		r->p++;
		if (r->p < r->end && isdigit_(*r->p))
			return jr_fail(r, "invalid number (leading zero)");
	} else {
		while (r->p < r->end && isdigit_(*r->p)) {
			unsigned d = (unsigned)(*r->p - '0');
			if (mag > (UINT64_MAX - d) / 10)
				ovf = true;
			else
				mag = mag * 10 + d;
			r->p++;
		}
	}
	bool integral = true;
	if (r->p < r->end && *r->p == '.') {
		r->p++;
		if (r->p >= r->end || !isdigit_(*r->p))
			return jr_fail(r, "invalid number (digit expected after '.')");
		while (r->p < r->end && isdigit_(*r->p))
			r->p++;
		integral = false;
	}
	if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
		r->p++;
		if (r->p < r->end && (*r->p == '+' || *r->p == '-'))
			r->p++;
		if (r->p >= r->end || !isdigit_(*r->p))
			return jr_fail(r, "invalid number (digit expected in exponent)");
		while (r->p < r->end && isdigit_(*r->p))
			r->p++;
		integral = false;
	}
	/* num: exact for integers within int64; otherwise the integer part, saturated */
	const uint64_t lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	if (ovf || mag > lim) {
		ovf = true;
		mag = lim;
	}
	if (neg)
		*num = (mag == (uint64_t)INT64_MAX + 1) ? INT64_MIN : -(int64_t)mag;
	else
		*num = (int64_t)mag;
	*is_int = integral && !ovf;
	return true;
}

static bool jr_lit(struct jr *r, const char *lit, size_t n)
{
	if ((size_t)(r->end - r->p) < n || memcmp(r->p, lit, n) != 0)
		return jr_fail(r, "invalid literal (expected true, false or null)");
	r->p += n;
	return true;
}

/* Validate and skip a nested value. depth = nesting level of the container being entered. */
static bool jr_skip(struct jr *r, int depth);

static bool jr_skip_container(struct jr *r, int depth)
{
	bool obj = (*r->p == '{');
	unsigned char close = obj ? '}' : ']';
	if (depth > JSON_MAX_DEPTH)
		return jr_fail(r, "nesting too deep");
	r->p++;
	jr_ws(r);
	if (r->p < r->end && *r->p == close) {
		r->p++;
		return true;
	}
	for (;;) {
		jr_ws(r);
		if (obj) {
			if (r->p >= r->end || *r->p != '"')
				return jr_fail(r, "expected string key");
			if (!jr_string(r, NULL))
				return false;
			jr_ws(r);
			if (r->p >= r->end || *r->p != ':')
				return jr_fail(r, "expected ':' after key");
			r->p++;
			jr_ws(r);
		}
		if (!jr_skip(r, depth + 1))
			return false;
		jr_ws(r);
		if (r->p >= r->end)
			return jr_fail(r, obj ? "unterminated object" : "unterminated array");
		if (*r->p == ',') {
			r->p++;
			continue;
		}
		if (*r->p == close) {
			r->p++;
			return true;
		}
		return jr_fail(r, obj ? "expected ',' or '}' in object" : "expected ',' or ']' in array");
	}
}

static bool jr_skip(struct jr *r, int depth)
{
	int64_t n;
	bool b;
	if (r->p >= r->end)
		return jr_fail(r, "value expected");
	switch (*r->p) {
	case '{': case '[': return jr_skip_container(r, depth);
	case '"': return jr_string(r, NULL);
	case 't': return jr_lit(r, "true", 4);
	case 'f': return jr_lit(r, "false", 5);
	case 'n': return jr_lit(r, "null", 4);
	default:
		if (*r->p == '-' || isdigit_(*r->p))
			return jr_number(r, &n, &b);
		return jr_fail(r, "unexpected character (value expected)");
	}
}

/* One value at r->p into *out (strings unescaped into the scratch buffer; containers validated,
 * skipped and exposed as JT_OTHER with their text). */
static bool jr_value(struct jr *r, struct jfield *out)
{
	unsigned char c = *r->p;
	if (c == '"') {
		/* string value into scratch (with room for its NUL) */
		size_t start = r->slen;
		struct jsink vs = { NULL, 0, 0, false, false };
		if (r->scratch && r->scap > start) {
			vs.buf = r->scratch + start;
			vs.cap = r->scap - start;
		}
		if (!jr_string(r, &vs))
			return false;
		if (vs.trunc || vs.len >= vs.cap)
			return jr_fail(r, "strings too long for the scratch buffer");
		vs.buf[vs.len] = '\0';
		r->slen += vs.len + 1;
		out->type = JT_STRING;
		out->str = vs.buf;
		out->str_len = vs.len;
	} else if (c == '-' || isdigit_(c)) {
		if (!jr_number(r, &out->num, &out->is_int))
			return false;
		out->type = JT_NUMBER;
	} else if (c == 't' || c == 'f') {
		bool t = (c == 't');
		if (!jr_lit(r, t ? "true" : "false", t ? 4 : 5))
			return false;
		out->type = JT_BOOL;
		out->boolean = t;
	} else if (c == 'n') {
		if (!jr_lit(r, "null", 4))
			return false;
		out->type = JT_NULL;
	} else if (c == '{' || c == '[') {
		const unsigned char *start = r->p;
		if (!jr_skip_container(r, 2))
			return false;
		out->type = JT_OTHER;
		out->is_array = (c == '[');
		out->raw = (const char *)start;
		out->raw_len = (size_t)(r->p - start);
	} else {
		return jr_fail(r, "unexpected character (value expected)");
	}
	return true;
}

/* The frame shared by objects and arrays. jr_open: past the opening bracket; 1 = the
 * container is empty (and closed), 0 = members follow, -1 = error (*err_msg set). */
static int jr_open(struct jr *r, const char *in, char open, char close, const char *empty_msg,
		   const char *expect_msg, const char **err_msg)
{
	*err_msg = NULL;
	if (!in) {
		*err_msg = "empty input";
		return -1;
	}
	jr_ws(r);
	if (r->p >= r->end || *r->p != open) {
		*err_msg = (r->p >= r->end) ? empty_msg : expect_msg;
		return -1;
	}
	r->p++;
	jr_ws(r);
	if (r->p < r->end && *r->p == close) {
		r->p++;
		return 1;
	}
	return 0;
}

/* After a member: 1 = a ',' (another member follows), 0 = the closing bracket, -1 = error. */
static int jr_next(struct jr *r, char close, const char *unterminated, const char *expected)
{
	jr_ws(r);
	if (r->p >= r->end) {
		jr_fail(r, unterminated);
		return -1;
	}
	if (*r->p == ',') {
		r->p++;
		return 1;
	}
	if (*r->p == close) {
		r->p++;
		return 0;
	}
	jr_fail(r, expected);
	return -1;
}

/* The end of a parse: only white space may follow the container. */
static int jr_close(struct jr *r, int n, bool ok, const char *trailing, const char **err_msg)
{
	if (!ok) {
		*err_msg = r->err ? r->err : "syntax error";
		return -1;
	}
	jr_ws(r);
	if (r->p != r->end) {
		*err_msg = trailing;
		return -1;
	}
	return n;
}

int json_parse_object(const char *line, size_t len, struct jfield *fields, int max,
		      char *scratch, size_t scratch_cap, const char **err_msg)
{
	struct jr r = { (const unsigned char *)line, (const unsigned char *)line + len,
			scratch, scratch_cap, 0, NULL };
	int n = 0;
	const char *dummy;
	if (!err_msg)
		err_msg = &dummy;
	int st = jr_open(&r, line, '{', '}', "empty line (expected a JSON object)",
			 "expected a JSON object", err_msg);
	if (st < 0)
		return -1;
	if (st == 1)
		goto done;
	for (;;) {
		jr_ws(&r);
		if (r.p >= r.end || *r.p != '"') {
			jr_fail(&r, "expected string key");
			goto fail;
		}
		/* key */
		char keybuf[sizeof(fields[0].key)];
		struct jsink ks = { keybuf, sizeof(keybuf) - 1, 0, false, false };
		if (!jr_string(&r, &ks))
			goto fail;
		jr_ws(&r);
		if (r.p >= r.end || *r.p != ':') {
			jr_fail(&r, "expected ':' after key");
			goto fail;
		}
		r.p++;
		jr_ws(&r);
		if (r.p >= r.end) {
			jr_fail(&r, "value expected");
			goto fail;
		}
		struct jfield tmp;
		memset(&tmp, 0, sizeof(tmp));
		if (ks.trunc || ks.has_nul) {
			/* never matches a known (ASCII, NUL-free, short) key */
			size_t k = ks.len < sizeof(tmp.key) - 2 ? ks.len : sizeof(tmp.key) - 2;
			memcpy(tmp.key, keybuf, k);
			for (size_t i = 0; i < k; i++)
				if (tmp.key[i] == '\0')
					tmp.key[i] = (char)0xff;
			tmp.key[k] = (char)0xff;
			tmp.key[k + 1] = '\0';
		} else {
			memcpy(tmp.key, keybuf, ks.len);
			tmp.key[ks.len] = '\0';
		}
		if (!jr_value(&r, &tmp))
			goto fail;
		if (n < max && fields)
			fields[n++] = tmp;
		st = jr_next(&r, '}', "unterminated object", "expected ',' or '}' in object");
		if (st < 0)
			goto fail;
		if (st == 0)
			break;
	}
done:
	return jr_close(&r, n, true, "trailing characters after the object", err_msg);
fail:
	return jr_close(&r, n, false, NULL, err_msg);
}

const struct jfield *json_get(const struct jfield *f, int n, const char *key)
{
	if (!f || !key)
		return NULL;
	for (int i = 0; i < n; i++)
		if (strcmp(f[i].key, key) == 0)
			return &f[i];
	return NULL;
}

int json_parse_array(const char *raw, size_t len, struct jfield *items, int max,
		     char *scratch, size_t scratch_cap, const char **err_msg)
{
	struct jr r = { (const unsigned char *)raw, (const unsigned char *)raw + len,
			scratch, scratch_cap, 0, NULL };
	int n = 0;
	const char *dummy;
	if (!err_msg)
		err_msg = &dummy;
	int st = jr_open(&r, raw, '[', ']', "expected a JSON array", "expected a JSON array",
			 err_msg);
	if (st < 0)
		return -1;
	if (st == 1)
		goto done;
	for (;;) {
		struct jfield tmp;
		memset(&tmp, 0, sizeof(tmp));
		jr_ws(&r);
		if (r.p >= r.end) {
			jr_fail(&r, "value expected");
			goto fail;
		}
		if (!jr_value(&r, &tmp))
			goto fail;
		if (n < max && items)
			items[n] = tmp;
		n++;
		st = jr_next(&r, ']', "unterminated array", "expected ',' or ']' in array");
		if (st < 0)
			goto fail;
		if (st == 0)
			break;
	}
done:
	return jr_close(&r, n, true, "trailing characters after the array", err_msg);
fail:
	return jr_close(&r, n, false, NULL, err_msg);
}
