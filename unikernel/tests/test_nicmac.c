/* fluidvim VNF — host tests for `configure`'s macs field (nicmac.c) and json_parse_array. */
#include "test.h"
#include "json.h"
#include "nicmac.h"

static char scratch[1024], ascratch[256];
static struct jfield f[16];
static struct macs_req mr;
static char field[16], msg[160];

/* parse {"macs":...} from `line` and run macs_from_json for `nics` NICs */
static int macs(const char *line, int nics)
{
	const char *err = NULL;
	int n = json_parse_object(line, strlen(line), f, 16, scratch, sizeof scratch, &err);
	CHECK(n >= 0);
	if (n < 0)
		return 99;
	return macs_from_json(json_get(f, n, "macs"), nics, &mr, field, sizeof field, msg, sizeof msg,
			      ascratch, sizeof ascratch);
}

static void array_reader(void)
{
	struct jfield it[4];
	const char *err = NULL;
	const char *a = " [ \"x\\u0041\" , null, 12, true, [1, {\"k\": []}], {} ] ";
	int n = json_parse_array(a, strlen(a), it, 4, ascratch, sizeof ascratch, &err);
	CHECK_EQ(n, 6);                                  /* counts beyond max, stores 4 */
	CHECK_EQ(it[0].type, JT_STRING);
	CHECK_STR(it[0].str, "xA");
	CHECK_EQ(it[1].type, JT_NULL);
	CHECK(it[2].type == JT_NUMBER && it[2].num == 12 && it[2].is_int);
	CHECK(it[3].type == JT_BOOL && it[3].boolean);
	CHECK_EQ(json_parse_array("[]", 2, it, 4, ascratch, sizeof ascratch, &err), 0);
	CHECK_EQ(json_parse_array("[1,]", 4, it, 4, ascratch, sizeof ascratch, &err), -1);
	CHECK_EQ(json_parse_array("[1 2]", 5, it, 4, ascratch, sizeof ascratch, &err), -1);
	CHECK_CONTAINS(err, "expected ',' or ']'");
	CHECK_EQ(json_parse_array("[1] x", 5, it, 4, ascratch, sizeof ascratch, &err), -1);
	CHECK_EQ(json_parse_array("{}", 2, it, 4, ascratch, sizeof ascratch, &err), -1);
	CHECK_EQ(json_parse_array("[\"abc", 5, it, 4, ascratch, sizeof ascratch, &err), -1);
	/* an array field of an object exposes its text */
	const char *o = "{\"a\":1,\"macs\":[\"52:54:00:00:00:01\", null],\"o\":{\"x\":[]}}";
	n = json_parse_object(o, strlen(o), f, 16, scratch, sizeof scratch, &err);
	CHECK_EQ(n, 3);
	CHECK(f[1].type == JT_OTHER && f[1].is_array && f[1].raw_len == 27);
	CHECK(f[1].raw && memcmp(f[1].raw, "[\"52:54:00:00:00:01\", null]", 27) == 0);
	CHECK(f[2].type == JT_OTHER && !f[2].is_array);
}

static void mac_strings(void)
{
	uint8_t m[6];
	CHECK(mac_parse("52:54:00:ab:CD:ef", 17, m));
	CHECK(m[0] == 0x52 && m[3] == 0xab && m[4] == 0xcd && m[5] == 0xef);
	CHECK(!mac_parse("52:54:00:ab:cd:e", 16, m));
	CHECK(!mac_parse("52:54:00:ab:cd:eg", 17, m));
	CHECK(!mac_parse("52-54-00-ab-cd-ef", 17, m));
	CHECK(!mac_parse("52:54:00:ab:cd:ef:", 18, m));
	CHECK(!mac_parse("", 0, m));
}

