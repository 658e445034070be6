// Where a model's parameters and gradients live: the host's fp32 ParamStore (the master copy
// checkpoints are written from), copies in a backend's own memory (a GPU), and the bf16 weight
// storage. It answers one question for the model's math, "at which address do the ops read the
// weight at flat offset o, and add its gradient?" (weight_address, grad_address), and it moves
// values between the places: pushes and pulls, the optimizer's loads and stores, ZeRO-1's packed
// gather. The model (model/zaya_model.h) owns the math and rebinds its views of the weights
// whenever the layout changed (layout_version).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "backend/backend.h"
#include "core/reserved_addresses.h"
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

  ParamStore& params() { return params_; }
  const ParamStore& params() const { return params_; }
  const Backend& backend() const { return *be_; }

  // Changes each time the addresses weight_address and grad_address return change: whoever
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
  // push_weights(). Turning it on sends the weights over and zeroes the gradients. Host-memory
  // backends have one copy already: there, these calls only zero the gradients or do nothing.
  void set_resident(bool resident);
  bool resident() const { return resident_ && !be_->host_memory(); }
  bool resident_wanted() const { return resident_; }
  // The weights and gradients the ops use, in the backend's memory (the ParamStore's on the host).
  // Not with bf16 weight storage, where the weights are not one fp32 buffer (master_weights()).
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
  // convolutions, scales: a few per mille of the parameters) in fp32, and the fp32 master
  // weights of the flat range [master_begin, master_end) (the rank's ZeRO-1 range, which its
  // optimizer updates) beside them: 2 bytes per parameter plus 4 per parameter of the range,
  // where full fp32 weights and their bf16 copy take 6. The products read the bf16 values the
  // fp32 path would round them to, so the two paths compute the same bits.
  //
  // Takes effect on a backend with bf16 weights and its own memory (now or at the next
  // set_backend); elsewhere the weights stay one fp32 buffer. The trainer then updates
  // master_weights() and writes every range it changes back with store_weights; push_weights
  // and pull_weights convert (the host copy holds the master values in the range and the stored
  // values elsewhere).
  //
  // With bf16_gradients the Muon matrices' gradients are kept in bf16 too (2 bytes each instead
  // of 4; every other gradient stays fp32, the embedding's among them): each product's backward
  // adds its fp32 result into them with one rounding, so accumulating micro-batches rounds once
  // per micro-batch. Needs resident parameters; the gradients are then read with load_grads.
  void set_bf16_weight_storage(size_t master_begin, size_t master_end, bool bf16_gradients = false);
  bool bf16_weight_storage() const { return !stored_runs_.empty(); }  // in effect
  bool bf16_gradients() const { return bf16_weight_storage() && bf16_grads_wanted_; }
  // The gradients of flat [offset, offset + n) as fp32 into dst (backend memory), from wherever
  // they are kept (the bf16 ones widened); with fp32 gradients a copy of backend_grads().
  void load_grads(size_t offset, size_t n, float* dst);
  // Every gradient = value (the bf16 ones rounded): the trainer's NaN drill.
  void fill_grads(float value);
  float* master_weights() { return dev_master_.floats(); }  // [end − begin]
  size_t master_begin() const { return master_begin_; }
  size_t master_end() const { return master_end_; }
  // Writes flat [offset, offset + n) from fp32 values in the backend's memory: the bf16 tensors
  // rounded, the others copied (not the master weights).
  void store_weights(size_t offset, size_t n, const float* values);
  // ZeRO-1's all-gather in bf16 (Zero1Sync::WeightCodec): the values of flat [offset, offset + n)
  // travel as the bf16 of the bf16 tensors plus, in order, the fp32 tensors' values (a few per
  // mille). fp32_count: how many of those; pack_weights: the two parts of fp32 values (the
  // master's); store_packed_weights: the inverse, into the storage. Backend memory throughout.
  int64_t fp32_count(size_t offset, size_t n) const;
  void pack_weights(size_t offset, size_t n, const float* values, uint16_t* bf16,
                    float* fp32) const;
  void store_packed_weights(size_t offset, size_t n, const uint16_t* bf16, const float* fp32);
  // Bytes of weights in the backend's memory (fp32 buffer, or bf16 + fp32 + master).
  size_t weight_bytes() const;
  size_t grad_bytes() const;  // and of gradients (fp32 buffer, or bf16 + fp32)

  // The address the ops read the weight at flat `offset` from: weights_base() + offset, or with
  // bf16 weight storage the reserved address (bf16 tensors) or the fp32 tensors' buffer.
  const float* weight_address(size_t offset) const;
  // The same for the gradient the backward adds into at flat `offset`: grads_base() + offset,
  // or with bf16 gradients the reserved address or the fp32 gradients' buffer.
  float* grad_address(size_t offset);
  // The fp32 weights in the backend's memory (the ParamStore's on the host); not with bf16
  // weight storage.
  const float* weights_base() const;
  float* grads_base();
  // With bf16 weight storage: the reserved ranges standing for the bf16 weights and gradients
  // (Backend::set_stored_bf16_weights and set_stored_bf16_gradients), and their bf16 buffers.
  const float* stored_weight_addresses() const;
  const uint16_t* stored_bf16_weights() const;
  const float* stored_grad_addresses() const;
  uint16_t* stored_bf16_grads();

 private:
  // Releases every copy of the parameters in a backend's memory (and the storage's layout).
  void release_device_parameters();
  // Lays out the bf16 weight storage in the backend's memory (set_backend then fills it).
  void lay_out_bf16_storage();
  // Moves host [offset, offset + n) into the storage (push) or back (pull), through the staging
  // buffer, a chunk at a time.
  void push_stored(size_t offset, size_t n);
  void pull_stored();
  void layout_changed() { ++layout_version_; }

  // The flat layout as runs of tensors of one kind, for the bf16 weight storage.
  struct StoredRun {
    size_t begin = 0, n = 0;  // flat [begin, begin + n)
    bool bf16 = false;        // the weights in bf16 (else in dev_w32_ at fp32_at)
    bool bf16_grads = false;  // the gradients in bf16 (else in dev_g32_ at grad_fp32_at)
    size_t fp32_at = 0, grad_fp32_at = 0;
  };
  const StoredRun& stored_run(size_t offset) const;
  // fn(run, lo, hi) for each run's part [lo, hi) of flat [offset, offset + n), in order.
  void for_each_run(size_t offset, size_t n,
                    const std::function<void(const StoredRun*, size_t, size_t)>& fn) const;

  ParamStore params_;
  const Backend* be_;
  uint64_t layout_version_ = 0;
  // With a backend of its own memory (set_backend): the parameters' copies there.
  BackendBuffer dev_weights_, dev_grads_;
  bool resident_ = false;  // see set_resident
  bool bf16_storage_wanted_ = false, bf16_grads_wanted_ = false;
  size_t master_begin_ = 0, master_end_ = 0;
  std::vector<StoredRun> stored_runs_;
  ReservedAddresses weight_addresses_, grad_addresses_;
  BackendBuffer dev_w16_, dev_w32_, dev_master_, dev_staging_, dev_g16_, dev_g32_;
};

}  // namespace zaya
