/* tl_check.h: the unit tests' EXPECT: counts checks and failures and prints
 * FAIL with the file, line and a message. One test program is one translation
 * unit, so the counters are static here. */
#ifndef ANYATTN_TL_CHECK_H
#define ANYATTN_TL_CHECK_H

#include <stdio.h>

static int checks __attribute__((unused)), failures __attribute__((unused));

#define EXPECT(cond, ...)                         \
  do {                                            \
    checks++;                                     \
    if (!(cond)) {                                \
      failures++;                                 \
      printf("FAIL %s:%d: ", __FILE__, __LINE__); \
      printf(__VA_ARGS__);                        \
      printf("\n");                               \
    }                                             \
  } while (0)

#endif
