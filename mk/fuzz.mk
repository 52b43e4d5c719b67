# libFuzzer targets: test/fuzz/fuzz_NAME.c, seeds in test/fuzz/corpus/NAME/.
# Built with clang and -fsanitize=fuzzer,address,undefined into
# $(BUILD)/fuzz/, from objects of their own (the library's and
# xfer-metad's sources compiled again there).
#   make fuzz                build each target, run each FUZZ_SECONDS (30)
#                            seconds; fails on a crash, leak, timeout
#   make fuzz-build          build them only
#   make fuzz-NAME           run one target
# What a target found stays in $(BUILD)/fuzz/corpus/NAME/ (reused by the
# next run); a crashing input is written to $(BUILD)/fuzz/crash-NAME-*.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 30
FUZZ_BUILD   := $(BUILD)/fuzz
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_CFLAGS  := -O1 -g -fno-omit-frame-pointer $(FUZZ_SAN) \
                -fsanitize=fuzzer-no-link -std=gnu11 -Wall -Wextra -pthread \
                -MMD -MP -I. -Iinclude $(shell pkg-config --cflags $(PKGS))
ifeq ($(WERROR),1)
FUZZ_CFLAGS  += -Werror
endif

FUZZ_NAMES   := $(patsubst test/fuzz/fuzz_%.c,%,$(wildcard test/fuzz/fuzz_*.c))
FUZZ_BINS    := $(FUZZ_NAMES:%=$(FUZZ_BUILD)/fuzz_%)
FUZZ_LIB     := $(FUZZ_BUILD)/libxfer.a
FUZZ_LIB_OBJS := $(LIB_SRCS:%.c=$(FUZZ_BUILD)/%.o)
# Mooncake's C API on it (an archive: only fuzz_capi pulls it in)
FUZZ_CAPI    := $(FUZZ_BUILD)/libtransfer_engine.a
FUZZ_CAPI_OBJS := $(CAPI_SRCS:%.c=$(FUZZ_BUILD)/%.o)
# xfer-metad without its main(), and SQLite for its store
FUZZ_METAD_OBJS := $(patsubst %.c,$(FUZZ_BUILD)/%.o,\
                   $(filter-out metadata/metad/main.c,$(METAD_SRCS)))
$(FUZZ_METAD_OBJS): FUZZ_CFLAGS += $(shell pkg-config --cflags sqlite3)

$(FUZZ_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZCC  $<")
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -c -o $@ $<

$(FUZZ_LIB): $(FUZZ_LIB_OBJS)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(FUZZ_CAPI): $(FUZZ_CAPI_OBJS)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: $(FUZZ_BUILD)/test/fuzz/fuzz_%.o $(FUZZ_METAD_OBJS) \
		      $(FUZZ_CAPI) $(FUZZ_LIB)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(FUZZ_CC) -fsanitize=fuzzer $(FUZZ_SAN) -o $@ $^ $(LDLIBS) \
		$(shell pkg-config --libs sqlite3)

fuzz-build: $(FUZZ_BINS)

fuzz: $(FUZZ_BINS)
	@set -e; for n in $(FUZZ_NAMES); do \
		sh test/fuzz/run.sh $(FUZZ_BUILD) $$n $(FUZZ_SECONDS); done

$(FUZZ_NAMES:%=fuzz-%): fuzz-%: $(FUZZ_BUILD)/fuzz_%
	@sh test/fuzz/run.sh $(FUZZ_BUILD) $* $(FUZZ_SECONDS)

.PHONY: fuzz fuzz-build $(FUZZ_NAMES:%=fuzz-%)
