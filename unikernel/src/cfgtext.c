/* fluidvim VNF — configuration text, shared by the parser (click_parse.c), the elements'
 * argument parsing (click_args.c, elements/) and match expressions (match.c): words, numbers,
 * source positions and the first error with its message. A leaf: it calls no other file of the
 * packet engine.
 */
#include "click_internal.h"

/* ------------------------------------------------------------------ formatting */

struct fbuf { char *b; size_t cap, len; };

static void fput(struct fbuf *f, char c)
{
	if (f->len + 1 < f->cap)
		f->b[f->len++] = c;
}

static void fputs_(struct fbuf *f, const char *s)
{
	while (*s)
		fput(f, *s++);
}

static void fputu(struct fbuf *f, uint64_t v)
{
	char t[24];
	int i = 0;
	do {
		t[i++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (i)
		fput(f, t[--i]);
}

static void vfmt(struct fbuf *f, const char *fmt, __builtin_va_list ap)
{
	for (; *fmt; fmt++) {
		if (*fmt != '%') {
			fput(f, *fmt);
			continue;
		}
		switch (*++fmt) {
		case 's': fputs_(f, __builtin_va_arg(ap, const char *)); break;
		case 'c': fput(f, (char)__builtin_va_arg(ap, int)); break;
		case 'u': fputu(f, __builtin_va_arg(ap, unsigned)); break;
		case 'd': {
			int v = __builtin_va_arg(ap, int);
			if (v < 0) {
				fput(f, '-');
				fputu(f, (uint64_t)(-(int64_t)v));
			} else {
				fputu(f, (uint64_t)v);
			}
			break;
		}
		case 't': {             /* source token: printable ASCII, at most 24 characters */
			int n = __builtin_va_arg(ap, int);
			const char *p = __builtin_va_arg(ap, const char *);
			for (int i = 0; i < n; i++) {
				if (i == 24) {
					fputs_(f, "...");
					break;
				}
				unsigned char c = (unsigned char)p[i];
				fput(f, (c >= 0x20 && c < 0x7f) ? (char)c : '?');
			}
			break;
		}
		case '%': fput(f, '%'); break;
		case '\0': return;
		default: fput(f, '%'); fput(f, *fmt); break;
		}
	}
}

void cfg_fmt(char *buf, size_t cap, const char *fmt, ...)
{
	struct fbuf f = { buf, cap, 0 };
	__builtin_va_list ap;
	__builtin_va_start(ap, fmt);
	vfmt(&f, fmt, ap);
	__builtin_va_end(ap);
	if (cap)
		buf[f.len] = '\0';
}

void cperr_set(struct cperr *e, size_t off, const char *fmt, ...)
{
	if (e->set)
		return;
	struct fbuf f = { e->msg, sizeof(e->msg), 0 };
	__builtin_va_list ap;
	__builtin_va_start(ap, fmt);
	vfmt(&f, fmt, ap);
	__builtin_va_end(ap);
	e->msg[f.len] = '\0';
	e->set = true;
	e->off = off;
}

/* ------------------------------------------------------------------ words and numbers */

static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* Skip blanks and comments in s[*pos, end). An unterminated block comment skips to end. */
static void skip_blank_comments(const char *s, size_t end, size_t *pos)
{
	size_t p = *pos;
	while (p < end) {
		if (is_blank(s[p])) {
			p++;
		} else if (s[p] == '/' && p + 1 < end && s[p + 1] == '/') {
			while (p < end && s[p] != '\n')
				p++;
		} else if (s[p] == '/' && p + 1 < end && s[p + 1] == '*') {
			p += 2;
			while (p < end && !(s[p] == '*' && p + 1 < end && s[p + 1] == '/'))
				p++;
			p = (p < end) ? p + 2 : end;
		} else {
			break;
		}
	}
	*pos = p;
}

bool cfg_word(const char *s, size_t end, size_t *pos, size_t *ws, size_t *wl)
{
	skip_blank_comments(s, end, pos);
	size_t p = *pos;
	if (p >= end)
		return false;
	size_t st = p;
	while (p < end && !is_blank(s[p]) && s[p] != ',' && s[p] != '(' && s[p] != ')' &&
	       !(s[p] == '/' && p + 1 < end && (s[p + 1] == '/' || s[p + 1] == '*')))
		p++;
	if (p == st)
		p++;            /* a lone '(' , ')' or ',' is a word of its own */
	*ws = st;
	*wl = p - st;
	*pos = p;
	return true;
}

bool cfg_word_is(const char *s, size_t ws, size_t wl, const char *lit)
{
	size_t n = strlen(lit);
	return n == wl && memcmp(s + ws, lit, n) == 0;
}

bool cfg_parse_u32(const char *s, size_t wl, uint32_t max, uint32_t *out)
{
	uint64_t v = 0;
	size_t i = 0;
	if (wl == 0)
		return false;
	if (wl > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		for (i = 2; i < wl; i++) {
			char c = s[i];
			int d = is_digit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 :
				(c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
			if (d < 0)
				return false;
			v = v * 16 + (uint64_t)d;
			if (v > max)
				return false;
		}
	} else {
		for (i = 0; i < wl; i++) {
			if (!is_digit(s[i]))
				return false;
			v = v * 10 + (uint64_t)(s[i] - '0');
			if (v > max)
				return false;
		}
	}
	*out = (uint32_t)v;
	return true;
}

/* ------------------------------------------------------------------ positions */

void cfg_linecol(const char *s, size_t n, size_t off, int *line, int *col)
{
	int l = 1, c = 1;
	if (off > n)
		off = n;
	for (size_t i = 0; i < off; i++) {
		if (s[i] == '\n') {
			l++;
			c = 1;
		} else if (((unsigned char)s[i] & 0xc0) != 0x80) {
			c++;
		}
	}
	*line = l;
	*col = c;
}
