/* fluidvim VNF — the packet engine's differential run: each input file (the libFuzzer config format:
 * config text, optionally a NUL byte and [length byte][frame bytes]...) goes through the fuzz
 * target's sequence (fuzz/fuzz_config.c: configure, the fixed and given frames, the scheduler on a
 * fake clock, the stats, a broken reconfigure), and what the engine said is printed: the error
 * (line, col, message) or the stats JSON. Deterministic, so two builds of the engine (before and
 * after a refactor) must print the same bytes: tests/differential.sh compares them. */
#include <stdio.h>
#include <stdlib.h>
#include "click.h"

static struct click_err last_err;
static int last_rc;

/* the fuzz target's click_configure calls come here first */
static int replay_configure(const char *text, size_t len, uint32_t slots, struct click_err *err)
{
	int r = click_configure(text, len, slots, err);
	if (r != 0)
		last_err = *err;
	last_rc = r;
	return r;
}
#define click_configure replay_configure
/* four NICs, as the unit tests' configs use (frames still arrive on NICs 0 and 1 only) */
#define click_init(nics, slots, timeout) click_init(4, slots, timeout)
#define LLVMFuzzerTestOneInput replay_one
#include "../fuzz/fuzz_config.c"
#undef click_configure
#undef click_init

int main(int argc, char **argv)
{
	static uint8_t buf[1 << 16];
	for (int i = 1; i < argc; i++) {
		FILE *f = fopen(argv[i], "rb");
		if (!f) {
			perror(argv[i]);
			return 2;
		}
		size_t n = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		const char *base = strrchr(argv[i], '/');
		printf("== %s\n", base ? base + 1 : argv[i]);
		sbuf[0] = 0;
		last_rc = 0;
		memset(&last_err, 0, sizeof(last_err));
		/* a rejected config: its error; an accepted one: the fuzz target's run, its stats and the
		 * error of its final (broken) reconfigure */
		const uint8_t *nul = memchr(buf, 0, n);
		size_t clen = nul ? (size_t)(nul - buf) : n;
		struct click_err e0;
		click_init(4, 8, 50);
		int first_rc = click_configure(clen ? (const char *)buf : "", clen, 0, &e0);
		if (first_rc != 0) {
			printf("error %d:%d %s\n", e0.line, e0.col, e0.message);
			continue;
		}
		replay_one(buf, n);
		printf("stats %s\n", sbuf);
		printf("reconfigure rc=%d %d:%d %s\n", last_rc, last_err.line, last_err.col, last_err.message);
	}
	return 0;
}
