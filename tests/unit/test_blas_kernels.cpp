// The BLAS kernel decision on recorded machines, and the self-check against right and wrong
// products.
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/blas_kernels.h"
#include "backend/cpu/blas_self_check.h"
#include "backend/cpu/blas_startup.h"
#include "backend/cpu/matmul.h"
#include "core/error.h"

namespace zaya::cpu::blas {
namespace {

CpuFeatures avx512_cpu(bool bf16) {
  CpuFeatures f;
  f.avx = f.avx2 = f.fma = true;
  f.avx512f = f.avx512bw = f.avx512dq = f.avx512vl = f.avx512cd = true;
  f.avx512_bf16 = bf16;
  return f;
}

CpuFeatures avx2_cpu() {
  CpuFeatures f;
  f.avx = f.avx2 = f.fma = true;
  return f;
}

const KernelRequest kAuto{};

// The 2-core Intel Xeon of family 6, model 207 (AVX-512 with BF16): OpenBLAS 0.3.21 does not know
// it and takes Prescott.
TEST(BlasKernels, IntelXeonModel207GetsSkylakeXWhereOpenBlasFallsBackToPrescott) {
  const KernelDecision d = decide_kernels(avx512_cpu(true), "Prescott", std::nullopt, kAuto);
  EXPECT_EQ(d.coretype, "SkylakeX");
  EXPECT_EQ(d.source, KernelSource::kZaya);
  EXPECT_EQ(describe_source(d.source, d.coretype, "Prescott", "--blas-kernels"),
            "SkylakeX kernels (chosen by zaya: OpenBLAS would take Prescott)");
}

// The AVX-512 EPYC whose environment sets OPENBLAS_CORETYPE=Haswell for correctness: respected,
// though the CPU runs AVX-512.
TEST(BlasKernels, EpycWithHaswellInTheEnvironmentKeepsIt) {
  const KernelDecision d = decide_kernels(avx512_cpu(true), "", std::string("Haswell"), kAuto);
  EXPECT_EQ(d.coretype, "Haswell");
  EXPECT_EQ(d.source, KernelSource::kEnvironment);
  // "library" respects it as well: OpenBLAS itself obeys the variable.
  const KernelDecision lib =
      decide_kernels(avx512_cpu(true), "", std::string("Haswell"), KernelRequest{"library"});
  EXPECT_EQ(lib.coretype, "Haswell");
  EXPECT_EQ(lib.source, KernelSource::kEnvironment);
}

// The same EPYC without the variable: OpenBLAS takes Cooperlake, AVX-512 like the CPU: zaya does
// not step in.
TEST(BlasKernels, EpycWhereOpenBlasTakesAvx512KernelsIsLeftAlone) {
  const KernelDecision d = decide_kernels(avx512_cpu(true), "Cooperlake", std::nullopt, kAuto);
  EXPECT_EQ(d.coretype, "");
  EXPECT_EQ(d.source, KernelSource::kLibrary);
}

TEST(BlasKernels, Avx2OnlyCpuGetsHaswellOverPrescottAndKeepsZen) {
  const KernelDecision unknown = decide_kernels(avx2_cpu(), "Prescott", std::nullopt, kAuto);
  EXPECT_EQ(unknown.coretype, "Haswell");
  EXPECT_EQ(unknown.source, KernelSource::kZaya);
  const KernelDecision zen = decide_kernels(avx2_cpu(), "Zen", std::nullopt, kAuto);
  EXPECT_EQ(zen.coretype, "");
  EXPECT_EQ(zen.source, KernelSource::kLibrary);
  // Sandybridge (AVX, no AVX2) is below the CPU as well.
  EXPECT_EQ(decide_kernels(avx2_cpu(), "Sandybridge", std::nullopt, kAuto).coretype, "Haswell");
}

TEST(BlasKernels, CpuWithoutAvxHasNothingBetterThanTheLibrary) {
  const CpuFeatures none;
  EXPECT_EQ(best_kernels_for(none), "Prescott");
  const KernelDecision d = decide_kernels(none, "Prescott", std::nullopt, kAuto);
  EXPECT_EQ(d.coretype, "");
  EXPECT_EQ(d.source, KernelSource::kLibrary);
}

// A core a later library names, which this table does not know, is the library's business.
TEST(BlasKernels, UnknownLibraryChoiceIsLeftAlone) {
  const KernelDecision d = decide_kernels(avx512_cpu(true), "SapphireRapids", std::nullopt, kAuto);
  EXPECT_EQ(d.source, KernelSource::kLibrary);
}

TEST(BlasKernels, FlagNamesKernelsCaseInsensitivelyAndOverridesTheEnvironment) {
  const KernelDecision d = decide_kernels(avx512_cpu(false), "Prescott", std::string("Haswell"),
                                          KernelRequest{"skylakex"});
  EXPECT_EQ(d.coretype, "SkylakeX");
  EXPECT_EQ(d.source, KernelSource::kFlag);
  const KernelDecision lib =
      decide_kernels(avx512_cpu(false), "Prescott", std::nullopt, KernelRequest{"LIBRARY"});
  EXPECT_EQ(lib.coretype, "");
  EXPECT_EQ(lib.source, KernelSource::kLibrary);
}

TEST(BlasKernels, FlagRefusesUnknownNamesAndKernelsTheCpuCannotRun) {
  try {
    decide_kernels(avx2_cpu(), "Haswell", std::nullopt, KernelRequest{"Skylake"});
    FAIL() << "an unknown core was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--blas-kernels: 'Skylake' is not a kernel choice"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("SkylakeX"), std::string::npos) << e.what();
  }
  try {
    decide_kernels(avx2_cpu(), "Haswell", std::nullopt, KernelRequest{"SkylakeX", true});
    FAIL() << "AVX-512 kernels were accepted on an AVX2 CPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ZAYA_BLAS_KERNELS SkylakeX: this CPU cannot run"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("its best are Haswell"), std::string::npos) << e.what();
  }
}

