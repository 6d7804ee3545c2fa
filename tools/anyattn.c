/* anyattn.c: the command-line tool (placeholder). */
#include <stdio.h>
#include "anyattn.h"
int main(void) { printf("anyattn %s\n", anyattn_version_string()); return 0; }
