/* fluidvim VNF — the configuration language (contract/PROTOCOL.md §5): lexer, parser, validation.
 *
 *   config    := { statement ( ';' | NEWLINE ) }
 *   statement := endpoint { '->' endpoint }
 *   endpoint  := [ '[' N ']' ] element [ '[' N ']' ]      input port before, output port after
 *   element   := NAME '::' CLASS [ '(' args ')' ]         declaration (also allowed inside a chain)
 *              | CLASS '(' args ')' | CLASS                anonymous element
 *              | NAME                                      reference to a declared element
 *
 * Comments: '//' to end of line and '/' '*' ... '*' '/'. A newline ends a statement, except that a
 * chain may continue on the next line after a trailing '->' or before a leading '->'. Arguments are
 * the raw text between the parentheses, split at top-level commas.
 *
 * Every error stops the parse and reports the byte offset of the offending token, converted to a
 * 1-based line and column (columns count UTF-8 code points). Nothing here touches the running
 * graph: the caller parses into the spare graph slot. Recursion: none (the cycle check is iterative).
 * An element's arguments are captured here and checked by its class's configure (elements/<name>.c,
 * through the table click_elements).
 */
#include "click_internal.h"

static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* ", FromDevice, ToDevice, ...": the class names (elements/list.h); messages print it from [2] */
static const char known_classes[] =
#define ELEMENT(E, Name, file) ", " #Name
#include "elements/list.h"
#undef ELEMENT
	;
#define KNOWN_CLASSES (known_classes + 2)

/* ------------------------------------------------------------------ lexer */

enum tk { TK_EOF, TK_NL, TK_SEMI, TK_IDENT, TK_NUM, TK_DCOLON, TK_ARROW, TK_LBRACK, TK_RBRACK,
	  TK_LPAREN, TK_RPAREN, TK_ERR };
struct tok { enum tk k; size_t off, len; };

static void lex(struct cparse *p, struct tok *t)
{
	const char *s = p->s;
	for (;;) {
		while (p->pos < p->n && (s[p->pos] == ' ' || s[p->pos] == '\t' || s[p->pos] == '\r' ||
					 s[p->pos] == '\f' || s[p->pos] == '\v'))
			p->pos++;
		t->off = p->pos;
		t->len = 1;
		if (p->pos >= p->n) {
			t->k = TK_EOF;
			t->len = 0;
			return;
		}
		char c = s[p->pos];
		char c2 = (p->pos + 1 < p->n) ? s[p->pos + 1] : '\0';
		if (c == '/' && c2 == '/') {
			while (p->pos < p->n && s[p->pos] != '\n')
				p->pos++;
			continue;
		}
		if (c == '/' && c2 == '*') {
			size_t q = p->pos + 2;
			bool nl = false;
			while (q < p->n && !(s[q] == '*' && q + 1 < p->n && s[q + 1] == '/')) {
				if (s[q] == '\n')
					nl = true;
				q++;
			}
			if (q >= p->n) {
				cperr_set(&p->err, p->pos, "unterminated /* comment (close it with */)");
				t->k = TK_ERR;
				return;
			}
			p->pos = q + 2;
			if (nl) {       /* a comment spanning lines also ends the statement */
				t->k = TK_NL;
				return;
			}
			continue;
		}
		p->pos++;
		switch (c) {
		case '\n': t->k = TK_NL; return;
		case ';': t->k = TK_SEMI; return;
		case '[': t->k = TK_LBRACK; return;
		case ']': t->k = TK_RBRACK; return;
		case '(': t->k = TK_LPAREN; return;
		case ')': t->k = TK_RPAREN; return;
		case ':':
			if (c2 == ':') {
				p->pos++;
				t->k = TK_DCOLON;
				t->len = 2;
				return;
			}
			cperr_set(&p->err, t->off, "unexpected ':' (declarations use '::', e.g. 'c :: Counter')");
			t->k = TK_ERR;
			return;
		case '-':
			if (c2 == '>') {
				p->pos++;
				t->k = TK_ARROW;
				t->len = 2;
				return;
			}
			cperr_set(&p->err, t->off, "unexpected '-' (connections are written '->')");
			t->k = TK_ERR;
			return;
		default:
			break;
		}
		if (is_alpha(c)) {
			while (p->pos < p->n && (is_alpha(s[p->pos]) || is_digit(s[p->pos])))
				p->pos++;
			t->k = TK_IDENT;
			t->len = p->pos - t->off;
			return;
		}
		if (is_digit(c)) {
			while (p->pos < p->n && is_digit(s[p->pos]))
				p->pos++;
			t->k = TK_NUM;
			t->len = p->pos - t->off;
			return;
		}
		if (c == '#')
			cperr_set(&p->err, t->off, "unexpected '#' (comments start with //)");
		else if (c == ',')
			cperr_set(&p->err, t->off, "unexpected ',' outside parentheses (end statements with ';')");
		else if ((unsigned char)c >= 0x20 && (unsigned char)c < 0x7f)
			cperr_set(&p->err, t->off, "unexpected character '%c'", c);
		else
			cperr_set(&p->err, t->off, "unexpected byte 0x%c%c (configs are ASCII text)",
				  "0123456789abcdef"[(unsigned char)c >> 4], "0123456789abcdef"[c & 15]);
		t->k = TK_ERR;
		return;
	}
}

