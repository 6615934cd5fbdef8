#pragma once
// INA_AVX2_CLONE before a hot loop's function builds it twice, for baseline
// x86-64 and for AVX2; the dynamic loader picks the clone the CPU runs once
// (GCC's target_clones, an ifunc), so the build itself stays baseline x86-64.
// Elsewhere (other compilers, other architectures) it is nothing, and under
// ThreadSanitizer (an ifunc's resolver runs before its runtime starts).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define INA_AVX2_CLONE __attribute__((target_clones("avx2", "default")))
#else
#define INA_AVX2_CLONE
#endif
