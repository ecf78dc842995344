/* fluidvim VNF — host tests for json.c (writer and reader). */
#include "test.h"
#include "json.h"

static char buf[4096];
static char scratch[1024];
static struct jfield f[16];
static const char *err;

static int parse(const char *s)
{
	return json_parse_object(s, strlen(s), f, 16, scratch, sizeof(scratch), &err);
}

static void writer_structure(void)
{
	struct jw w;
	jw_init(&w, buf, sizeof(buf));
	jw_obj_begin(&w);
	jw_ku64(&w, "id", 7);
	jw_kbool(&w, "ok", true);
	jw_key(&w, "result");
	jw_obj_begin(&w);
	jw_key(&w, "a");
	jw_arr_begin(&w);
	jw_u64(&w, 1);
	jw_i64(&w, -2);
	jw_str(&w, "x");
	jw_obj_begin(&w);
	jw_obj_end(&w);
	jw_arr_begin(&w);
	jw_arr_end(&w);
	jw_bool(&w, false);
	jw_arr_end(&w);
	jw_kstr(&w, "s", "v");
	jw_obj_end(&w);
	jw_obj_end(&w);
	CHECK(!w.overflow);
	CHECK_STR(buf, "{\"id\":7,\"ok\":true,\"result\":{\"a\":[1,-2,\"x\",{},[],false],\"s\":\"v\"}}");
	CHECK_EQ(w.len, strlen(buf));
}

static void writer_numbers(void)
{
	struct jw w;
	jw_init(&w, buf, sizeof(buf));
	jw_arr_begin(&w);
	jw_u64(&w, 0);
	jw_u64(&w, UINT64_MAX);
	jw_i64(&w, INT64_MIN);
	jw_i64(&w, INT64_MAX);
	jw_i64(&w, -1);
	jw_arr_end(&w);
	CHECK_STR(buf, "[0,18446744073709551615,-9223372036854775808,9223372036854775807,-1]");
}

