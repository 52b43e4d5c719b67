/* xfer's errnos as Mooncake's error codes (error.h) and Status codes. */
#include <errno.h>

#include "capi/capi_internal.h"

int te_err(int neg_errno)
{
	switch (-neg_errno) {
	case 0:
		return 0;
	case EINVAL:
	case EMSGSIZE:
		return TE_ERR_INVALID_ARGUMENT;
	case ENOSPC:
		return TE_ERR_TOO_MANY_REQUESTS;
	case EBUSY:
		return TE_ERR_BATCH_BUSY;
	case ENODEV:
		return TE_ERR_DEVICE_NOT_FOUND;
	case EEXIST:
		return TE_ERR_ADDRESS_OVERLAPPED;
	case ECONNREFUSED:
	case ECONNRESET:
	case ETIMEDOUT:
	case EHOSTUNREACH:
	case ENETUNREACH:
	case EPIPE:
		return TE_ERR_SOCKET;
	case EPROTO:
		return TE_ERR_MALFORMED_JSON;
	case ENOBUFS:
		return TE_ERR_REJECT_HANDSHAKE;
	case ENOMEM:
		return TE_ERR_MEMORY;
	case EOPNOTSUPP:
	case EPROTONOSUPPORT:
		return TE_ERR_NOT_IMPLEMENTED;
	case EFAULT:
	case EPERM:
	case EACCES:
		return TE_ERR_CONTEXT; /* a device refused the memory */
	default:
		return TE_ERR_METADATA; /* ENOENT, a store's errors */
	}
}

int te_status(int neg_errno)
{
	switch (-neg_errno) {
	case 0:
		return TE_OK;
	case ENOSPC:
		return TE_TOO_MANY_REQUESTS;
	case EBUSY:
		return TE_BATCH_BUSY;
	case ENOMEM:
		return TE_MEMORY;
	default:
		return TE_INVALID_ARGUMENT;
	}
}
