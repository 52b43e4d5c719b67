# xfer-metad, the HTTP metadata server. Its sources sit in metadata/metad/,
# out of reach of the library's metadata/*.c, and it needs no libxfer:
# the floor (util/, reactor/: listeners, logging, HMAC) and the write MAC
# it shares with the HTTP backend (metadata/write_mac.c); it alone links
# SQLite (its store).
METAD_SRCS := $(wildcard metadata/metad/*.c)
METAD_OBJS := $(METAD_SRCS:%.c=$(BUILD)/%.o) $(BUILD)/metadata/write_mac.o
METAD      := $(BUILD)/xfer-metad

all: $(METAD)

$(METAD_OBJS): CFLAGS += $(shell pkg-config --cflags sqlite3)

$(METAD): $(METAD_OBJS) $(UTIL_A)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(shell pkg-config --libs sqlite3)

# test/unit_metad_auth.c drives its guard on writes alone (the library
# brings util/ and metadata/write_mac.o).
$(BUILD)/test/unit_metad_auth: $(BUILD)/metadata/metad/auth.o

# test/it_metad*.c run the server program.
$(patsubst test/%.c,$(BUILD)/test/%,$(wildcard test/it_metad*.c)): | $(METAD)
test-integration: $(METAD)
