/* trees.c: the decision trees compiled into the library, one per device or
 * architecture family. Each tree_*.h is written by `anyattn tune` (tuned) or
 * by hand from published findings (marked untuned), with its provenance.
 * Lookup (src/choose/tree_lookup.c): a loaded file, the exact device name, then the
 * family; no match means the backend's documented fallback heuristic. */
#include <stddef.h>

#include "select.h"
#include "tree_cdna_seed.h"
#include "tree_h200.h"

const aa_tree *const aa_compiled_trees[] = {&aa_tree_h200, &aa_tree_gfx942_seed, &aa_tree_gfx90a_seed};
const int aa_num_compiled_trees = sizeof aa_compiled_trees / sizeof aa_compiled_trees[0];
