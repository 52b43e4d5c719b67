# xfer-bench, linked against the static library.
BENCH := $(BUILD)/xfer-bench

all: $(BENCH)

$(BENCH): $(BUILD)/bench/xfer_bench.o $(LIB_A)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lm
