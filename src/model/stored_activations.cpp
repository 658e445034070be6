#include "model/stored_activations.h"

namespace zaya {

namespace {

class MoveToKept final : public SavedBuffers {
 public:
  MoveToKept(Arena& kept, const Backend& be, std::vector<StoredBf16>& stored)
      : kept_(kept), be_(be), stored_(stored) {}
  void floats(float*& buffer, size_t n, SavedKind kind) override {
    if (buffer == nullptr) return;
    if (kind == SavedKind::kBulk) {
      auto* bits = static_cast<uint16_t*>(kept_.bytes(n * sizeof(uint16_t)));
      be_.round_to_bf16(bits, buffer, n);
      stored_.push_back({&buffer, bits, n});
      buffer = nullptr;
      return;
    }
    float* copy = kept_.floats(n);
    be_.copy(copy, buffer, n * sizeof(float));
    buffer = copy;
  }
  void ints(int32_t*& buffer, size_t n) override {
    if (buffer == nullptr) return;
    int32_t* copy = kept_.ints(n);
    be_.copy(copy, buffer, n * sizeof(int32_t));
    buffer = copy;
  }

 private:
  Arena& kept_;
  const Backend& be_;
  std::vector<StoredBf16>& stored_;
};

}  // namespace

void store_saved(const std::function<void(SavedBuffers&)>& visit, Arena& kept, const Backend& be,
                 std::vector<StoredBf16>& stored) {
  MoveToKept mover(kept, be, stored);
  visit(mover);
}

void restore_saved(const std::vector<StoredBf16>& stored, Arena& scratch, const Backend& be) {
  for (const StoredBf16& s : stored) {
    float* values = scratch.floats(s.n);
    be.widen_bf16(values, s.bits, s.n);
    *s.slot = values;
  }
}

}  // namespace zaya
