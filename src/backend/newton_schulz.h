// Muon's orthogonalisation: the Newton–Schulz quintic iteration (KellerJordan/Muon). It maps a
// matrix G = U S Vᵀ to roughly U S' Vᵀ with S' in a band around 1 (≈0.7–1.2 after 5 steps), not
// exactly U Vᵀ: the coefficients trade exactness for fast growth of small singular values.
//
// A backend-wide definition: every backend's newton_schulz_batch (backend_ops.inc) computes this
// iteration with these coefficients; newton_schulz below is the CPU's, on host buffers
// (backend/cpu/newton_schulz.cpp), and the oracle the others are held to.
#pragma once

#include <cstdint>
#include <vector>

namespace zaya {

// (a, b, c) of X ← a·X + (b·A + c·A²)·X with A = X Xᵀ.
struct NsCoefficients {
  float a = 3.4445f;
  float b = -4.7750f;
  float c = 2.0315f;
};

// Reusable work buffers (sized on first use for the largest matrix seen).
struct NsWorkspace {
  std::vector<float> x, y, gram, poly;
};

// out[rows, cols] = NS^steps(g / (‖g‖_F + 1e-7)), in fp32 with OpenBLAS GEMMs. The iteration runs
// on the wide orientation (transposing when rows > cols) so the Gram matrix is min(rows, cols)².
// `out` may alias `g`.
void newton_schulz(const float* g, float* out, int64_t rows, int64_t cols, int steps,
                   NsWorkspace& ws, const NsCoefficients& coef = {});

}  // namespace zaya
