// Which OpenBLAS kernels a process runs, decided by zaya rather than left to the library's CPU
// table. Debian's OpenBLAS 0.3.21 is built with DYNAMIC_ARCH: at load it matches the CPU's
// family/model against the CPUs it knew when it was released, and a newer CPU it does not know
// (a 2-core Intel Xeon of family 6, model 207, say) gets its generic "Prescott" SSE3 kernels, 5x
// slower than the AVX-512 ones the CPU runs. The decision here compares what the CPU can run (its
// cpuid feature bits) with what the library took, and picks the best kernels the library has for
// those features when the library fell below them.
//
// Everything in this header is a pure function of its inputs, so the decision can be tested on
// recorded machines; blas_startup.h applies it to the running process.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace zaya::cpu::blas {

// The instruction-set features that decide which OpenBLAS x86-64 kernels can run. AVX and
// AVX-512 count only when the operating system saves their registers (XCR0), as cpuid alone
// does not say.
struct CpuFeatures {
  bool avx = false;
  bool avx2 = false;
  bool fma = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512dq = false;
  bool avx512vl = false;
  bool avx512cd = false;
  bool avx512_bf16 = false;
};

// This CPU's features (cpuid + xgetbv); all false off x86-64.
CpuFeatures read_cpu_features();

// "avx2 fma avx512f ..." for logs and errors.
std::string describe(const CpuFeatures& features);

// Kernel families ordered by the instructions their sgemm uses. OpenBLAS names several cores per
// tier (Haswell and Zen share the AVX2 kernels; SkylakeX and Cooperlake the AVX-512 sgemm).
enum class KernelTier { kUnknown = -1, kSse = 0, kAvx = 1, kAvx2 = 2, kAvx512 = 3 };

// Core names compare as OpenBLAS compares OPENBLAS_CORETYPE: ignoring case.
bool same_kernel_name(std::string_view a, std::string_view b);

// The tier of an OpenBLAS core name (case-insensitive, as OPENBLAS_CORETYPE is); kUnknown for a
// name this table does not know.
KernelTier tier_of(std::string_view kernels);

// The best kernels of Debian's OpenBLAS 0.3.21 that a CPU with these features runs: SkylakeX
// (AVX-512 F/BW/DQ/VL/CD; Cooperlake's sgemm is the same code, it adds only bf16 products zaya
// does not call), Haswell (AVX2 + FMA), Sandybridge (AVX), else Prescott.
std::string best_kernels_for(const CpuFeatures& features);

// Where the kernels a process runs came from.
enum class KernelSource {
  kLibrary,      // OpenBLAS's own choice for this CPU
  kEnvironment,  // OPENBLAS_CORETYPE set by the user (respected: it may be there for correctness)
  kZaya,         // chosen by zaya because the library's choice fell below the CPU
  kFlag,         // --blas-kernels NAME (or ZAYA_BLAS_KERNELS)
};

// What the user asked for: "auto" (the default), "library" (OpenBLAS's own choice, zaya does not
// step in) or a core name.
struct KernelRequest {
  std::string mode = "auto";
  bool from_environment = false;  // ZAYA_BLAS_KERNELS rather than --blas-kernels (for messages)
};

struct KernelDecision {
  // The value OPENBLAS_CORETYPE must have in the process that computes; empty: unset, the library
  // chooses.
  std::string coretype;
  KernelSource source = KernelSource::kLibrary;
};

// The decision. `library_choice` is the core OpenBLAS takes with OPENBLAS_CORETYPE unset;
// `user_coretype` is an OPENBLAS_CORETYPE the user set (not one zaya set). Throws zaya::Error for
// a request that is neither auto, library nor a known core name.
KernelDecision decide_kernels(const CpuFeatures& cpu, std::string_view library_choice,
                              const std::optional<std::string>& user_coretype,
                              const KernelRequest& request);

// "SkylakeX kernels (chosen by zaya: OpenBLAS would take Prescott)" and the other sources' words.
std::string describe_source(KernelSource source, std::string_view kernels,
                            std::string_view library_choice, std::string_view request_name);

const char* source_name(KernelSource source);  // "library", "environment", "zaya", "flag"

// The core names decide_kernels accepts, for --help and errors.
std::string known_kernel_names();

}  // namespace zaya::cpu::blas
