/* error.c: the thread's last-error message and status names. */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

static _Thread_local char aa_last_message[512];

anyattn_status aa_error(anyattn_status status, const char *fmt, ...) {
  va_list ap;
  int n = snprintf(aa_last_message, sizeof aa_last_message, "%s: ", anyattn_status_name(status));
  if (n < 0 || (size_t)n >= sizeof aa_last_message) n = 0;
  va_start(ap, fmt);
  vsnprintf(aa_last_message + n, sizeof aa_last_message - (size_t)n, fmt, ap);
  va_end(ap);
  return status;
}

void aa_clear_error(void) { aa_last_message[0] = '\0'; }

const char *anyattn_last_error(void) { return aa_last_message; }

const char *anyattn_status_name(anyattn_status status) {
  switch (status) {
#define AA_NAME(s) \
  case s:          \
    return #s;
    AA_NAME(ANYATTN_STATUS_OK)
    AA_NAME(ANYATTN_STATUS_NULL_POINTER)
    AA_NAME(ANYATTN_STATUS_INVALID_SIZE)
    AA_NAME(ANYATTN_STATUS_HEAD_RATIO)
    AA_NAME(ANYATTN_STATUS_UNSUPPORTED_DTYPE)
    AA_NAME(ANYATTN_STATUS_UNSUPPORTED_HEAD_DIM)
    AA_NAME(ANYATTN_STATUS_UNSUPPORTED_BLOCK_SIZE)
    AA_NAME(ANYATTN_STATUS_BAD_STRIDE)
    AA_NAME(ANYATTN_STATUS_INVALID_OPTION)
    AA_NAME(ANYATTN_STATUS_WORKSPACE_TOO_SMALL)
    AA_NAME(ANYATTN_STATUS_LIMIT_EXCEEDED)
    AA_NAME(ANYATTN_STATUS_BAD_METADATA)
    AA_NAME(ANYATTN_STATUS_BACKEND_UNAVAILABLE)
    AA_NAME(ANYATTN_STATUS_NO_DEVICE)
    AA_NAME(ANYATTN_STATUS_DEVICE_ERROR)
    AA_NAME(ANYATTN_STATUS_OUT_OF_MEMORY)
    AA_NAME(ANYATTN_STATUS_STRUCT_SIZE)
    AA_NAME(ANYATTN_STATUS_WRONG_CONTEXT)
    AA_NAME(ANYATTN_STATUS_UNSUPPORTED_CONFIG)
    AA_NAME(ANYATTN_STATUS_COMM_ERROR)
    AA_NAME(ANYATTN_STATUS_UNSUPPORTED_OPTION)
#undef AA_NAME
  }
  return "unknown status";
}
