/* trees.c: the decision trees compiled into the library, one per device or
 * architecture family. Each tree_*.h is written by `anyattn tune` (tuned) or
 * by hand from published findings (marked untuned), with its provenance. */
#include <stddef.h>

#include "select.h"

const aa_tree *const aa_compiled_trees[] = {NULL};
const int aa_num_compiled_trees = 0;