static void lex_skip_nl(struct cparse *p, struct tok *t)
{
	do
		lex(p, t);
	while (t->k == TK_NL);
}

/* Human description of a token for "expected X, got Y" messages. */
static void tok_desc(struct cparse *p, const struct tok *t, char *buf, size_t cap)
{
	switch (t->k) {
	case TK_EOF: cfg_fmt(buf, cap, "end of config"); break;
	case TK_NL: cfg_fmt(buf, cap, "end of line"); break;
	default: cfg_fmt(buf, cap, "'%t'", (int)t->len, p->s + t->off); break;
	}
}

/* ------------------------------------------------------------------ elements */

static int class_lookup(const char *s, size_t len)
{
	for (int i = 0; i < EC_NCLASSES; i++)
		if (cfg_word_is(s, 0, len, click_elements[i].name))
			return i;
	return -1;
}

static int find_named(struct cparse *p, const char *s, size_t len)
{
	for (int i = 0; i < p->g->nelem; i++) {
		const struct elem *e = &p->g->e[i];
		if (e->named && strlen(e->name) == len && memcmp(e->name, s, len) == 0)
			return i;
	}
	return -1;
}

/* Capture the arguments after '(' (p->pos is just past it). Returns the count or -1. */
static int capture_args(struct cparse *p, size_t lparen_off, const char *cls)
{
	const char *s = p->s;
	size_t pos = p->pos, astart = pos;
	int depth = 1, n = 0;
	while (pos < p->n) {
		char c = s[pos];
		if (c == '/' && pos + 1 < p->n && s[pos + 1] == '/') {
			while (pos < p->n && s[pos] != '\n')
				pos++;
			continue;
		}
		if (c == '/' && pos + 1 < p->n && s[pos + 1] == '*') {
			size_t q = pos + 2;
			while (q < p->n && !(s[q] == '*' && q + 1 < p->n && s[q + 1] == '/'))
				q++;
			if (q >= p->n) {
				cperr_set(&p->err, pos, "unterminated /* comment (close it with */)");
				return -1;
			}
			pos = q + 2;
			continue;
		}
		if (c == '(') {
			if (++depth > 8) {
				cperr_set(&p->err, pos, "parentheses nested too deeply in %s arguments", cls);
				return -1;
			}
		} else if (c == ')' || (c == ',' && depth == 1)) {
			if (c == ')' && --depth > 0) {
				pos++;
				continue;
			}
			if (n == CLICK_MAX_ARGS) {
				cperr_set(&p->err, pos, "%s has too many arguments (max %d)", cls, CLICK_MAX_ARGS);
				return -1;
			}
			p->args[n].start = astart;
			p->args[n].end = pos;
			n++;
			astart = pos + 1;
			if (c == ')') {
				p->pos = pos + 1;
				/* "Class()" has no arguments; any other empty argument is an error */
				for (int i = 0; i < n; i++) {
					size_t q = p->args[i].start, ws, wl;
					if (!cfg_word(s, p->args[i].end, &q, &ws, &wl)) {
						if (n == 1)
							return 0;
						cperr_set(&p->err, q, "%s argument %d is empty (remove the extra ',')",
							  cls, i + 1);
						return -1;
					}
				}
				return n;
			}
		}
		pos++;
	}
	cperr_set(&p->err, lparen_off, "missing ')' for the '(' of %s opened here", cls);
	return -1;
}

