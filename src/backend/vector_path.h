// The CPU backend's vector paths (backend/cpu/vector_path.cpp): the same kernel sources
// (backend/cpu's ops) compiled for more than one instruction set in one binary, and the path a
// process runs chosen at start from the CPU's features (cpuid + xgetbv). A portable build
// (-march=x86-64) carries baseline (SSE2), avx2 (AVX2 + FMA) and avx512 (AVX-512 F/BW/DQ/VL/CD); a
// build for a higher level (-march=x86-64-v3, -march=native) carries its own level and those above
// it (cpu_path_target.h says how).
//
// Every path computes the same bits: the kernels fix their summation orders in code (never by
// the vector width), GCC vectorises no floating-point reduction without -ffast-math, and
// -ffp-contract=off keeps the compiler from fusing a multiply and an add into an FMA where the
// instruction set has one (which would round once instead of twice). So a run's losses and model
// bytes do not depend on the path a machine takes (tests/cli/vector_paths.sh).
#pragma once

#include <string>
#include <vector>

namespace zaya {

enum class VectorPath { kBaseline, kAvx2, kAvx512 };

// "baseline", "avx2", "avx512".
const char* vector_path_name(VectorPath path);

// The level the build compiled its plain code for (-march): the lowest path it carries.
VectorPath own_vector_path();

// The paths compiled into this binary, lowest first: its own level and each above it that the
// build added (CMakeLists.txt, ZAYA_CPU_PATHS).
std::vector<VectorPath> built_vector_paths();
// "baseline, avx2, avx512".
std::string built_vector_paths_text();

// Empty when this CPU runs `path`; otherwise what it lacks ("avx512bw avx512vl").
std::string missing_cpu_features(VectorPath path);

// How the process's path was chosen.
struct VectorPathChoice {
  VectorPath path = VectorPath::kBaseline;
  bool requested = false;  // by --vector-path or ZAYA_VECTOR_PATH (else the best this CPU runs)
  std::string why;         // "the best of this binary's paths that this CPU runs", ...
};

// Chooses the process's path: `request` is "auto" or a path name, `source` what gave it
// ("--vector-path", "ZAYA_VECTOR_PATH") for messages. Throws zaya::Error naming the source when
// the name is unknown, the binary lacks the path, or the CPU lacks a feature the path needs (never
// SIGILL later).
VectorPathChoice choose_vector_path(const std::string& request, const std::string& source);

// Sets the path that cpu_backend() computes with from here on (the process's choice; a backend
// made for a path keeps it: cpu_backend(VectorPath)).
void set_active_vector_path(const VectorPathChoice& choice);

// The choice in force: set_active_vector_path's, else ZAYA_VECTOR_PATH's or auto's (made once).
VectorPathChoice active_vector_path();

// "cpu vector path: avx512 (auto: ...; this binary carries baseline, avx2, avx512)" for logs and
// benchmark output.
std::string vector_path_summary_line();

// zaya info's section: the paths built in, the CPU's, the one chosen and why, per kernel family.
std::string format_vector_path_info();

// The help text of --vector-path.
extern const char* const kVectorPathFlagHelp;

}  // namespace zaya
