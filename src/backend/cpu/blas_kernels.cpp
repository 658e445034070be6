#include "backend/cpu/blas_kernels.h"

#include <algorithm>
#include <cctype>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "core/error.h"

namespace zaya::cpu::blas {

namespace {

struct NamedTier {
  const char* name;
  KernelTier tier;
};

// The x86-64 cores of Debian's DYNAMIC_ARCH OpenBLAS 0.3.21 (openblas_get_corename's spellings)
// by the instructions their single-precision GEMM uses. Piledriver and its successors have FMA
// but no AVX2: their kernels are the AVX tier's.
constexpr NamedTier kCores[] = {
    {"Prescott", KernelTier::kSse},      {"Core2", KernelTier::kSse},
    {"Penryn", KernelTier::kSse},        {"Dunnington", KernelTier::kSse},
    {"Nehalem", KernelTier::kSse},       {"Atom", KernelTier::kSse},
    {"Nano", KernelTier::kSse},          {"Opteron", KernelTier::kSse},
    {"Barcelona", KernelTier::kSse},     {"Bobcat", KernelTier::kSse},
    {"Sandybridge", KernelTier::kAvx},   {"Bulldozer", KernelTier::kAvx},
    {"Piledriver", KernelTier::kAvx},    {"Steamroller", KernelTier::kAvx},
    {"Excavator", KernelTier::kAvx},     {"Haswell", KernelTier::kAvx2},
    {"Zen", KernelTier::kAvx2},          {"SkylakeX", KernelTier::kAvx512},
    {"Cooperlake", KernelTier::kAvx512},
};

const NamedTier* find_core(std::string_view name) {
  for (const NamedTier& core : kCores)
    if (same_kernel_name(core.name, name)) return &core;
  return nullptr;
}

bool has_avx512_sgemm(const CpuFeatures& f) {
  return f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl && f.avx512cd;
}

KernelTier cpu_tier(const CpuFeatures& f) {
  if (has_avx512_sgemm(f)) return KernelTier::kAvx512;
  if (f.avx2 && f.fma) return KernelTier::kAvx2;
  if (f.avx) return KernelTier::kAvx;
  return KernelTier::kSse;
}

// Each tier's best kernels and what they need, indexed by the tier.
struct TierKernels {
  const char* best;
  const char* needs;
};
constexpr TierKernels kTierKernels[] = {
    {"Prescott", "sse3"},
    {"Sandybridge", "avx"},
    {"Haswell", "avx2 fma"},
    {"SkylakeX", "avx512f avx512bw avx512dq avx512vl avx512cd"},
};

const TierKernels& tier_kernels(KernelTier tier) {
  return kTierKernels[tier == KernelTier::kUnknown ? 0 : int(tier)];
}

}  // namespace

#if defined(__x86_64__) || defined(__i386__)
CpuFeatures read_cpu_features() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & bit_OSXSAVE;
  const bool fma = c & bit_FMA;
  const bool avx_cpu = c & bit_AVX;
  // XCR0: which register states the operating system saves on a context switch. AVX needs XMM and
  // YMM (bits 1, 2); AVX-512 also the opmask and the upper ZMM halves (bits 5, 6, 7).
  unsigned long long xcr0 = 0;
  if (osxsave) {
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = (static_cast<unsigned long long>(hi) << 32) | lo;
  }
  const bool os_avx = (xcr0 & 0x6) == 0x6;
  const bool os_avx512 = (xcr0 & 0xe6) == 0xe6;
  f.avx = avx_cpu && os_avx;
  f.fma = fma && os_avx;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.avx2 = os_avx && (b & bit_AVX2);
    f.avx512f = os_avx512 && (b & bit_AVX512F);
    f.avx512dq = os_avx512 && (b & bit_AVX512DQ);
    f.avx512cd = os_avx512 && (b & bit_AVX512CD);
    f.avx512bw = os_avx512 && (b & bit_AVX512BW);
    f.avx512vl = os_avx512 && (b & bit_AVX512VL);
  }
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx512_bf16 = os_avx512 && (a & (1u << 5));
  return f;
}
#else
CpuFeatures read_cpu_features() {
  return {};
}
#endif