static int new_element(struct cparse *p, int cls, size_t cls_off, const struct tok *name, int nargs)
{
	struct graph *g = p->g;
	const char *cn = click_elements[cls].name;
	if (g->nelem >= CLICK_MAX_ELEMENTS) {
		cperr_set(&p->err, name ? name->off : cls_off, "too many elements (max %d)", CLICK_MAX_ELEMENTS);
		return -1;
	}
	int idx = g->nelem;
	struct elem *e = &g->e[idx];
	memset(e, 0, sizeof(*e));
	e->cls = (uint8_t)cls;
	for (int i = 0; i < CLICK_MAX_OUT; i++)
		e->out[i] = -1;
	e->decl_off = (uint32_t)(name ? name->off : cls_off);
	if (name) {
		memcpy(e->name, p->s + name->off, name->len);
		e->name[name->len] = '\0';
		e->named = true;
	} else {
		cfg_fmt(e->name, sizeof(e->name), "%s@%d", cn, idx + 1);
	}
	if (!click_elements[cls].ops->configure(p, e, idx, cls_off, nargs))
		return -1;
	g->nelem++;
	return idx;
}

/* Was `name` declared with '::' anywhere after the current position? Returns its offset or -1. */
static long later_declaration(struct cparse *p, const struct tok *name)
{
	size_t save = p->pos;
	bool was_set = p->err.set;
	struct tok a, b;
	long found = -1;
	p->err.set = true;      /* suppress lexer errors while scanning ahead */
	lex(p, &a);
	while (a.k != TK_EOF && a.k != TK_ERR) {
		lex(p, &b);
		if (a.k == TK_IDENT && b.k == TK_DCOLON && a.len == name->len &&
		    memcmp(p->s + a.off, p->s + name->off, a.len) == 0) {
			found = (long)a.off;
			break;
		}
		a = b;
	}
	p->pos = save;
	p->err.set = was_set;
	return found;
}

/* Parse an element starting at IDENT *t; leaves the following token in *next. */
static int parse_element(struct cparse *p, const struct tok *tp, struct tok *next)
{
	struct tok n, tcopy = *tp;      /* `next` may alias `tp` */
	const struct tok *t = &tcopy;
	const char *s = p->s;
	lex(p, &n);
	if (n.k == TK_DCOLON) {
		struct tok c, a;
		if (t->len >= CLICK_NAME_MAX) {
			cperr_set(&p->err, t->off, "element name '%t' is too long (max %d characters)",
				  (int)t->len, s + t->off, CLICK_NAME_MAX - 1);
			return -1;
		}
		if (class_lookup(s + t->off, t->len) >= 0) {
			cperr_set(&p->err, t->off, "'%t' is a class name; choose another element name (e.g. '%c%t')",
				  (int)t->len, s + t->off, s[t->off] | 0x20, (int)t->len - 1, s + t->off + 1);
			return -1;
		}
		int prev = find_named(p, s + t->off, t->len);
		if (prev >= 0) {
			int l, c2;
			cfg_linecol(s, p->n, p->g->e[prev].decl_off, &l, &c2);
			cperr_set(&p->err, t->off, "element '%t' declared twice (first at line %d col %d); "
				  "use another name", (int)t->len, s + t->off, l, c2);
			return -1;
		}
		lex_skip_nl(p, &c);
		if (c.k != TK_IDENT) {
			char d[48];
			tok_desc(p, &c, d, sizeof(d));
			cperr_set(&p->err, c.off, "expected a class name after '::', got %s", d);
			return -1;
		}
		int cls = class_lookup(s + c.off, c.len);
		if (cls < 0) {
			cperr_set(&p->err, c.off, "unknown element class '%t' (known: %s)",
				  (int)c.len, s + c.off, KNOWN_CLASSES);
			return -1;
		}
		lex(p, &a);
		int nargs = 0;
		if (a.k == TK_LPAREN) {
			nargs = capture_args(p, a.off, click_elements[cls].name);
			if (nargs < 0)
				return -1;
			lex(p, &a);
		}
		*next = a;
		return new_element(p, cls, c.off, t, nargs);
	}
	if (n.k == TK_LPAREN) {
		int cls = class_lookup(s + t->off, t->len);
		if (cls < 0) {
			if (find_named(p, s + t->off, t->len) >= 0)
				cperr_set(&p->err, n.off, "'%t' is an element, not a class: arguments go in its "
					  "declaration", (int)t->len, s + t->off);
			else
				cperr_set(&p->err, t->off, "unknown element class '%t' (known: %s)",
					  (int)t->len, s + t->off, KNOWN_CLASSES);
			return -1;
		}
		int nargs = capture_args(p, n.off, click_elements[cls].name);
		if (nargs < 0)
			return -1;
		lex(p, next);
		return new_element(p, cls, t->off, NULL, nargs);
	}
	*next = n;
	int idx = find_named(p, s + t->off, t->len);
	if (idx >= 0)
		return idx;
	int cls = class_lookup(s + t->off, t->len);
	if (cls >= 0)
		return new_element(p, cls, t->off, NULL, 0);
	long later = later_declaration(p, t);
	if (later >= 0) {
		int l, c;
		cfg_linecol(s, p->n, (size_t)later, &l, &c);
		cperr_set(&p->err, t->off, "element '%t' used before declaration (declared at line %d col %d; "
			  "move the declaration up)", (int)t->len, s + t->off, l, c);
	} else if (s[t->off] >= 'A' && s[t->off] <= 'Z') {
		cperr_set(&p->err, t->off, "unknown element class '%t' (known: %s)",
			  (int)t->len, s + t->off, KNOWN_CLASSES);
	} else {
		cperr_set(&p->err, t->off, "element '%t' is undeclared (declare it first: '%t :: Class(...)')",
			  (int)t->len, s + t->off, (int)t->len, s + t->off);
	}
	return -1;
}

