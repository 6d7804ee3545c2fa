/* error.c: the last-error message of anyattn_cp_* calls, per thread, in the
 * form libanyattn uses ("ANYATTN_STATUS_X: what went wrong"). */
#include <stdarg.h>
#include <stdio.h>

#include "cp.h"

static _Thread_local char cp_last_message[768];

anyattn_status cp_error(anyattn_status status, const char *fmt, ...) {
  int n = snprintf(cp_last_message, sizeof cp_last_message, "%s: ", anyattn_status_name(status));
  if (n < 0 || (size_t)n >= sizeof cp_last_message) n = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cp_last_message + n, sizeof cp_last_message - (size_t)n, fmt, ap);
  va_end(ap);
  return status;
}

anyattn_status cp_lib_error(anyattn_status status, const char *what) {
  return cp_error(status, "%s failed: %s", what, anyattn_last_error());
}

void cp_clear_error(void) { cp_last_message[0] = '\0'; }

void cp_restore_error(const char *saved) { snprintf(cp_last_message, sizeof cp_last_message, "%s", saved); }

const char *anyattn_cp_last_error(void) { return cp_last_message; }
