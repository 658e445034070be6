#include "backend/cpu/optim_ops.h"

#include <cmath>
#include <vector>

#include "backend/cpu/parallel_threshold.h"
#include "backend/newton_schulz.h"

ZAYA_CPU_TARGET_BEGIN
namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

namespace {

// Elementwise loops go parallel only above this size (thread start-up dominates below it).
constexpr int64_t kParallelMin = 1 << 15;

}  // namespace

double sum_of_squares_chunks(const float* x, const OptimSegment* chunks, int count) {
  std::vector<double> partial(size_t(count), 0.0);
#pragma omp parallel for schedule(static)
  for (int k = 0; k < count; ++k) {
    const float* p = x + chunks[k].begin;
    double s = 0;
    for (int64_t i = 0; i < chunks[k].n; ++i) s += double(p[i]) * double(p[i]);
    partial[size_t(k)] = s;
  }
  double total = 0;
  for (const double s : partial) total += s;  // table order
  return total;
}

void scale_segments(float* x, const OptimSegment* segments, int count, float s) {
  for (int k = 0; k < count; ++k) {
    float* p = x + segments[k].begin;
    const int64_t n = segments[k].n;
    for_ranges(n, worth_threads(n, kParallelMin), [&](int64_t first, int64_t last) {
      for (int64_t i = first; i < last; ++i) p[i] *= s;
    });
  }
}

void adamw_update(float* w, const float* g, float* m, float* v, const OptimSegment* segments,
                  int count, const AdamwConstants& c) {
  for (int k = 0; k < count; ++k) {
    const int64_t at = segments[k].begin, n = segments[k].n;
    const float keep = segments[k].keep;
    float* ws = w + at;
    const float* gs = g + at;
    float* ms = m + at;
    float* vs = v + at;
    for_ranges(n, worth_threads(n, kParallelMin), [&](int64_t first, int64_t last) {
      for (int64_t i = first; i < last; ++i) {
        ms[i] = c.beta1 * ms[i] + c.one_minus_beta1 * gs[i];
        vs[i] = c.beta2 * vs[i] + c.one_minus_beta2 * gs[i] * gs[i];
        ws[i] = ws[i] * keep - c.step_size * ms[i] / (std::sqrt(vs[i]) * c.inv_sqrt_bc2 + c.eps);
      }
    });
  }
}

void muon_momentum(float* buf, float* d, const float* g, const OptimSegment* segments, int count,
                   float beta, float one_minus_beta, bool nesterov) {
  for (int k = 0; k < count; ++k) {
    const int64_t at = segments[k].begin, n = segments[k].n;
    float* b = buf + at;
    float* ds = d + at;
    const float* gs = g + at;
    for_ranges(n, worth_threads(n, kParallelMin), [&](int64_t first, int64_t last) {
      for (int64_t i = first; i < last; ++i) {
        b[i] = beta * b[i] + one_minus_beta * gs[i];
        ds[i] = nesterov ? one_minus_beta * gs[i] + beta * b[i] : b[i];
      }
    });
  }
}

void decay_and_step(float* w, const float* d, const OptimSegment* segments, int count) {
  for (int k = 0; k < count; ++k) {
    const int64_t at = segments[k].begin, n = segments[k].n;
    const float keep = segments[k].keep, step = segments[k].step;
    float* ws = w + at;
    const float* ds = d + at;
    for_ranges(n, worth_threads(n, kParallelMin), [&](int64_t first, int64_t last) {
      for (int64_t i = first; i < last; ++i) ws[i] = ws[i] * keep - step * ds[i];
    });
  }
}

void newton_schulz_batch(float* const* matrices, int count, int64_t rows, int64_t cols, int steps) {
  // The GEMMs inside are threaded; the matrices go one at a time, reusing one workspace.
  thread_local NsWorkspace workspace;
  for (int k = 0; k < count; ++k)
    newton_schulz(matrices[k], matrices[k], rows, cols, steps, workspace);
}

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
ZAYA_CPU_TARGET_END