/* '[' N ']' with the '[' already consumed. */
static bool parse_port(struct cparse *p, size_t lb_off, uint32_t *port)
{
	struct tok n, r;
	lex(p, &n);
	if (n.k != TK_NUM || !cfg_parse_u32(p->s + n.off, n.len, 255, port)) {
		if (n.k == TK_NUM)
			cperr_set(&p->err, n.off, "port number '%t' is too large (max 255)", (int)n.len, p->s + n.off);
		else
			cperr_set(&p->err, lb_off, "expected a port number in '[ ]', e.g. '[1]'");
		return false;
	}
	lex(p, &r);
	if (r.k != TK_RBRACK) {
		cperr_set(&p->err, r.off, "expected ']' after port number");
		return false;
	}
	return true;
}

static bool connect_ports(struct cparse *p, int from, uint32_t port, size_t port_off, size_t arrow_off,
		    int to, size_t to_off, uint32_t inport, size_t inport_off)
{
	struct graph *g = p->g;
	struct elem *a = &g->e[from], *b = &g->e[to];
	const char *acn = click_elements[a->cls].name, *bcn = click_elements[b->cls].name;
	if (a->nout == 0) {
		cperr_set(&p->err, arrow_off, "%s has no outputs ('%s' must end its chain)", acn, a->name);
		return false;
	}
	if (port >= a->nout) {
		if (a->nout == 1)
			cperr_set(&p->err, port_off, "%s has 1 output ([0]); output [%u] does not exist", a->name, port);
		else
			cperr_set(&p->err, port_off, "%s has %d outputs ([0]..[%d]); output [%u] does not exist",
				  a->name, a->nout, a->nout - 1, port);
		return false;
	}
	if (click_elements[b->cls].ops->no_inputs) {
		cperr_set(&p->err, to_off, "%s has no inputs ('%s' must start its chain)", bcn, b->name);
		return false;
	}
	if (inport != 0) {
		cperr_set(&p->err, inport_off, "%s has only input [0]; input [%u] does not exist", b->name, inport);
		return false;
	}
	if (a->out[port] >= 0) {
		int l, c;
		cfg_linecol(p->s, p->n, a->out_off[port], &l, &c);
		cperr_set(&p->err, arrow_off, "%s output %u connected twice (first at line %d col %d); "
			  "an output feeds one input: use a Classifier to split", a->name, port, l, c);
		return false;
	}
	if (g->nconn >= CLICK_MAX_CONNS) {
		cperr_set(&p->err, arrow_off, "too many connections (max %d)", CLICK_MAX_CONNS);
		return false;
	}
	a->out[port] = (int8_t)to;
	a->out_off[port] = (uint32_t)arrow_off;
	g->nconn++;
	return true;
}

static bool parse_chain(struct cparse *p, struct tok t, struct tok *end)
{
	int prev = -1;
	uint32_t prev_port = 0;
	size_t prev_port_off = 0, arrow_off = 0;
	for (;;) {
		uint32_t inport = 0;
		size_t inport_off = t.off;
		if (t.k == TK_LBRACK) {
			if (prev < 0) {
				cperr_set(&p->err, t.off, "a chain cannot start with an input port (write 'a -> [0] b')");
				return false;
			}
			if (!parse_port(p, t.off, &inport))
				return false;
			lex(p, &t);
		}
		if (t.k != TK_IDENT) {
			char d[48];
			tok_desc(p, &t, d, sizeof(d));
			cperr_set(&p->err, t.off, prev < 0 ? "expected an element (e.g. 'FromDevice(0)'), got %s"
				  : "expected an element after '->', got %s", d);
			return false;
		}
		size_t el_off = t.off;
		int ei = parse_element(p, &t, &t);
		if (ei < 0)
			return false;
		if (prev >= 0 && !connect_ports(p, prev, prev_port, prev_port_off, arrow_off, ei, el_off, inport, inport_off))
			return false;
		uint32_t port = 0;
		size_t port_off = t.off;
		bool has_port = false;
		if (t.k == TK_LBRACK) {
			if (!parse_port(p, t.off, &port))
				return false;
			has_port = true;
			lex(p, &t);
		}
		if (t.k == TK_NL) {     /* a chain may continue with '->' on the next line */
			size_t save = p->pos;
			struct tok u;
			lex_skip_nl(p, &u);
			if (u.k == TK_ARROW)
				t = u;
			else
				p->pos = save;
		}
		if (t.k == TK_ARROW) {
			arrow_off = t.off;
			prev = ei;
			prev_port = port;
			prev_port_off = has_port ? port_off : t.off;
			lex_skip_nl(p, &t);
			continue;
		}
		if (has_port) {
			cperr_set(&p->err, port_off, "output [%u] of %s is not connected (add '-> element' after it)",
				  port, p->g->e[ei].name);
			return false;
		}
		*end = t;
		return true;
	}
}

