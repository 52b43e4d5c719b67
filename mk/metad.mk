# xfer-metad, the HTTP metadata server. Its sources sit in metadata/metad/,
# out of reach of the library's metadata/*.c, and it needs no libxfer
# (only the core's listener guard and the logging it uses); it alone
# links SQLite (its store).
METAD_SRCS := $(wildcard metadata/metad/*.c)
METAD_OBJS := $(METAD_SRCS:%.c=$(BUILD)/%.o) $(BUILD)/core/listen.o \
	      $(BUILD)/core/log.o
METAD      := $(BUILD)/xfer-metad

all: $(METAD)

$(METAD_OBJS): CFLAGS += $(shell pkg-config --cflags sqlite3)

$(METAD): $(METAD_OBJS)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(shell pkg-config --libs sqlite3)

# test/it_metad*.c run the server program.
$(patsubst test/%.c,$(BUILD)/test/%,$(wildcard test/it_metad*.c)): | $(METAD)
test-integration: $(METAD)
