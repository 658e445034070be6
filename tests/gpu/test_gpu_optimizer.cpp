// The GPU's multi-tensor AdamW against the CPU optimizer (optim/optimizer.h), the oracle: three
// steps over tensors of several shapes (matrices decay, vectors do not), fp32, within 1e-5 of the
// weights' scale. The step constants follow the formula optim/optimizer.h states.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "../unit/test_util.h"
#include "backend/cuda/device.h"
#include "backend/cuda/ops.h"
#include "gpu_test_util.h"
#include "optim/optimizer.h"

namespace zaya {
namespace {

using namespace test;

TEST(GpuOps, AdamwMultiTensorIsTheCpuOptimizersAdamw) {
  size_t total = 0;
  const std::vector<ParamSpec> specs = test::flat_layout({{{7, 5}, OptimGroup::AdamW},
                                                          {{33}, OptimGroup::AdamW},
                                                          {{1}, OptimGroup::AdamW},
                                                          {{16, 4, 2}, OptimGroup::AdamW},
                                                          {{300}, OptimGroup::AdamW}},
                                                         total);
  OptimConfig config;
  config.weight_decay = 0.1;
  config.grad_clip = 0.0;  // the CPU step must be the plain update
  Optimizer cpu(specs, total, config);
  Floats w = test::random_floats(total, 60);
  DeviceBuffer<float> dw(w), dm(total), dv(total), dg(total);
  dm.zero();
  dv.zero();
  std::vector<cuda::AdamwSegment> segments;
  for (const ParamSpec& p : specs) segments.push_back({int64_t(p.offset), p.numel, 1.0f});
  for (int step = 1; step <= 3; ++step) {
    const double lr = 0.01 * step;
    Floats g = test::random_floats(total, 60 + uint32_t(step));  // step() may clip in place
    cpu.step(w.data(), g.data(), lr);
    dg.upload(g);
    const double t = step;
    cuda::AdamwStep s{float(config.adam_beta1),
                      float(1 - config.adam_beta1),
                      float(config.adam_beta2),
                      float(1 - config.adam_beta2),
                      float(lr / (1.0 - std::pow(config.adam_beta1, t))),
                      float(1.0 / std::sqrt(1.0 - std::pow(config.adam_beta2, t))),
                      float(config.adam_eps)};
    for (size_t i = 0; i < specs.size(); ++i)
      segments[i].keep = specs[i].shape.size() >= 2 ? float(1.0 - lr * config.weight_decay) : 1.0f;
    cuda::adamw_multi_tensor(dw.get(), dg.get(), dm.get(), dv.get(), segments, s);
    EXPECT_LE(test::relative_error(dw.download(), w), test::kTolerance) << "step " << step;
  }
}

}  // namespace
}  // namespace zaya
