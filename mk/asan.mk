# The unit and integration tiers under AddressSanitizer and
# UndefinedBehaviorSanitizer, every report fatal, built apart in
# build/asan/ (the library, xfer-metad, xfer-bench and the tests):
#   make test-asan            both tiers
#   make test-asan-unit | test-asan-integration
# The tests see XFER_TEST_ASAN=1, for the few checks that measure what the
# sanitizer itself changes (memory, timing); see test/helpers.h.
ASAN_BUILD := build/asan
ASAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all \
              -fno-omit-frame-pointer
# detect_leaks: a leak fails the program at exit; abort_on_error and
# halt_on_error: a report ends it, the tier stops there.
# XFER_TEST_STORED_LOG: the masters the store's tests start write their
# stderr there, not to /dev/null, and a sanitizer report in it fails the
# tier (a master that died of one otherwise showed only as a client's
# timeout).
ASAN_STORED_LOG := $(abspath $(ASAN_BUILD))/stored.log
ASAN_ENV   := XFER_TEST_ASAN=1 XFER_TEST_STORED_LOG=$(ASAN_STORED_LOG) \
              ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:halt_on_error=1:detect_stack_use_after_return=1 \
              UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
              CFLAGS='-O2 -g'
# WERROR=0: the instrumentation misleads gcc's range analysis into
# warnings the plain build does not give (-Wformat-truncation); that
# build keeps -Werror.
ASAN_MAKE  = env $(ASAN_ENV) $(MAKE) --no-print-directory BUILD=$(ASAN_BUILD) \
             SAN_FLAGS='$(ASAN_FLAGS)' WERROR=0

test-asan-unit:
	+$(Q)$(ASAN_MAKE) test-unit

test-asan-integration:
	$(Q)rm -f $(ASAN_STORED_LOG)
	+$(Q)$(ASAN_MAKE) test-integration
	$(Q)if grep -s -q -E 'Sanitizer|runtime error:' $(ASAN_STORED_LOG); then \
		grep -E -A12 'Sanitizer|runtime error:' $(ASAN_STORED_LOG); \
		echo "a master's sanitizer report: $(ASAN_STORED_LOG)"; exit 1; fi

test-asan: test-asan-unit test-asan-integration

# test/soak.c under the same sanitizers: SOAK_SECONDS of mixed load, peers
# and xfer-metad killed and restarted; ends with a summary line.
SOAK_SECONDS ?= 600
$(BUILD)/test/soak: $(BUILD)/test/soak_chaos.o $(BUILD)/test/soak_load.o
soak:
	+$(Q)$(ASAN_MAKE) $(ASAN_BUILD)/test/soak $(ASAN_BUILD)/xfer-metad
	$(Q)env $(ASAN_ENV) $(ASAN_BUILD)/test/soak $(SOAK_SECONDS)

.PHONY: test-asan test-asan-unit test-asan-integration soak
