# Compiler flags and dependencies (from pkg-config).
BUILD   ?= build
CC      ?= cc
WERROR  ?= 1
PKGS    := libevent libevent_pthreads yajl hiredis libcrypto libibverbs numa \
           liburing

VERSION_MAJOR := 1
VERSION       := 1.0.0

CFLAGS  ?= -O2 -g
CFLAGS  += -std=gnu11 -Wall -Wextra -fPIC -pthread -MMD -MP \
           -fvisibility=hidden -I. -Iinclude \
           $(shell pkg-config --cflags $(PKGS))
ifeq ($(WERROR),1)
CFLAGS  += -Werror
endif
LDLIBS  += $(shell pkg-config --libs $(PKGS)) -pthread
# Sanitizers, for compiling and linking alike (make test-asan sets them).
SAN_FLAGS ?=
CFLAGS  += $(SAN_FLAGS)
LDFLAGS += $(SAN_FLAGS)

ifeq ($(V),1)
Q :=
else
Q := @
endif

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) -c -o $@ $<