TEST(BlasKernels, TiersOrderTheCores) {
  EXPECT_EQ(tier_of("prescott"), KernelTier::kSse);
  EXPECT_EQ(tier_of("Sandybridge"), KernelTier::kAvx);
  EXPECT_EQ(tier_of("Zen"), KernelTier::kAvx2);
  EXPECT_EQ(tier_of("COOPERLAKE"), KernelTier::kAvx512);
  EXPECT_EQ(tier_of("Skylake"), KernelTier::kUnknown);
}

// A plain float64 product rounded once: the self-check's reference passes it.
void exact_gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda,
                const float* b, int ldb, float beta, float* c, int ldc) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0.0;
      for (int l = 0; l < k; ++l)
        s += double(ta ? a[size_t(l) * lda + i] : a[size_t(i) * lda + l]) *
             double(tb ? b[size_t(j) * ldb + l] : b[size_t(l) * ldb + j]);
      c[size_t(i) * ldc + j] = float(alpha * s + double(beta) * c[size_t(i) * ldc + j]);
    }
}

TEST(BlasSelfCheck, PassesARightProductAndThisProcesssBlas) {
  const SelfCheckResult exact = check_gemm(exact_gemm);
  EXPECT_TRUE(exact.ok) << exact.failure;
  EXPECT_EQ(exact.products, 16);
  EXPECT_GT(exact.entries, 10000);
  const SelfCheckResult blas = check_gemm(cpu::gemm);
  EXPECT_TRUE(blas.ok) << blas.failure;
  EXPECT_LE(blas.worst_ratio, 1.0);
}

TEST(BlasSelfCheck, RefusesWrongProducts) {
  // One entry off by a thousandth.
  const SelfCheckResult off =
      check_gemm([](bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda,
                    const float* b, int ldb, float beta, float* c, int ldc) {
        exact_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        if (m == 130 && n == 70) c[size_t(129) * ldc + 69] *= 1.001f;
      });
  EXPECT_FALSE(off.ok);
  EXPECT_NE(off.failure.find("NT 130x70x257 (alpha 1, beta 1): C[129,69]"), std::string::npos)
      << off.failure;
  // The last K-panel lost (as a kernel with a wrong panel size would).
  const SelfCheckResult short_k =
      check_gemm([](bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda,
                    const float* b, int ldb, float beta, float* c, int ldc) {
        exact_gemm(ta, tb, m, n, k > 512 ? 512 : k, alpha, a, lda, b, ldb, beta, c, ldc);
      });
  EXPECT_FALSE(short_k.ok);
  EXPECT_NE(short_k.failure.find("x1100"), std::string::npos) << short_k.failure;
  // The accumulation into C lost (beta taken as 0), as the weight gradients' += would be.
  const SelfCheckResult no_beta =
      check_gemm([](bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda,
                    const float* b, int ldb, float, float* c,
                    int ldc) { exact_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, 0.0f, c, ldc); });
  EXPECT_FALSE(no_beta.ok);
  EXPECT_NE(no_beta.failure.find("beta 1)"), std::string::npos) << no_beta.failure;
  // A NaN.
  const SelfCheckResult nan =
      check_gemm([](bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda,
                    const float* b, int ldb, float beta, float* c, int ldc) {
        exact_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        if (m == 1) c[0] = std::nanf("");
      });
  EXPECT_FALSE(nan.ok);
  EXPECT_NE(nan.failure.find("1x1x1"), std::string::npos) << nan.failure;
}

// The test program ran prepare_blas (tests/unit/test_main.cpp): the kernels it runs are the
// decision's, and the self-check passed.
TEST(BlasStartup, ThisProcessWasPreparedAndChecked) {
  const BlasState& state = blas_state();
  EXPECT_TRUE(state.checked);
  EXPECT_TRUE(state.check.ok);
  EXPECT_EQ(state.library.rfind("OpenBLAS ", 0), 0u) << state.library;
  EXPECT_NE(tier_of(state.kernels), KernelTier::kUnknown) << state.kernels;
  EXPECT_NE(blas_summary(state).find("self-check passed (16 products"), std::string::npos)
      << blas_summary(state);
}

}  // namespace
}  // namespace zaya::cpu::blas
