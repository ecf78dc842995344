# fluidvim VNF — host unit tests and libFuzzer targets for the packet engine.
# Included by the kernel Makefile (`-include tests.mk`); also usable alone: make -f tests.mk test
#   make test                      build and run the host unit tests (ASan + UBSan)
#   make fuzz                      build the libFuzzer targets (clang)
#   make fuzz-run FUZZ_SECONDS=60  run each fuzzer for FUZZ_SECONDS with the seed corpus
#   make differential REF=<rev>    the engine of <rev> and the work tree's: identical errors and stats
# Variables are prefixed VT_ so they do not collide with the kernel Makefile's.

VT_SAVED_GOAL := $(.DEFAULT_GOAL)
VT_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
VT_OUT := $(VT_DIR)/build/host
VT_SRCS := $(VT_DIR)/src/json.c $(VT_DIR)/src/click.c $(VT_DIR)/src/click_parse.c \
           $(VT_DIR)/src/click_args.c $(VT_DIR)/src/cfgtext.c $(VT_DIR)/src/packet.c \
           $(VT_DIR)/src/match.c $(VT_DIR)/src/flowtable.c $(VT_DIR)/src/nicmac.c $(VT_DIR)/src/qoe.c \
           $(sort $(wildcard $(VT_DIR)/src/elements/*.c))
VT_HDRS := $(wildcard $(VT_DIR)/include/*.h $(VT_DIR)/src/click_internal.h $(VT_DIR)/src/elements/*.h)
VT_TESTS := $(VT_DIR)/tests/harness.c $(VT_DIR)/tests/test_json.c $(VT_DIR)/tests/test_click.c \
            $(VT_DIR)/tests/test_nicmac.c $(VT_DIR)/tests/test_qoe.c $(VT_DIR)/tests/test_source.c

TEST_CC ?= gcc
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
VT_CFLAGS := -std=gnu11 -g -O1 -Wall -Wextra -Werror -Wno-unused-parameter -DFLUIDVIM_HOST -I$(VT_DIR)/include -I$(VT_DIR)/src \
             -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
VT_FUZZFLAGS := -g -O1 -DFLUIDVIM_HOST -I$(VT_DIR)/include -I$(VT_DIR)/src \
                -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined

.PHONY: test fuzz fuzz-run differential

$(VT_OUT)/run_tests: $(VT_SRCS) $(VT_TESTS) $(VT_HDRS) $(VT_DIR)/tests/test.h
	@mkdir -p $(VT_OUT)
	$(TEST_CC) $(VT_CFLAGS) -o $@ $(VT_SRCS) $(VT_TESTS)

test: $(VT_OUT)/run_tests
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 $(VT_OUT)/run_tests

$(VT_OUT)/fuzz_config: $(VT_SRCS) $(VT_HDRS) $(VT_DIR)/fuzz/fuzz_config.c
	@mkdir -p $(VT_OUT)
	$(FUZZ_CC) $(VT_FUZZFLAGS) -o $@ $(VT_SRCS) $(VT_DIR)/fuzz/fuzz_config.c

$(VT_OUT)/fuzz_json: $(VT_DIR)/src/json.c $(VT_DIR)/src/nicmac.c $(VT_HDRS) $(VT_DIR)/fuzz/fuzz_json.c
	@mkdir -p $(VT_OUT)
	$(FUZZ_CC) $(VT_FUZZFLAGS) -o $@ $(VT_DIR)/src/json.c $(VT_DIR)/src/nicmac.c $(VT_DIR)/fuzz/fuzz_json.c

differential:
	$(VT_DIR)/tests/differential.sh $(or $(REF),HEAD)

fuzz: $(VT_OUT)/fuzz_config $(VT_OUT)/fuzz_json

# New corpus entries go to build/host/corpus-*; the seeds in fuzz/corpus/ are read only.
fuzz-run: fuzz
	@mkdir -p $(VT_OUT)/corpus-config $(VT_OUT)/corpus-json $(VT_OUT)/artifacts
	$(VT_OUT)/fuzz_config -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -timeout=10 \
		-dict=$(VT_DIR)/fuzz/config.dict -artifact_prefix=$(VT_OUT)/artifacts/config- \
		-print_final_stats=1 $(VT_OUT)/corpus-config $(VT_DIR)/fuzz/corpus/config
	$(VT_OUT)/fuzz_json -max_total_time=$(FUZZ_SECONDS) -max_len=8192 -timeout=10 \
		-dict=$(VT_DIR)/fuzz/json.dict -artifact_prefix=$(VT_OUT)/artifacts/json- \
		-print_final_stats=1 $(VT_OUT)/corpus-json $(VT_DIR)/fuzz/corpus/json

.DEFAULT_GOAL := $(VT_SAVED_GOAL)
