// bf16 storage of what a training step's forward keeps for its backward
// (ZayaModel::set_activation_storage): each stage's forward computes in fp32 into a scratch arena,
// then the bulk of what its backward reads — the stage's normalised input, CCA's projections,
// convolution outputs, queries, keys, values and attention output, the experts' inputs and
// products, and (once the next stage has read them) the residual stream r and the stage's output
// h — is stored rounded to bf16 in the step's arena, and the few buffers whose precision
// the backward is sensitive to stay fp32 (the norms' reciprocal roots, the log-sum-exp, the
// router's state, logits and probabilities, the routes). Before the stage's backward the bf16
// values are widened back to fp32 into the scratch arena, and the backward runs as ever: every op
// computes in fp32, so the op set, the CPU oracle and every kernel stay as they are, and the GPU
// and cpu-as-device store the same bits (the rounding is the backend's round_to_bf16, nearest
// even). What it costs: one stage's fp32 forward beside the stored ones, and a rounding and a
// widening pass over the stored bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "backend/backend.h"
#include "core/arena.h"

namespace zaya {

enum class ActivationStorage { kFp32, kBf16 };

// What a kept buffer is to the storage.
enum class SavedKind {
  kBulk,  // stored in the run's activation storage (bf16 or fp32)
  kFp32,  // fp32 whatever the storage: statistics and the router, which the backward needs exact
};

// Visits the buffers a stage's forward set for its backward (cca.h's and moe.h's visit_saved);
// a visitor may move a buffer and repoint it.
class SavedBuffers {
 public:
  virtual ~SavedBuffers() = default;
  virtual void floats(float*& buffer, size_t n, SavedKind kind) = 0;
  virtual void ints(int32_t*& buffer, size_t n) = 0;
};

// A bulk buffer while it is kept in bf16: its bits, and the pointer its fp32 values go back to
// (a member of the stage's activations, which stay where they are until the backward).
struct StoredBf16 {
  float** slot = nullptr;
  const uint16_t* bits = nullptr;
  size_t n = 0;
};

// Moves the buffers `visit` names into `kept`: bulk ones rounded to bf16, their pointers emptied
// and recorded in `stored`; the others copied as they are and repointed. Null buffers are left.
void store_saved(const std::function<void(SavedBuffers&)>& visit, Arena& kept, const Backend& be,
                 std::vector<StoredBf16>& stored);
// Widens each stored buffer into `scratch` and points its slot at the fp32 values.
void restore_saved(const std::vector<StoredBf16>& stored, Arena& scratch, const Backend& be);

}  // namespace zaya
