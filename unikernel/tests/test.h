/* fluidvim VNF — tiny host unit-test framework (built with -DFLUIDVIM_HOST and sanitizers). */
#ifndef FLUIDVIM_TEST_H
#define FLUIDVIM_TEST_H
#include <stdio.h>
#include <string.h>
#include <stdint.h>
#include <inttypes.h>
#include <stdbool.h>
#include "click.h"

extern int t_failed_checks;   /* checks failed in the current test */

#define CHECK(c) do { if (!(c)) { t_failed_checks++; \
	fprintf(stderr, "  %s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); } } while (0)
#define CHECK_EQ(a, b) do { long long _a = (long long)(a), _b = (long long)(b); if (_a != _b) { \
	t_failed_checks++; fprintf(stderr, "  %s:%d: CHECK_EQ failed: %s == %lld, expected %s == %lld\n", \
	__FILE__, __LINE__, #a, _a, #b, _b); } } while (0)
#define CHECK_STR(a, b) do { const char *_a = (a), *_b = (b); if (!_a || strcmp(_a, _b)) { \
	t_failed_checks++; fprintf(stderr, "  %s:%d: CHECK_STR failed: %s == \"%s\", expected \"%s\"\n", \
	__FILE__, __LINE__, #a, _a ? _a : "(null)", _b); } } while (0)
#define CHECK_CONTAINS(hay, needle) do { const char *_h = (hay), *_n = (needle); if (!_h || !strstr(_h, _n)) { \
	t_failed_checks++; fprintf(stderr, "  %s:%d: CHECK_CONTAINS failed: \"%s\" does not contain \"%s\"\n", \
	__FILE__, __LINE__, _h ? _h : "(null)", _n); } } while (0)

typedef void (*test_fn)(void);
struct test_case { const char *name; test_fn fn; };

void run_json_tests(void);
void run_click_tests(void);
void run_nicmac_tests(void);
void run_qoe_tests(void);
void run_source_tests(void);
void run_test(const char *name, test_fn fn);
#define RUN(fn) run_test(#fn, fn)

/* ---- fake platform (harness.c) ---- */
#define H_MAX_FRAMES 256
struct h_frame { int nic; uint16_t len; bool has_vh; struct click_vh vh; uint8_t data[4096]; };
extern struct h_frame h_frames[H_MAX_FRAMES];
extern int h_nframes;             /* frames recorded (up to H_MAX_FRAMES) */
extern long h_tx_total[8];        /* frames transmitted per NIC (all, including unrecorded) */
extern int h_tx_fail[8];          /* nonzero: plat_tx on that NIC fails */
extern uint64_t h_now;            /* fake clock, ns */
extern uint64_t h_now_step;       /* added after every plat_now_ns() call */
extern uint64_t h_steal;          /* fake KVM steal time, ns (plat_steal_ns) */
extern uint32_t h_tx_room;        /* what plat_tx_room() says (h_reset: plenty) */
void h_reset(void);
#endif
