// How one source of backend/cpu's ops becomes several vector paths (vector_path.h).
//
// The ops' sources are compiled once with the build's own flags (the plain names, zaya::cpu::*)
// and once more for each higher path, as their own targets with ZAYA_CPU_PATH_AVX2 or
// ZAYA_CPU_PATH_AVX512 defined (CMakeLists.txt). In such a compile every op's header puts its
// declarations in an inline namespace named after the path (zaya::cpu::avx2::*), so the copies
// link side by side and the op table of each path (cpu_op_table.h) names its own; and each op's
// source puts its definitions between ZAYA_CPU_TARGET_BEGIN and ZAYA_CPU_TARGET_END, which give
// those functions (lambdas and OpenMP bodies included) the path's instruction set.
//
// Why a pragma and not -mavx2 on the whole compile: the inline functions and templates of the
// standard library and of zaya's headers, included before the pragma, stay compiled for the
// build's own level. Compiled with -mavx2, their out-of-line copies would be AVX2 code under the
// same names as the baseline's, and the linker keeps one of them for every caller: a baseline
// machine could then execute AVX2 instructions. Inlined into a path's function, the same code is
// vectorised for the path.
#pragma once

#if defined(ZAYA_CPU_PATH_AVX2) && defined(ZAYA_CPU_PATH_AVX512)
#error "one vector path per compile"
#endif

// The target lists: x86-64-v3's vector features (AVX2 + FMA), and x86-64-v4's (AVX-512 F, BW, DQ,
// VL, CD) on top. vector_path.cpp checks the same features before a path runs.
#if defined(ZAYA_CPU_PATH_AVX2)
#define ZAYA_CPU_PATH_BEGIN inline namespace avx2 {
#define ZAYA_CPU_PATH_END }
#if defined(__clang__)
#define ZAYA_CPU_TARGET_BEGIN \
  _Pragma("clang attribute push(__attribute__((target(\"avx,avx2,fma\"))), apply_to = function)")
#else
#define ZAYA_CPU_TARGET_BEGIN _Pragma("GCC push_options") _Pragma("GCC target(\"avx,avx2,fma\")")
#endif
#elif defined(ZAYA_CPU_PATH_AVX512)
#define ZAYA_CPU_PATH_BEGIN inline namespace avx512 {
#define ZAYA_CPU_PATH_END }
// One string literal each: _Pragma takes no concatenation (hence no line breaks here).
// clang-format off
#if defined(__clang__)
#define ZAYA_CPU_TARGET_BEGIN _Pragma("clang attribute push(__attribute__((target(\"avx,avx2,fma,avx512f,avx512bw,avx512dq,avx512vl,avx512cd\"))), apply_to = function)")
#else
#define ZAYA_CPU_TARGET_BEGIN _Pragma("GCC push_options") _Pragma("GCC target(\"avx,avx2,fma,avx512f,avx512bw,avx512dq,avx512vl,avx512cd\")")
#endif
// clang-format on
#else
#define ZAYA_CPU_PATH_BEGIN
#define ZAYA_CPU_PATH_END
#define ZAYA_CPU_TARGET_BEGIN
#endif

#if !defined(ZAYA_CPU_PATH_AVX2) && !defined(ZAYA_CPU_PATH_AVX512)
#define ZAYA_CPU_TARGET_END
#elif defined(__clang__)
#define ZAYA_CPU_TARGET_END _Pragma("clang attribute pop")
#else
#define ZAYA_CPU_TARGET_END _Pragma("GCC pop_options")
#endif

// The register file of the compile's path, for kernels that block their work to fit it: vector
// registers and floats per register (AVX-512: 32 zmm of 16; AVX2: 16 ymm of 8; the baseline: 16
// xmm of 4). GCC's pragma defines __AVX512F__ and __AVX2__ in a path's region, clang's does not:
// hence the path macros first.
#if defined(ZAYA_CPU_PATH_AVX512) || (!defined(ZAYA_CPU_PATH_AVX2) && defined(__AVX512F__))
#define ZAYA_CPU_VECTOR_REGISTERS 32
#define ZAYA_CPU_VECTOR_FLOATS 16
#elif defined(ZAYA_CPU_PATH_AVX2) || defined(__AVX2__)
#define ZAYA_CPU_VECTOR_REGISTERS 16
#define ZAYA_CPU_VECTOR_FLOATS 8
#else
#define ZAYA_CPU_VECTOR_REGISTERS 16
#define ZAYA_CPU_VECTOR_FLOATS 4
#endif
