/* fluidvim VNF — libFuzzer target for the control-channel JSON reader and writer.
 * Parses the input as one object; on success every string field must be NUL-terminated inside the
 * scratch buffer, and writing the fields back with the jw_* writer must give a line that parses
 * again to the same fields (round trip). Build and run: see FUZZING.md. */
#include <stdlib.h>
#include <stdio.h>
#include "json.h"
#include "nicmac.h"

static char scratch[2048], scratch2[3 * 2048], out[65536];   /* invalid UTF-8 bytes grow to U+FFFD (3 bytes) */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jfield f[12], g[12];
	const char *err = NULL;
	char *line = malloc(size ? size : 1);   /* exact size: no reads past len */
	memcpy(line, data, size);
	int n = json_parse_object(line, size, f, 12, scratch, sizeof(scratch), &err);
	if (n < 0) {
		free(line);
		if (!err)
			abort();
		return 0;
	}
	if (n > 12)
		abort();
	/* arrays: the item reader accepts what the object reader validated (or runs out of
	 * scratch), never reads outside the value; `macs` checks never crash */
	for (int i = 0; i < n; i++) {
		if (f[i].type != JT_OTHER || !f[i].is_array)
			continue;
		struct jfield it[4];
		static char as[256];
		const char *aerr = NULL;
		int k = json_parse_array(f[i].raw, f[i].raw_len, it, 4, as, sizeof(as), &aerr);
		if (k < 0 && (!aerr || strcmp(aerr, "strings too long for the scratch buffer") != 0))
			abort();
	}
	const struct jfield *mf = json_get(f, n, "macs");
	for (int nics = 0; nics <= NICMAC_MAX; nics++) {
		struct macs_req mr;
		char field[16], msg[160], ms[256];
		int rc = macs_from_json(mf, nics, &mr, field, sizeof field, msg, sizeof msg, ms, sizeof ms);
		if (rc != MACS_OK && (memchr(msg, 0, sizeof msg) == NULL || strncmp(msg, "macs", 4) != 0))
			abort();
		if (rc == MACS_OK && mr.n != 0 && mr.n != nics)
			abort();
	}
	free(line);        /* the fields' raw spans point into it: not used from here on */
	struct jw w;
	jw_init(&w, out, sizeof(out));
	jw_obj_begin(&w);
	for (int i = 0; i < n; i++) {
		if (f[i].type == JT_STRING) {
			if (f[i].str < scratch || f[i].str + f[i].str_len >= scratch + sizeof(scratch) ||
			    f[i].str[f[i].str_len] != '\0')
				abort();
		}
		if (memchr(f[i].key, 0, sizeof(f[i].key)) == NULL)
			abort();
		jw_key(&w, f[i].key);
		switch (f[i].type) {
		case JT_STRING: jw_strn(&w, f[i].str, f[i].str_len); break;
		case JT_NUMBER: jw_i64(&w, f[i].num); break;
		case JT_BOOL: jw_bool(&w, f[i].boolean); break;
		case JT_NULL: jw_raw(&w, "null"); break;
		case JT_OTHER: jw_raw(&w, "[]"); break;
		}
	}
	jw_obj_end(&w);
	if (w.overflow)
		abort();
	int m = json_parse_object(out, w.len, g, 12, scratch2, sizeof(scratch2), &err);
	if (m != n) {
		fprintf(stderr, "round trip: %d fields, then %d (%s)\n%s\n", n, m, err ? err : "", out);
		abort();
	}
	for (int i = 0; i < n; i++) {
		if (g[i].type != f[i].type || g[i].num != f[i].num || g[i].boolean != f[i].boolean)
			abort();
		/* keys and strings that were valid UTF-8 survive unchanged */
		if (f[i].type == JT_STRING && g[i].str_len == f[i].str_len &&
		    memcmp(g[i].str, f[i].str, f[i].str_len) != 0)
			abort();
	}
	return 0;
}
