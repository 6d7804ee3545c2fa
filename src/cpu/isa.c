/* isa.c: run-time choice of the tiled path's products (docs/design/cpu.md,
 * "16-bit products"). Compiled with the library's baseline flags: it only
 * asks the CPU and the kernel, and never runs an instruction it asks about. */
#include "isa.h"

#include <stdlib.h>
#include <string.h>

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#endif
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif
#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

static const char *const aa_isa_names[AA_CPU_ISA_COUNT] = {"fp32", "avx512bf16", "amx"};

const char *aa_cpu_isa_name(aa_cpu_isa isa) {
  return (unsigned)isa < AA_CPU_ISA_COUNT ? aa_isa_names[isa] : "unknown";
}

#if defined(ANYATTN_CPU_MM16)
/* The 16-bit files also use AVX-512 F/BW/VL/DQ (staging, softmax). */
static int aa_has_avx512bf16(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512bf16");
}

/* Linux keeps AMX tile data off until a process asks for it
 * (ARCH_REQ_XCOMP_PERM); without the permission the first tile instruction
 * faults. The request is process-wide and idempotent. */
static int aa_amx_permitted(void) {
#if defined(__linux__)
  const long arch_req_xcomp_perm = 0x1023, xfeature_xtiledata = 18;
  return syscall(SYS_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata) == 0;
#else
  return 0;
#endif
}

static int aa_has_amx(void) {
  /* once per process: cpuid and the system call are not free */
  static int cached = -1;
  int v = __atomic_load_n(&cached, __ATOMIC_ACQUIRE);
  if (v < 0) {
    v = aa_has_avx512bf16() && __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-bf16") &&
        aa_amx_permitted();
    __atomic_store_n(&cached, v, __ATOMIC_RELEASE);
  }
  return v;
}
#endif

int aa_cpu_isa_supported(aa_cpu_isa isa) {
  switch (isa) {
    case AA_CPU_ISA_FP32: return 1;
#if defined(ANYATTN_CPU_MM16)
    case AA_CPU_ISA_AVX512BF16: return aa_has_avx512bf16();
    case AA_CPU_ISA_AMX: return aa_has_amx();
#endif
    default: return 0;
  }
}

/* Whether the 16-bit path takes plans of dtype and head_dim at all: bf16 or
 * fp16, head dims that are multiples of 8 whose rows padded to the products'
 * 32-dim blocks (tiled16.c) stay under twice as long (prefill 1x1024 bf16 on
 * the Zen 5 VM, vdpbf16ps against the fp32 path: d16 0.87x its speed, d24
 * 1.38x, d40 1.14x, d72 1.13x, d80 1.16x, d112 1.25x, d128 1.40x;
 * docs/design/cpu.md, 16-bit products). */
static int aa_cpu_takes16(anyattn_dtype dtype, int head_dim) {
  const int padded = (head_dim + 31) / 32 * 32;
  return (dtype == ANYATTN_DTYPE_BF16 || dtype == ANYATTN_DTYPE_F16) && head_dim % 8 == 0 && padded < 2 * head_dim;
}

