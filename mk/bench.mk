# xfer-bench, linked against the static library: every bench/*.c.
BENCH_SRCS := $(wildcard bench/*.c)
BENCH_OBJS := $(BENCH_SRCS:%.c=$(BUILD)/%.o)
BENCH      := $(BUILD)/xfer-bench

all: $(BENCH)

$(BENCH): $(BENCH_OBJS) $(LIB_A)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lm

# test/unit_bench_flags.c tests the command line: it links the parts of
# the bench that read it (its die() stands in for the program's).
$(BUILD)/test/unit_bench_flags: $(BUILD)/bench/flags.o \
				$(BUILD)/bench/config.o $(BUILD)/bench/config_list.o
