// Shared by the CPU's and the GPU's tests of gradients kept on demand (ZeRO-2's memory,
// ParameterPlacement::set_gradients_on_demand): the tiny model with experts 2,048 wide, whose
// stages' gradients span whole 2 MiB granules, two micro-batches on `be` with whole gradients and
// with gradients on demand (on cpu-as-device and the emulated GPU an add into a gradient not
// committed faults).
#pragma once

#include <functional>
#include <vector>

#include "model/zaya_model.h"
#include "test_util.h"

namespace zaya::test {

struct OnDemandGradients {
  std::vector<float> whole, on_demand;  // the two runs' gradients
  size_t given_back = 0;                // bytes zero_grads gave back after the on-demand run
  size_t bytes() const { return sizeof(float) * whole.size(); }
};

// bytes_in_use: the backend's device memory in use now.
inline OnDemandGradients run_on_demand_gradients(const Backend& be,
                                                 const std::function<size_t()>& bytes_in_use) {
  ModelConfig c = tiny_config();
  c.expert_hidden = 2048;  // 6 MiB of gradients per MoE stage
  const int B = 1, S = 8;
  OnDemandGradients r;
  for (const bool on_demand : {false, true}) {
    ZayaModel m(c);
    randomise_weights(m.params(), 5, 6);
    m.set_backend(be);
    m.placement().set_resident(true);
    m.placement().set_gradients_on_demand(on_demand);
    m.placement().zero_grads();
    for (int micro = 0; micro < 2; ++micro) {
      std::vector<int32_t> tokens(size_t(B) * S);
      for (size_t i = 0; i < tokens.size(); ++i)
        tokens[i] = int32_t((i * 613 + 7 * size_t(micro)) % size_t(c.vocab_size));
      m.forward(tokens, ZayaModel::shifted_targets(tokens, B, S), B, S);
      m.backward(0.5f);
    }
    std::vector<float>& g = on_demand ? r.on_demand : r.whole;
    g.resize(m.params().size());
    be.to_host(g.data(), m.placement().backend_grads(), sizeof(float) * g.size());
    if (on_demand) {
      const size_t before = bytes_in_use();
      m.placement().zero_grads();
      r.given_back = before - bytes_in_use();
    }
  }
  return r;
}

}  // namespace zaya::test
