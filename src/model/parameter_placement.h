// Where a model's parameters and gradients live: the host's fp32 ParamStore (the master copy
// checkpoints are written from), copies in a backend's own memory (a GPU), and the bf16 weight
// storage. It answers one question for the model's math, "where, and of which element type, do
// the ops read the weight at flat offset o, and add its gradient?" (weight, grad), and it moves
// values between the places: pushes and pulls, the gradients' loads and the weights' stores.
// What only training needs, the fp32 master weights of a bf16 run and ZeRO-1's bf16 packing, is
// the optimizer's (optim/master_weights.h, optim/bf16_weight_codec.h). The model
// (model/zaya_model.h) owns the math and rebinds its views of the weights whenever the layout
// changed (layout_version).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "backend/backend.h"
#include "model/bf16_split.h"
#include "model/config.h"
#include "model/params.h"

namespace zaya {

class ParameterPlacement {
 public:
  explicit ParameterPlacement(const ModelConfig& config);  // on the CPU backend
  ParameterPlacement(const ParameterPlacement&) = delete;
  ParameterPlacement& operator=(const ParameterPlacement&) = delete;
  ParameterPlacement(ParameterPlacement&&) = default;
  ParameterPlacement& operator=(ParameterPlacement&&) = default;

  // Floats per chunk of the host ⇄ bf16 storage moves (16 MiB of staging in the backend's
  // memory).
  static constexpr size_t kStagingFloats = size_t(1) << 22;

  ParamStore& params() { return params_; }
  const ParamStore& params() const { return params_; }
  const Backend& backend() const { return *be_; }

  // Changes each time what weight and grad return changes: whoever
  // keeps views of them rebinds when it differs from the one they were bound at.
  uint64_t layout_version() const { return layout_version_; }

  // The backend whose memory the parameters live in (ZayaModel::set_backend). A backend without
  // host memory (a GPU) gets copies of the parameters there; the host ParamStore stays the master.
  void set_backend(const Backend& backend);

  // On a backend of its own memory: keep the parameters there between steps, for a training loop
  // whose optimizer runs on the backend too (optim/optimizer.h). forward() then reads the
  // backend's weights as they are, backward() adds into the backend's gradients and leaves them
  // there, and zero_grads() zeroes them there: nothing crosses per micro-batch but the tokens.
  // The host ParamStore becomes a copy, refreshed by pull_weights() and sent back by
  // push_weights(). Turning it on sends the weights over, zeroes the gradients and gives the
  // host gradients' pages back to the system (unused meanwhile). Host-memory backends have one
  // copy already: there, these calls only zero the gradients or do nothing.
  void set_resident(bool resident);
  bool resident() const { return resident_ && !be_->host_memory(); }
  bool resident_wanted() const { return resident_; }
  // The weights and gradients the ops use, in the backend's memory (the ParamStore's on the host).
  // Not with bf16 weight storage, where the weights are not one fp32 buffer (store_weights).
  float* backend_weights();
  // Not with bf16 gradients (load_grads).
  float* backend_grads();
  void zero_grads();
  void push_weights();                         // host → backend, every weight
  void push_weights(size_t offset, size_t n);  // host → backend, flat [offset, offset + n)
  void pull_weights();                         // backend → host, every weight

  // bf16 weight storage, for a backend whose products take bf16 weights (Backend::bf16_weights):
  // the weights of the products (the Muon matrices and the tied embedding, which is also
  // gathered) live in the backend's memory as bf16 alone, the other tensors (norms, biases,
  // convolutions, scales: a few per mille of the parameters) in fp32: 2 bytes per parameter
  // where full fp32 weights and their bf16 copy take 6. The products read the bf16 values the
  // fp32 path would round them to, so the two paths compute the same bits. The optimizer keeps
  // the fp32 master weights of its range beside them (optim/master_weights.h) and writes what
  // it changes back with store_weights; push_weights and pull_weights convert (the host copy
  // gets the stored values).
  //
  // Takes effect on a backend with bf16 weights and its own memory (now or at the next
  // set_backend); elsewhere the weights stay one fp32 buffer.
  //
  // With bf16_gradients the Muon matrices' gradients are kept in bf16 too (2 bytes each instead
  // of 4; every other gradient stays fp32, the embedding's among them): each product's backward
  // adds its fp32 result into them with one rounding, so accumulating micro-batches rounds once
  // per micro-batch. Needs resident parameters; the gradients are then read with load_grads.
  void set_bf16_weight_storage(bool bf16_gradients = false);
  bool bf16_weight_storage() const { return stored_; }  // in effect
  bool bf16_gradients() const { return bf16_weight_storage() && bf16_grads_wanted_; }
  // The gradients of flat [offset, offset + n) as fp32 into dst (backend memory), from wherever
  // they are kept (the bf16 ones widened); with fp32 gradients a copy of backend_grads().
  void load_grads(size_t offset, size_t n, float* dst);
  // Every gradient = value (the bf16 ones rounded): the trainer's NaN drill.
  void fill_grads(float value);
  // Writes flat [offset, offset + n) from fp32 values in the backend's memory: the bf16 tensors
  // rounded, the others copied.
  void store_weights(size_t offset, size_t n, const float* values);
  // Writes the bf16 tensors' values in flat [offset, offset + n), already bf16 (ZeRO-1's bf16
  // all-gather); the range must hold bf16 tensors only.
  void store_bf16_weights(size_t offset, size_t n, const uint16_t* values);
  // Bytes of weights in the backend's memory (fp32 buffer and the products' bf16 copy, or the
  // bf16 weight storage).
  size_t weight_bytes() const;
  size_t grad_bytes() const;  // and of gradients (fp32 buffer, or bf16 + fp32)