static void macs_field(void)
{
	/* absent or null: no change */
	CHECK_EQ(macs("{\"config\":\"x\"}", 2), MACS_OK);
	CHECK_EQ(mr.n, 0);
	CHECK_EQ(macs("{\"macs\":null}", 2), MACS_OK);
	CHECK_EQ(mr.n, 0);
	/* one entry per NIC, null keeps */
	CHECK_EQ(macs("{\"macs\":[\"fa:16:3e:11:22:33\",null]}", 2), MACS_OK);
	CHECK_EQ(mr.n, 2);
	CHECK(mr.set[0] && !mr.set[1]);
	CHECK(mr.mac[0][0] == 0xfa && mr.mac[0][5] == 0x33);
	CHECK_EQ(macs("{\"macs\":[]}", 0), MACS_OK);
	CHECK_EQ(macs("{\"macs\":[\"FA:16:3E:11:22:33\",\"02:00:00:00:00:01\",null,null]}", 4), MACS_OK);
	CHECK(mr.set[1] && mr.mac[1][5] == 1);
	/* wrong count */
	CHECK_EQ(macs("{\"macs\":[\"fa:16:3e:11:22:33\"]}", 2), MACS_CONFIG);
	CHECK_STR(field, "macs");
	CHECK_STR(msg, "macs: 1 entry for 2 NICs: give one MAC address (or null = keep) per NIC");
	CHECK_EQ(macs("{\"macs\":[null,null,null,null,null]}", 4), MACS_CONFIG);
	CHECK_CONTAINS(msg, "5 entries for 4 NICs");
	CHECK_EQ(macs("{\"macs\":[null]}", 0), MACS_CONFIG);
	CHECK_CONTAINS(msg, "1 entry for 0 NICs");
	/* malformed, multicast, zero, wrong type: named by index */
	CHECK_EQ(macs("{\"macs\":[null,\"fa:16:3e:11:22\"]}", 2), MACS_CONFIG);
	CHECK_STR(field, "macs[1]");
	CHECK_STR(msg, "macs[1]: 'fa:16:3e:11:22' is not a MAC address (expected six hex pairs like "
		  "52:54:00:12:34:56)");
	CHECK_EQ(macs("{\"macs\":[\"01:00:5e:00:00:01\",null]}", 2), MACS_CONFIG);
	CHECK_STR(field, "macs[0]");
	CHECK_CONTAINS(msg, "macs[0]: '01:00:5e:00:00:01' is a multicast address");
	CHECK_EQ(macs("{\"macs\":[null,\"ff:ff:ff:ff:ff:ff\"]}", 2), MACS_CONFIG);
	CHECK_STR(field, "macs[1]");
	CHECK_EQ(macs("{\"macs\":[\"00:00:00:00:00:00\",null]}", 2), MACS_CONFIG);
	CHECK_CONTAINS(msg, "all-zero");
	CHECK_EQ(macs("{\"macs\":[null,5]}", 2), MACS_CONFIG);
	CHECK_STR(msg, "macs[1]: must be a MAC address string or null");
	CHECK_EQ(macs("{\"macs\":[null,[\"a\"]]}", 2), MACS_CONFIG);
	CHECK_STR(field, "macs[1]");
	/* hostile strings are quoted safely and shortened */
	CHECK_EQ(macs("{\"macs\":[\"it's \\n a very long string that is certainly not a mac address\"]}", 1),
		 MACS_CONFIG);
	CHECK_CONTAINS(msg, "macs[0]: 'it?s ? a very long string that is certai' is not");
	/* not an array */
	CHECK_EQ(macs("{\"macs\":\"fa:16:3e:11:22:33\"}", 1), MACS_BAD_REQUEST);
	CHECK_STR(field, "macs");
	CHECK_CONTAINS(msg, "macs: must be an array");
	CHECK_EQ(macs("{\"macs\":{}}", 1), MACS_BAD_REQUEST);
	CHECK_EQ(macs("{\"macs\":3}", 1), MACS_BAD_REQUEST);
	/* a string longer than the array scratch buffer */
	char big[600];
	memcpy(big, "{\"macs\":[\"", 10);
	memset(big + 10, 'a', 500);
	memcpy(big + 510, "\"]}", 4);
	CHECK_EQ(macs(big, 1), MACS_BAD_REQUEST);
	CHECK_CONTAINS(msg, "macs: strings too long");
}

void run_nicmac_tests(void)
{
	RUN(array_reader);
	RUN(mac_strings);
	RUN(macs_field);
}
