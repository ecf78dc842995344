/* fluidvim VNF — minimal JSON for the control channel (see contract/PROTOCOL.md). Freestanding. */
#ifndef FLUIDVIM_JSON_H
#define FLUIDVIM_JSON_H
#include "kstd.h"

/* ---- writer: appends into a fixed buffer; on overflow sets ->overflow and stops writing ---- */
struct jw { char *buf; size_t len, cap; bool overflow; bool need_comma; };
void jw_init(struct jw *w, char *buf, size_t cap);
void jw_raw(struct jw *w, const char *s);              /* append verbatim */
void jw_obj_begin(struct jw *w);                        /* '{' */
void jw_obj_end(struct jw *w);                          /* '}' */
void jw_arr_begin(struct jw *w);
void jw_arr_end(struct jw *w);
void jw_key(struct jw *w, const char *key);             /* ["," ] "key": */
void jw_str(struct jw *w, const char *s);               /* escaped string value */
void jw_strn(struct jw *w, const char *s, size_t n);
void jw_u64(struct jw *w, uint64_t v);
void jw_i64(struct jw *w, int64_t v);
void jw_bool(struct jw *w, bool v);
/* handy: key + value */
void jw_kstr(struct jw *w, const char *k, const char *v);
void jw_ku64(struct jw *w, const char *k, uint64_t v);
void jw_kbool(struct jw *w, const char *k, bool v);

/* ---- reader: one flat-or-nested JSON object per line. Values of top-level keys are exposed;
 *      nested objects/arrays are skipped (validated) and reported as JT_OTHER. ---- */
enum jtype { JT_STRING, JT_NUMBER, JT_BOOL, JT_NULL, JT_OTHER };
struct jfield {
	char key[32];          /* truncated keys never match a known key */
	enum jtype type;
	const char *str;       /* unescaped, NUL-terminated, points into the scratch buffer */
	size_t str_len;
	int64_t num;           /* integers only; fraction/exponent -> is_int=false */
	bool is_int;
	bool boolean;
	bool is_array;         /* JT_OTHER: an array (else an object) */
	const char *raw;       /* JT_OTHER: the value's text in the input line ... */
	size_t raw_len;        /* ... and its length (for json_parse_array) */
};
/* Parses `line` (len bytes, need not be NUL-terminated). Unescaped strings are stored in
 * scratch[0..scratch_cap). Returns the number of fields (<= max) or -1 on a syntax error,
 * with *err_msg set to a static message. */
int json_parse_object(const char *line, size_t len, struct jfield *fields, int max,
		      char *scratch, size_t scratch_cap, const char **err_msg);
/* Parses one JSON array (e.g. a JT_OTHER field's raw/raw_len). Items are exposed like top-level
 * fields (key empty; nested values JT_OTHER). Returns the number of items in the array, which may
 * exceed `max` (only the first `max` are stored), or -1 on a syntax error with *err_msg set. */
int json_parse_array(const char *raw, size_t len, struct jfield *items, int max,
		     char *scratch, size_t scratch_cap, const char **err_msg);
const struct jfield *json_get(const struct jfield *f, int n, const char *key);

#endif
