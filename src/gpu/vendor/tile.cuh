/* tile.cuh: picks the tile primitives of the vendor being compiled for.
 * The attention body includes this and nothing vendor-specific. */
#ifndef ANYATTN_GPU_TILE_CUH
#define ANYATTN_GPU_TILE_CUH

#include "vendor.h"

#if defined(AA_VENDOR_AMD)
#include "tile_amd.cuh" /* MFMA implementation of the same interface */
#else
#include "tile_nv.cuh"
#endif

#endif /* ANYATTN_GPU_TILE_CUH */
