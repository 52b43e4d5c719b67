# xfer-bench, linked against the static library: every bench/*.c.
BENCH_SRCS := $(wildcard bench/*.c)
BENCH_OBJS := $(BENCH_SRCS:%.c=$(BUILD)/%.o)
BENCH      := $(BUILD)/xfer-bench

all: $(BENCH)

$(BENCH): $(BENCH_OBJS) $(LIB_A)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lm
