// The optimizer on the GPU against the CPU optimizer (optim/optimizer.h), the oracle: the same
// Optimizer class on CudaBackend, its state and the weights in device memory, over AdamW
// tensors of several shapes, Muon matrices (two of one shape, which Newton–Schulz takes as one
// batch, a tall one and a square one) and a buffer it must leave alone, with clipping on.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "../unit/newton_schulz_fp64.h"
#include "../unit/test_util.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device.h"
#include "backend/cuda/ops.h"
#include "backend/newton_schulz.h"
#include "gpu_test_util.h"
#include "optim/optimizer.h"

namespace zaya {
namespace {

using namespace test;

TEST(GpuOptimizer, TheStepOnTheGpuIsTheCpuOptimizers) {
  size_t total = 0;
  const std::vector<ParamSpec> specs = test::flat_layout({{{7, 5}, OptimGroup::AdamW},
                                                          {{12, 20}, OptimGroup::Muon},
                                                          {{33}, OptimGroup::AdamW},
                                                          {{12, 20}, OptimGroup::Muon},
                                                          {{1}, OptimGroup::AdamW},
                                                          {{5}, OptimGroup::Buffer},
                                                          {{40, 8}, OptimGroup::Muon},
                                                          {{16, 4, 2}, OptimGroup::AdamW},
                                                          {{6, 6}, OptimGroup::Muon},
                                                          {{300}, OptimGroup::AdamW}},
                                                         total);
  OptimConfig config;
  config.weight_decay = 0.1;
  config.grad_clip = 0.5;  // random gradients have a larger norm: the clip is exercised
  Optimizer cpu(specs, total, config);
  Optimizer gpu(specs, total, config, nullptr, &cuda_backend());
  Floats w = random_floats(total, 60);
  DeviceBuffer<float> dw(w), dg(total);
  for (int step = 1; step <= 3; ++step) {
    const double lr = 0.01 * step;
    Floats g = random_floats(total, 60 + uint32_t(step));
    dg.upload(g);
    const float cpu_norm = cpu.step(w.data(), g.data(), lr);  // clips g in place
    const float gpu_norm = gpu.step(dw.get(), dg.get(), lr);
    EXPECT_NEAR(gpu_norm, cpu_norm, 1e-6 * cpu_norm) << "step " << step;
    EXPECT_TRUE(elementwise_close(dg.download(), g, kTolerance))
        << "clipped gradients, step " << step;
    EXPECT_TRUE(elementwise_close(dw.download(), w, kTolerance)) << "weights, step " << step;
  }
  for (const char* name : {"exp_avg", "exp_avg_sq"}) {
    const Tensor a = cpu.state_tensors().at(name), b = gpu.state_tensors().at(name);
    const Floats want(a.data<float>(), a.data<float>() + a.numel());
    const Floats got(b.data<float>(), b.data<float>() + b.numel());
    EXPECT_TRUE(elementwise_close(got, want, kTolerance)) << name;
  }
  EXPECT_EQ(gpu.step_count(), 3);
}

double max_error(const Floats& got, const std::vector<double>& want) {
  double e = 0;
  for (size_t i = 0; i < want.size(); ++i) e = std::max(e, std::fabs(double(got[i]) - want[i]));
  return e;
}

// A batch of same-shape matrices in one call, each ending as Newton–Schulz of itself: wide,
// tall, square and 1×1. Both fp32 results are held to float64, and the GPU's error may not
// exceed four times the CPU's (iterations amplify fp32 rounding, so a fixed bound would say
// more about the inputs than about the kernel).
TEST(GpuOptimizer, NewtonSchulzBatchIsTheCpusAgainstFloat64) {
  struct Case {
    int64_t rows, cols;
    int count;
  };
  for (const Case c : {Case{12, 20, 3}, Case{40, 8, 2}, Case{16, 16, 1}, Case{1, 1, 2}}) {
    const size_t size = size_t(c.rows * c.cols);
    std::vector<Floats> inputs;
    std::vector<DeviceBuffer<float>> device;
    std::vector<float*> pointers;
    for (int k = 0; k < c.count; ++k) {
      inputs.push_back(random_floats(size, 200 + uint32_t(k)));
      device.emplace_back(inputs.back());
      pointers.push_back(device.back().get());
    }
    cuda::newton_schulz_batch(pointers.data(), c.count, c.rows, c.cols, 5);
    NsWorkspace ws;
    for (int k = 0; k < c.count; ++k) {
      Floats cpu(size);
      newton_schulz(inputs[size_t(k)].data(), cpu.data(), c.rows, c.cols, 5, ws);
      // Newton–Schulz in float64, the reference both fp32 runs are measured against.
      const std::vector<double> exact = test::newton_schulz_fp64(
          std::vector<double>(inputs[size_t(k)].begin(), inputs[size_t(k)].end()), c.rows, c.cols,
          5);
      const double cpu_error = max_error(cpu, exact);
      const double gpu_error = max_error(device[size_t(k)].download(), exact);
      EXPECT_LE(gpu_error, 4 * cpu_error + 1e-7)
          << c.rows << "x" << c.cols << " matrix " << k << ": the CPU's error " << cpu_error;
    }
  }
}

}  // namespace
}  // namespace zaya
