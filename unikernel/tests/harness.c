/* fluidvim VNF — host test harness: fake platform hooks and the test runner. */
#include "test.h"
#include "click.h"

struct h_frame h_frames[H_MAX_FRAMES];
int h_nframes;
long h_tx_total[8];
int h_tx_fail[8];
uint64_t h_now, h_now_step;
uint32_t h_tx_room;
int t_failed_checks;

static int passed, failed;

void h_reset(void)
{
	h_nframes = 0;
	memset(h_tx_total, 0, sizeof(h_tx_total));
	memset(h_tx_fail, 0, sizeof(h_tx_fail));
	h_tx_room = 1u << 30;
}

int plat_tx(int nic, const uint8_t *data, uint16_t len, const struct click_vh *vh)
{
	if (nic < 0 || nic >= 8 || h_tx_fail[nic])
		return -1;
	h_tx_total[nic]++;
	if (h_nframes < H_MAX_FRAMES) {
		struct h_frame *f = &h_frames[h_nframes++];
		f->nic = nic;
		f->len = len;
		f->has_vh = vh != NULL;
		if (vh)
			f->vh = *vh;
		memcpy(f->data, data, len < sizeof(f->data) ? len : sizeof(f->data));
	}
	return 0;
}

uint32_t plat_tx_room(void) { return h_tx_room; }

uint64_t h_steal;
uint64_t plat_steal_ns(void) { return h_steal; }

uint64_t plat_now_ns(void)
{
	uint64_t t = h_now;
	h_now += h_now_step;
	return t;
}

void run_test(const char *name, test_fn fn)
{
	t_failed_checks = 0;
	h_reset();
	h_now = 1000000000ull;
	h_now_step = 0;
	h_steal = 0;
	fn();
	if (t_failed_checks) {
		failed++;
		printf("FAIL %s (%d checks)\n", name, t_failed_checks);
	} else {
		passed++;
		printf("ok   %s\n", name);
	}
}

int main(void)
{
	run_json_tests();
	run_click_tests();
	run_nicmac_tests();
	run_qoe_tests();
	run_source_tests();
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