static void writer_escapes(void)
{
	struct jw w;
	jw_init(&w, buf, sizeof(buf));
	jw_str(&w, "a\"b\\c\n\t\r\b\f\x01\x1f/\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
	CHECK_STR(buf, "\"a\\\"b\\\\c\\n\\t\\r\\b\\f\\u0001\\u001f/\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"");
	/* invalid UTF-8 (lone continuation, overlong, truncated, surrogate) becomes U+FFFD */
	jw_init(&w, buf, sizeof(buf));
	jw_str(&w, "\x80" "A" "\xc0\xaf" "\xed\xa0\x80" "\xe2\x82");
	CHECK_STR(buf, "\"\\ufffdA\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\"");
	jw_init(&w, buf, sizeof(buf));
	jw_strn(&w, "a\0b", 3);
	CHECK_STR(buf, "\"a\\u0000b\"");
}

static void writer_raw_and_comma(void)
{
	struct jw w;
	jw_init(&w, buf, sizeof(buf));
	jw_raw(&w, "{\"ev\":\"ready\"");
	jw_ku64(&w, "n", 1);
	jw_raw(&w, ",\"x\":");
	jw_u64(&w, 2);
	jw_obj_end(&w);
	CHECK_STR(buf, "{\"ev\":\"ready\",\"n\":1,\"x\":2}");
	jw_init(&w, buf, sizeof(buf));
	jw_raw(&w, "{");
	jw_ku64(&w, "a", 1);
	jw_obj_end(&w);
	CHECK_STR(buf, "{\"a\":1}");
}

static void writer_overflow(void)
{
	char small[8];
	struct jw w;
	memset(small, 'Z', sizeof(small));
	jw_init(&w, small, sizeof(small));
	jw_str(&w, "abcdef");          /* needs 8 bytes + NUL */
	CHECK(w.overflow);
	CHECK(w.len < sizeof(small));
	CHECK_EQ(small[w.len], 0);
	size_t len = w.len;
	jw_u64(&w, 5);                 /* nothing more is written */
	CHECK_EQ(w.len, len);
	jw_init(&w, small, sizeof(small));
	jw_str(&w, "abcd");            /* "abcd" quoted = 6 bytes + NUL fits */
	CHECK(!w.overflow);
	CHECK_STR(small, "\"abcd\"");
	jw_init(&w, small, 0);
	CHECK(w.overflow);
}

static void reader_basic(void)
{
	int n = parse(" {\"id\": 12, \"op\":\"ping\", \"t\":true, \"f\":false, \"z\":null, \"neg\":-5 }\r\n");
	CHECK_EQ(n, 6);
	const struct jfield *id = json_get(f, n, "id");
	CHECK(id && id->type == JT_NUMBER && id->is_int && id->num == 12);
	const struct jfield *op = json_get(f, n, "op");
	CHECK(op && op->type == JT_STRING);
	CHECK_STR(op ? op->str : NULL, "ping");
	CHECK_EQ(op ? op->str_len : 0, 4);
	CHECK(json_get(f, n, "t")->type == JT_BOOL && json_get(f, n, "t")->boolean);
	CHECK(json_get(f, n, "f")->type == JT_BOOL && !json_get(f, n, "f")->boolean);
	CHECK(json_get(f, n, "z")->type == JT_NULL);
	CHECK_EQ(json_get(f, n, "neg")->num, -5);
	CHECK(json_get(f, n, "missing") == NULL);
	CHECK_EQ(parse("{}"), 0);
	CHECK_EQ(parse("  { }  "), 0);
}

static void reader_strings(void)
{
	int n = parse("{\"s\":\"a\\\"b\\\\c\\/d\\n\\t\\r\\b\\f\",\"u\":\"\\u0041\\u00e9\\u20ac\\ud83d\\ude00\","
		      "\"lone\":\"\\ud800x\\udc00\",\"hi2\":\"\\ud800\\u0041\",\"raw\":\"\xc3\xa9\"}");
	CHECK_EQ(n, 5);
	CHECK_STR(json_get(f, n, "s")->str, "a\"b\\c/d\n\t\r\b\f");
	CHECK_STR(json_get(f, n, "u")->str, "A\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
	CHECK_EQ(json_get(f, n, "u")->str_len, 1 + 2 + 3 + 4);
	CHECK_STR(json_get(f, n, "lone")->str, "\xef\xbf\xbdx\xef\xbf\xbd");
	CHECK_STR(json_get(f, n, "hi2")->str, "\xef\xbf\xbd" "A");
	CHECK_STR(json_get(f, n, "raw")->str, "\xc3\xa9");
	/* escaped NUL: length is exact, the key-like comparison stops at the NUL */
	n = parse("{\"config\":\"a\\u0000b\"}");
	CHECK_EQ(n, 1);
	CHECK_EQ(f[0].str_len, 3);
	CHECK(memcmp(f[0].str, "a\0b", 4) == 0);
	/* escaped key */
	n = parse("{\"\\u006fp\":\"x\"}");
	CHECK(json_get(f, n, "op") != NULL);
}

static void reader_numbers(void)
{
	int n = parse("{\"max\":9223372036854775807,\"min\":-9223372036854775808,\"big\":9223372036854775808,"
		      "\"huge\":123456789012345678901234567890,\"frac\":1.5,\"exp\":1e3,\"z\":0,\"nz\":-0,\"e2\":2E-2}");
	CHECK_EQ(n, 9);
	CHECK(json_get(f, n, "max")->is_int && json_get(f, n, "max")->num == INT64_MAX);
	CHECK(json_get(f, n, "min")->is_int && json_get(f, n, "min")->num == INT64_MIN);
	CHECK(!json_get(f, n, "big")->is_int);
	CHECK(json_get(f, n, "big")->num == INT64_MAX);
	CHECK(!json_get(f, n, "huge")->is_int);
	CHECK(!json_get(f, n, "frac")->is_int && json_get(f, n, "frac")->num == 1);
	CHECK(!json_get(f, n, "exp")->is_int);
	CHECK(json_get(f, n, "z")->is_int && json_get(f, n, "z")->num == 0);
	CHECK(json_get(f, n, "nz")->is_int && json_get(f, n, "nz")->num == 0);
	CHECK(!json_get(f, n, "e2")->is_int);
	const char *bad[] = { "{\"a\":01}", "{\"a\":-}", "{\"a\":1.}", "{\"a\":.5}", "{\"a\":1e}", "{\"a\":+1}",
			      "{\"a\":1.e5}", "{\"a\":0x10}" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err = NULL;
		CHECK_EQ(parse(bad[i]), -1);
		CHECK(err != NULL);
	}
}

static void reader_nested(void)
{
	int n = parse("{\"a\":{\"b\":[1,2,{\"c\":\"]}\"}],\"d\":{}},\"e\":[],\"id\":3}");
	CHECK_EQ(n, 3);
	CHECK(json_get(f, n, "a")->type == JT_OTHER);
	CHECK(json_get(f, n, "e")->type == JT_OTHER);
	CHECK_EQ(json_get(f, n, "id")->num, 3);
	/* depth: 16 levels of nesting are fine, 17 are not */
	char deep[128];
	size_t k = 0;
	deep[k++] = '{';
	memcpy(deep + k, "\"a\":", 4);
	k += 4;
	for (int i = 0; i < 15; i++)
		deep[k++] = '[';
	for (int i = 0; i < 15; i++)
		deep[k++] = ']';
	deep[k++] = '}';
	deep[k] = 0;
	CHECK_EQ(parse(deep), 1);
	k = 5;
	for (int i = 0; i < 16; i++)
		deep[k++] = '[';
	for (int i = 0; i < 16; i++)
		deep[k++] = ']';
	deep[k++] = '}';
	deep[k] = 0;
	CHECK_EQ(parse(deep), -1);
	CHECK_STR(err, "nesting too deep");
	/* a very deep input fails without deep recursion */
	static char huge[20000];
	huge[0] = '{';
	memcpy(huge + 1, "\"a\":", 4);
	memset(huge + 5, '[', sizeof(huge) - 6);
	huge[sizeof(huge) - 1] = 0;
	CHECK_EQ(parse(huge), -1);
}

static void reader_errors(void)
{
	struct { const char *in; const char *msg; } cases[] = {
		{ "", "empty line (expected a JSON object)" },
		{ "[1]", "expected a JSON object" },
		{ "{", "expected string key" },
		{ "{\"a\"", "expected ':' after key" },
		{ "{\"a\":", "value expected" },
		{ "{\"a\":1", "unterminated object" },
		{ "{\"a\":1,}", "expected string key" },
		{ "{\"a\" 1}", "expected ':' after key" },
		{ "{\"a\":1 \"b\":2}", "expected ',' or '}' in object" },
		{ "{\"a\":tru}", "invalid literal (expected true, false or null)" },
		{ "{\"a\":\"x}", "unterminated string" },
		{ "{\"a\":\"x\ny\"}", "control character in string (must be escaped)" },
		{ "{\"a\":\"\\x\"}", "invalid escape in string" },
		{ "{\"a\":\"\\u12\"}", "invalid \\u escape (expected 4 hex digits)" },
		{ "{\"a\":\"\\u12", "truncated \\u escape" },
		{ "{\"a\":1} x", "trailing characters after the object" },
		{ "{\"a\":[1,]}", "unexpected character (value expected)" },
		{ "{\"a\":[1 2]}", "expected ',' or ']' in array" },
		{ "{\"a\":{\"b\" 1}}", "expected ':' after key" },
		{ "{\"a\":@}", "unexpected character (value expected)" },
		{ "{1:2}", "expected string key" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		err = NULL;
		int n = parse(cases[i].in);
		if (n != -1 || !err || strcmp(err, cases[i].msg)) {
			t_failed_checks++;
			fprintf(stderr, "  case %zu '%s': n=%d err='%s', expected '%s'\n", i, cases[i].in, n,
				err ? err : "(null)", cases[i].msg);
		}
	}
	/* not NUL-terminated input: only len bytes are read */
	const char partial[] = { '{', '"', 'a', '"', ':', '1', '}', 'X' };
	CHECK_EQ(json_parse_object(partial, 7, f, 16, scratch, sizeof(scratch), &err), 1);
	CHECK_EQ(json_parse_object(partial, 6, f, 16, scratch, sizeof(scratch), &err), -1);
}

static void reader_limits(void)
{
	/* long keys are truncated and never match */
	int n = parse("{\"abcdefghijklmnopqrstuvwxyz0123456789\":1,\"abcdefghijklmnopqrstuvwxyz01234\":2}");
	CHECK_EQ(n, 2);
	CHECK(json_get(f, n, "abcdefghijklmnopqrstuvwxyz0123456789") == NULL);
	CHECK(json_get(f, n, "abcdefghijklmnopqrstuvwxyz012") == NULL);
	CHECK_EQ(json_get(f, n, "abcdefghijklmnopqrstuvwxyz01234")->num, 2);   /* 31 chars fit */
	/* key with an escaped NUL never matches its prefix */
	n = parse("{\"op\\u0000x\":\"stats\"}");
	CHECK_EQ(n, 1);
	CHECK(json_get(f, n, "op") == NULL);
	/* more fields than `max`: the rest are validated but dropped */
	struct jfield two[2];
	n = json_parse_object("{\"a\":1,\"b\":2,\"c\":3}", 19, two, 2, scratch, sizeof(scratch), &err);
	CHECK_EQ(n, 2);
	CHECK_EQ(json_parse_object("{\"a\":1,\"b\":2,\"c\":x}", 19, two, 2, scratch, sizeof(scratch), &err), -1);
	/* scratch exhaustion is an error, not an overflow */
	char tiny[8];
	CHECK_EQ(json_parse_object("{\"a\":\"12345678\"}", 16, f, 16, tiny, sizeof(tiny), &err), -1);
	CHECK_STR(err, "strings too long for the scratch buffer");
	CHECK_EQ(json_parse_object("{\"a\":\"1234567\"}", 15, f, 16, tiny, sizeof(tiny), &err), 1);
	CHECK_STR(f[0].str, "1234567");
	CHECK_EQ(json_parse_object("{\"a\":\"1\",\"b\":\"2\"}", 17, f, 16, NULL, 0, &err), -1);
	CHECK_EQ(json_parse_object("{\"a\":1}", 7, f, 16, NULL, 0, &err), 1);
}

static void roundtrip(void)
{
	struct jw w;
	const char weird[] = "line1\nline2 \"q\" \\ \x01 \xc3\xa9 \xff";
	jw_init(&w, buf, sizeof(buf));
	jw_obj_begin(&w);
	jw_ku64(&w, "id", 2147483647);
	jw_kstr(&w, "op", "configure");
	jw_kstr(&w, "config", weird);
	jw_key(&w, "nested");
	jw_arr_begin(&w);
	jw_obj_begin(&w);
	jw_ku64(&w, "x", 1);
	jw_obj_end(&w);
	jw_arr_end(&w);
	jw_obj_end(&w);
	int n = json_parse_object(buf, w.len, f, 16, scratch, sizeof(scratch), &err);
	CHECK_EQ(n, 4);
	CHECK_EQ(json_get(f, n, "id")->num, 2147483647);
	CHECK_STR(json_get(f, n, "op")->str, "configure");
	CHECK_STR(json_get(f, n, "config")->str, "line1\nline2 \"q\" \\ \x01 \xc3\xa9 \xef\xbf\xbd");
	CHECK(json_get(f, n, "nested")->type == JT_OTHER);
}

void run_json_tests(void)
{
	RUN(writer_structure);
	RUN(writer_numbers);
	RUN(writer_escapes);
	RUN(writer_raw_and_comma);
	RUN(writer_overflow);
	RUN(reader_basic);
	RUN(reader_strings);
	RUN(reader_numbers);
	RUN(reader_nested);
	RUN(reader_errors);
	RUN(reader_limits);
	RUN(roundtrip);
}
