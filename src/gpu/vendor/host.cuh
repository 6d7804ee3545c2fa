/* host.cuh: the host-side vendor layer: launching a kernel with programmatic
 * dependent launch and cluster dimensions, asking how many clusters a device
 * co-schedules, and encoding TMA tensor maps of the K/V caches. NVIDIA
 * (host_nv.cuh) has all three; AMD (host_amd.cuh) launches plainly and has
 * neither clusters nor tensor maps. The backend (backend.cu, launch.cu) sees only these. */
#ifndef ANYATTN_GPU_VENDOR_HOST_CUH
#define ANYATTN_GPU_VENDOR_HOST_CUH

#include "vendor.h"

#if defined(AA_VENDOR_AMD)
#include "host_amd.cuh"
#else
#include "host_nv.cuh"
#endif

#endif /* ANYATTN_GPU_VENDOR_HOST_CUH */
