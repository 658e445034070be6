// The parameter registry: every tensor of a ZAYA1 model with its checkpoint name (the names of
// Zyphra's ZAYA1-base checkpoint), shape, initialisation and optimizer group, laid out in one flat
// fp32 buffer in registry order. The flat layout is what ZeRO-1 shards and what checkpoints
// chunk; the order also places each CCA stage's linear_q, linear_k, val_proj1 and val_proj2 side by
// side, so the four projections run as one GEMM (see cca.cpp).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "model/config.h"

namespace zaya {

enum class OptimGroup { Muon, AdamW, Buffer };  // Buffer: state with no gradient (balancing biases)
const char* optim_group_name(OptimGroup g);

enum class InitKind { Normal, Uniform, Ones, Zeros, SkipBias };

struct ParamSpec {
  std::string name;
  Shape shape;
  OptimGroup group = OptimGroup::AdamW;
  InitKind init = InitKind::Zeros;
  float init_scale = 0.0f;  // std (Normal) or bound (Uniform)
  int stage = -1;           // stage index, -1 for model-level tensors
  int expert = -1;          // expert index for expert weights, else -1
  size_t offset = 0;        // in floats, within the flat buffer
  int64_t numel = 0;
  bool trainable() const { return group != OptimGroup::Buffer; }
};

// Every tensor of the flat buffer starts at a multiple of this many floats (64 bytes, a cache
// line; 32 bytes in a bf16 copy), with zeros in the few floats of padding before it. Why: a
// 64-byte vector load of a weight that starts 32 bytes into a line touches two lines, and at 8
// floats half of the small model's decode products read their weights that way (their AVX-512
// kernel 3–4 % slower for it, docs/cpu-paths.md). And cuBLASLt chooses its kernel by the
// operands' alignment: a bf16 operand at an odd offset gets a slow kernel without vector loads
// (the experts' weights followed the 17 balancing biases). The same choice is why a weight
// read from the model's bf16 copy gives the bits of the weight rounded into aligned scratch only
// when the copy is aligned too. The padding belongs to no tensor: no gradient, no optimizer state.
inline constexpr size_t kParamAlignFloats = 16;
inline size_t aligned_param_offset(size_t offset) {
  return (offset + kParamAlignFloats - 1) / kParamAlignFloats * kParamAlignFloats;
}

// Lays specs out in one flat buffer in order, each at the next aligned offset (sets numel from
// shape and the offsets) and returns the buffer's size in floats: the registry's layout, for tests
// and tools that build their own list of tensors.
size_t assign_flat_offsets(std::vector<ParamSpec>& specs);

class ParamRegistry {
 public:
  explicit ParamRegistry(const ModelConfig& config);
  const std::vector<ParamSpec>& specs() const { return specs_; }
  const ParamSpec& get(const std::string& name) const;  // throws naming the tensor
  const ParamSpec* find(const std::string& name) const;
  size_t total_floats() const { return total_; }

 private:
  // The next tensor; Start::RightAfterPrevious places it directly after the previous one (the CCA
  // projections that form one matrix).
  enum class Start { Aligned, RightAfterPrevious };
  void add(std::string name, Shape shape, OptimGroup group, InitKind init, float scale, int stage,
           int expert = -1, Start start = Start::Aligned);
  std::vector<ParamSpec> specs_;
  std::unordered_map<std::string, size_t> index_;
  size_t total_ = 0;
};

// The bf16 weight storage's split (ParameterPlacement::set_bf16_weight_storage; sizing counts the
// same): the weights kept in bf16 alone are the products' (the Muon matrices) and the tied
// embedding, whose gather then reads the same bf16 values; the gradients that may be kept in bf16
// are the Muon matrices', each written by one product per backward (the embedding's gathers every
// token's row and the LM head's blocks, and stays fp32). Every other tensor stays fp32.
inline bool weight_in_bf16(const ParamSpec& spec) {
  return spec.group == OptimGroup::Muon || spec.name == "model.embed_tokens.weight";
}
inline bool grad_in_bf16(const ParamSpec& spec) {
  return spec.group == OptimGroup::Muon;
}

// Weights and gradients of a model: two flat buffers with the registry's layout.
class ParamStore {
 public:
  explicit ParamStore(const ModelConfig& config);
  const ParamRegistry& registry() const { return registry_; }
  float* weights() { return reinterpret_cast<float*>(weights_->data()); }
  float* grads() { return reinterpret_cast<float*>(grads_->data()); }
  const float* weights() const { return reinterpret_cast<const float*>(weights_->data()); }
  const float* grads() const { return reinterpret_cast<const float*>(grads_->data()); }
  size_t size() const { return registry_.total_floats(); }
  // Tensor views (shared ownership of the flat buffers).
  Tensor weight(const std::string& name) const;
  Tensor grad(const std::string& name) const;
  float* weight_ptr(const std::string& name) { return weights() + registry_.get(name).offset; }
  float* grad_ptr(const std::string& name) { return grads() + registry_.get(name).offset; }
  void zero_grads();
  // Deterministic init: element k of tensor `name` is a pure function of (seed, name, k).
  void init(uint64_t seed);

 private:
  ParamRegistry registry_;
  std::shared_ptr<Storage> weights_, grads_;
};

}  // namespace zaya