std::string describe(const CpuFeatures& f) {
  std::string out;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!out.empty()) out += ' ';
    out += name;
  };
  add(f.avx, "avx");
  add(f.avx2, "avx2");
  add(f.fma, "fma");
  add(f.avx512f, "avx512f");
  add(f.avx512bw, "avx512bw");
  add(f.avx512dq, "avx512dq");
  add(f.avx512vl, "avx512vl");
  add(f.avx512cd, "avx512cd");
  add(f.avx512_bf16, "avx512_bf16");
  return out.empty() ? "no AVX" : out;
}

KernelTier tier_of(std::string_view kernels) {
  const NamedTier* core = find_core(kernels);
  return core ? core->tier : KernelTier::kUnknown;
}

bool same_kernel_name(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}

std::string best_kernels_for(const CpuFeatures& f) {
  return tier_kernels(cpu_tier(f)).best;
}

std::string known_kernel_names() {
  std::string out;
  for (const NamedTier& core : kCores) {
    if (!out.empty()) out += ", ";
    out += core.name;
  }
  return out;
}

KernelDecision decide_kernels(const CpuFeatures& cpu, std::string_view library_choice,
                              const std::optional<std::string>& user_coretype,
                              const KernelRequest& request) {
  const char* flag = request.from_environment ? "ZAYA_BLAS_KERNELS" : "--blas-kernels";
  if (same_kernel_name(request.mode, "library")) {
    if (user_coretype) return {*user_coretype, KernelSource::kEnvironment};
    return {"", KernelSource::kLibrary};
  }
  if (!same_kernel_name(request.mode, "auto")) {
    const NamedTier* core = find_core(request.mode);
    ZAYA_CHECK(core != nullptr, flag, ": '", request.mode,
               "' is not a kernel choice (expected auto, library or one of the OpenBLAS 0.3.21 "
               "cores: ",
               known_kernel_names(), ")");
    // OpenBLAS itself quietly substitutes other kernels for a core the CPU cannot run: say so
    // instead.
    ZAYA_CHECK(core->tier <= cpu_tier(cpu), flag, " ", core->name,
               ": this CPU cannot run those kernels (they need ", tier_kernels(core->tier).needs,
               "; the CPU has ", describe(cpu), "; its best are ", best_kernels_for(cpu), ")");
    return {core->name, KernelSource::kFlag};
  }
  if (user_coretype) return {*user_coretype, KernelSource::kEnvironment};
  const KernelTier library_tier = tier_of(library_choice);
  // A core this table does not know (a later library's) is the library's own business.
  if (library_tier != KernelTier::kUnknown && library_tier < cpu_tier(cpu))
    return {best_kernels_for(cpu), KernelSource::kZaya};
  return {"", KernelSource::kLibrary};
}

const char* source_name(KernelSource source) {
  switch (source) {
    case KernelSource::kEnvironment:
      return "environment";
    case KernelSource::kZaya:
      return "zaya";
    case KernelSource::kFlag:
      return "flag";
    default:
      return "library";
  }
}

std::string describe_source(KernelSource source, std::string_view kernels,
                            std::string_view library_choice, std::string_view request_name) {
  const std::string k(kernels);
  switch (source) {
    case KernelSource::kZaya:
      return k + " kernels (chosen by zaya: OpenBLAS would take " + std::string(library_choice) +
             ")";
    case KernelSource::kEnvironment:
      return k + " kernels (OPENBLAS_CORETYPE=" + k + " from the environment)";
    case KernelSource::kFlag:
      return k + " kernels (" + std::string(request_name) + " " + k + ")";
    default:
      return k + " kernels (OpenBLAS's own choice)";
  }
}

}  // namespace zaya::cpu::blas