anyattn_status aa_cpu_isa_choose(anyattn_dtype dtype, int head_dim, aa_cpu_isa *isa) {
  const char *env = getenv("ANYATTN_CPU_ISA");
  const int want16 = aa_cpu_takes16(dtype, head_dim);
  if (env && *env && strcmp(env, "auto") != 0) {
    int k = 0;
    while (k < AA_CPU_ISA_COUNT && strcmp(env, aa_isa_names[k]) != 0) k++;
    AA_CHECK(k < AA_CPU_ISA_COUNT, ANYATTN_STATUS_UNSUPPORTED_CONFIG,
             "ANYATTN_CPU_ISA='%s' is not one of auto, fp32, avx512bf16, amx", env);
    AA_CHECK(aa_cpu_isa_supported((aa_cpu_isa)k), ANYATTN_STATUS_UNSUPPORTED_CONFIG,
             "ANYATTN_CPU_ISA=%s: this build or this CPU does not have it", env);
    *isa = want16 ? (aa_cpu_isa)k : AA_CPU_ISA_FP32;
    return ANYATTN_STATUS_OK;
  }
  *isa = AA_CPU_ISA_FP32;
  if (!want16) return ANYATTN_STATUS_OK;
  if (aa_cpu_isa_supported(AA_CPU_ISA_AMX)) *isa = AA_CPU_ISA_AMX;
  /* fp16 runs three bf16 products per element: on vdpbf16ps 1.5-1.9x
   * slower than the fp32 path (prefill and the mixed batch, Zen 5 VM) */
  else if (dtype == ANYATTN_DTYPE_BF16 && aa_cpu_isa_supported(AA_CPU_ISA_AVX512BF16))
    *isa = AA_CPU_ISA_AVX512BF16;
  return ANYATTN_STATUS_OK;
}

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
/* A data or unified cache level of the cpuid cache descriptors (AMD's leaf
 * 0x8000001D where the CPU has it, else leaf 4): want 0 the largest, else
 * level want; the size of one instance, the part of the cache a core
 * reaches (an EPYC's L3 is one per core complex, 32 MiB on Zen 5, where
 * glibc's sysconf reports the whole socket's); 0 if the CPU describes none. */
static size_t aa_cpuid_cache(unsigned want) {
  unsigned a, b, c, d, leaf = 4;
  if (__get_cpuid(0x80000000u, &a, &b, &c, &d) && a >= 0x8000001Du && __get_cpuid(0x80000001u, &a, &b, &c, &d) &&
      (c >> 22 & 1)) /* TOPOEXT */
    leaf = 0x8000001Du;
  else if (!__get_cpuid(0, &a, &b, &c, &d) || a < 4)
    return 0;
  size_t bytes = 0;
  unsigned top = 0;
  for (unsigned i = 0; i < 16; i++) {
    __cpuid_count(leaf, i, a, b, c, d);
    const unsigned type = a & 31, level = a >> 5 & 7;
    if (type == 0) break;
    if (type == 2 || level < top || (want && level != want)) continue; /* type 2: instruction caches */
    top = level;
    const double n = (double)((b >> 22) + 1) * ((b >> 12 & 1023) + 1) * ((b & 4095) + 1) * ((double)c + 1);
    bytes = n < 0x1p40 ? (size_t)n : 0; /* ways x partitions x line x sets; a nonsense size counts as none */
  }
  return bytes;
}
#endif

/* A cache level's bytes (level 0: the largest): cpuid, else glibc's sysconf
 * name sc (-1: none), else fallback. */
static size_t aa_cpu_cache_bytes(unsigned level, int sc, size_t fallback) {
  size_t n = 0;
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  n = aa_cpuid_cache(level);
#else
  (void)level;
#endif
#if defined(_SC_LEVEL2_CACHE_SIZE) && defined(_SC_LEVEL3_CACHE_SIZE)
  if (n == 0 && sc >= 0) {
    const long v = sysconf(sc);
    if (v > 0) n = (size_t)v;
  }
#else
  (void)sc;
#endif
  return n ? n : fallback;
}

#if defined(_SC_LEVEL2_CACHE_SIZE) && defined(_SC_LEVEL3_CACHE_SIZE)
#define AA_SC_L2 _SC_LEVEL2_CACHE_SIZE
#define AA_SC_L3 _SC_LEVEL3_CACHE_SIZE
#else
#define AA_SC_L2 (-1)
#define AA_SC_L3 (-1)
#endif
size_t aa_cpu_llc_bytes(void) { return aa_cpu_cache_bytes(0, AA_SC_L3, (size_t)32 << 20); }
size_t aa_cpu_l2_bytes(void) { return aa_cpu_cache_bytes(2, AA_SC_L2, (size_t)1 << 20); }

int aa_cpu_intel(void) {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  unsigned a, b, c, d;
  /* the vendor string in ebx, edx, ecx: "Genu" "ineI" "ntel" */
  return __get_cpuid(0, &a, &b, &c, &d) && b == 0x756e6547u && d == 0x49656e69u && c == 0x6c65746eu;
#else
  return 0;
#endif
}