/* Iterative DFS: reject a cycle that does not pass through a Queue (a push path that never ends). */
static bool check_cycles(struct cparse *p)
{
	struct graph *g = p->g;
	uint8_t color[CLICK_MAX_ELEMENTS];      /* 0 white, 1 on stack, 2 done */
	int8_t st_node[CLICK_MAX_ELEMENTS];
	uint8_t st_port[CLICK_MAX_ELEMENTS];
	memset(color, 0, sizeof(color));
	for (int root = 0; root < g->nelem; root++) {
		if (color[root])
			continue;
		int sp = 0;
		st_node[0] = (int8_t)root;
		st_port[0] = 0;
		color[root] = 1;
		while (sp >= 0) {
			struct elem *e = &g->e[st_node[sp]];
			bool pushed = false;
			while (e->cls != EC_QUEUE && st_port[sp] < e->nout) {
				int port = st_port[sp]++;
				int v = e->out[port];
				if (v < 0)
					continue;
				if (color[v] == 1) {
					cperr_set(&p->err, e->out_off[port], "connection cycle %s -> %s does not pass "
						  "through a Queue: packets would loop forever (remove the loop)",
						  e->name, g->e[v].name);
					return false;
				}
				if (color[v] == 0) {
					color[v] = 1;
					sp++;
					st_node[sp] = (int8_t)v;
					st_port[sp] = 0;
					pushed = true;
					break;
				}
			}
			if (!pushed) {
				color[st_node[sp]] = 2;
				sp--;
			}
		}
	}
	return true;
}

bool click_parse(struct graph *g, const char *text, size_t len, int nics, struct click_err *err)
{
	static struct cparse p;     /* ~1 KiB of argument ranges: keep it off the stack */
	memset(&p, 0, sizeof(p));
	memset(g, 0, sizeof(*g));
	for (int i = 0; i < CLICK_MAX_NICS; i++)
		g->from[i] = -1;
	p.s = text ? text : "";
	p.n = text ? len : 0;
	p.g = g;
	p.nics = nics;

	struct tok t;
	lex(&p, &t);
	while (!p.err.set && t.k != TK_EOF) {
		if (t.k == TK_NL || t.k == TK_SEMI) {
			lex(&p, &t);
			continue;
		}
		if (t.k == TK_ERR || !parse_chain(&p, t, &t))
			break;
		if (t.k != TK_NL && t.k != TK_SEMI && t.k != TK_EOF) {
			char d[48];
			tok_desc(&p, &t, d, sizeof(d));
			cperr_set(&p.err, t.off, "expected '->', ';' or a newline, got %s", d);
			break;
		}
	}
	if (!p.err.set && g->nelem == 0)
		cperr_set(&p.err, 0, "empty config: nothing to run (e.g. 'FromDevice(0) -> ToDevice(1);')");
	if (!p.err.set) {
		bool any = false;
		for (int i = 0; i < CLICK_MAX_NICS; i++)
			any |= g->from[i] >= 0;
		for (int i = 0; i < g->nelem; i++)        /* a source (FastUDPFlows) makes packets */
			any |= click_elements[g->e[i].cls].ops->run_task != NULL;
		if (!any)
			cperr_set(&p.err, g->e[0].decl_off, "config has no FromDevice: nothing would be forwarded "
				  "(add e.g. 'FromDevice(0) -> ToDevice(1);')");
	}
	if (!p.err.set)
		check_cycles(&p);
	if (p.err.set) {
		if (err) {
			cfg_linecol(p.s, p.n, p.err.off, &err->line, &err->col);
			memcpy(err->message, p.err.msg, sizeof(err->message));
		}
		return false;
	}
	return true;
}
