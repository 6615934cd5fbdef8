#pragma once
// INA_SIMD_CLONES before a hot loop's function builds it three times: for
// baseline x86-64, for AVX2, and for x86-64-v4 (AVX-512: a 64-value payload
// is four registers, and the add's overflow test one ternary-logic
// instruction a register). The dynamic loader picks the clone the CPU runs
// once (GCC's target_clones, an ifunc), so the build itself stays baseline
// x86-64. Elsewhere (other compilers, other architectures) it is nothing,
// and under ThreadSanitizer (an ifunc's resolver runs before its runtime
// starts).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define INA_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define INA_SIMD_CLONES
#endif
