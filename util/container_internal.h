/* From an embedded member back to the struct that holds it. */
#ifndef XFER_CONTAINER_INTERNAL_H
#define XFER_CONTAINER_INTERNAL_H

#include <stddef.h>

#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

#endif