  // Whether the products compute on bf16 weights: a backend of its own memory whose products
  // take them (Backend::bf16_weights). The products' weights (weight_in_bf16, params.h) are then
  // read in bf16: from the bf16 weight storage, or from a bf16 copy of the fp32 weights that
  // round_product_weights refreshes.
  bool bf16_products() const { return !split_.empty(); }
  // Rounds the fp32 weights of the products into their bf16 copy (bf16_products() without bf16
  // weight storage; a no-op otherwise): the model's forward does, once, before its products.
  void round_product_weights();
  // What the ops read for the weight at flat `offset`: the fp32 weights, or with bf16_products()
  // the bf16 values of a product's weight.
  WeightRef weight(size_t offset) const;
  // The fp32 weight at flat `offset` (a norm, a bias, a convolution, a scale; or any weight
  // where the weights are fp32, as decoding reads them). Throws for a weight kept in bf16 alone.
  const float* fp32_weight(size_t offset) const;
  // Where the backward adds the gradient at flat `offset`: fp32, or with bf16 gradients the bf16
  // values of a product's weight gradient.
  GradRef grad(size_t offset);
  // The fp32 gradient at flat `offset`; throws for one kept in bf16.
  float* fp32_grad(size_t offset);
  // The fp32 gradients in the backend's memory (the ParamStore's on the host); not with bf16
  // gradients.
  float* grads_base();

  // ZeRO-2 (optim/zero2_reduce.h): the gradients' memory taken and given back granule by granule
  // (Backend::reserve, commit, decommit) instead of held whole. The backward commits what it is
  // about to add into (commit_grads), the reduce gives back each range it has moved
  // (decommit_grads), and zero_grads gives back every one: a decommitted gradient reads as zero
  // once committed again. Takes effect now (the gradients start given back) and at every
  // set_backend. Off: commit_grads does nothing and decommit_grads zeroes.
  void set_gradients_on_demand(bool on);
  bool gradients_on_demand() const { return on_demand_; }
  void commit_grads(size_t offset, size_t n);
  void decommit_grads(size_t offset, size_t n);

 private:
  // Releases every copy of the parameters in a backend's memory (and the storage's layout).
  void release_device_parameters();
  // Lays out the bf16 weight storage in the backend's memory (set_backend then fills it).
  void lay_out_bf16_storage();
  const float* weights_base() const;
  // Moves host [offset, offset + n) into the storage (push) or back (pull), through the staging
  // buffer, a chunk at a time.
  void push_stored(size_t offset, size_t n);
  void pull_stored();
  void layout_changed() { ++layout_version_; }
  // A gradient buffer of the backend's memory, reserved when the gradients are on demand.
  BackendBuffer grad_buffer(size_t bytes) const;
  // fn(pointer, bytes) for each stretch of backend memory holding gradients of flat
  // [offset, offset + n) (one stretch, or with bf16 gradients one per bf16 or fp32 run).
  template <class Fn>
  void for_each_grad_stretch(size_t offset, size_t n, Fn&& fn);

  ParamStore params_;
  const Backend* be_;
  uint64_t layout_version_ = 0;
  // With a backend of its own memory (set_backend): the parameters' copies there.
  BackendBuffer dev_weights_, dev_grads_;
  bool resident_ = false;   // see set_resident
  bool on_demand_ = false;  // see set_gradients_on_demand
  bool bf16_storage_wanted_ = false, bf16_grads_wanted_ = false;
  Bf16Split split_;      // with bf16_products()
  bool stored_ = false;  // the bf16 weight storage is in effect
  // dev_w16_: the bf16 weights at their flat offsets, stored (bf16 weight storage) or the
  // products' copy (round_product_weights); the slots of the fp32 tensors go unused.
  BackendBuffer dev_w16_, dev_w32_, dev_staging_, dev_g16_, dev_g32_;
};

}  // namespace zaya
