#include "optim/bf16_weight_codec.h"

#include "core/error.h"

namespace zaya {

Bf16WeightCodec::Bf16WeightCodec(ParameterPlacement& placement)
    : placement_(placement), split_(placement.params().registry(), /*bf16_grads=*/false) {
  ZAYA_CHECK(placement.bf16_weight_storage(),
             "Bf16WeightCodec: the model's weights are not stored in bf16");
}

void Bf16WeightCodec::pack(size_t offset, size_t n, const float* values, uint16_t* bf16,
                           float* fp32) const {
  const Backend& be = placement_.backend();
  size_t e = 0;
  split_.for_each_run(offset, n, [&](const StorageRun& r, size_t lo, size_t hi) {
    if (r.bf16) {
      be.round_to_bf16(bf16 + (lo - offset), values + (lo - offset), hi - lo);
    } else {
      be.copy(fp32 + e, values + (lo - offset), sizeof(float) * (hi - lo));
      e += hi - lo;
    }
  });
}

void Bf16WeightCodec::store(size_t offset, size_t n, const uint16_t* bf16,
                            const float* fp32) const {
  ZAYA_CHECK(offset + n <= placement_.params().size(), "Bf16WeightCodec::store: [", offset, ", ",
             offset + n, ") is outside the ", placement_.params().size(), " parameters");
  size_t e = 0;
  split_.for_each_run(offset, n, [&](const StorageRun& r, size_t lo, size_t hi) {
    if (r.bf16) {
      placement_.store_bf16_weights(lo, hi - lo, bf16 + (lo - offset));
    } else {  // fp32 tensors: store_weights copies them as they are
      placement_.store_weights(lo, hi - lo, fp32 + e);
      e += hi - lo;
    }
  });
}

Zero1Sync::WeightCodec Bf16WeightCodec::functions() const {
  Zero1Sync::WeightCodec codec;
  codec.fp32_count = [this](int64_t offset, int64_t n) {
    return fp32_count(size_t(offset), size_t(n));
  };
  codec.pack = [this](int64_t offset, int64_t n, const float* values, uint16_t* bf16, float* fp32) {
    pack(size_t(offset), size_t(n), values, bf16, fp32);
  };
  codec.store = [this](int64_t offset, int64_t n, const uint16_t* bf16, const float* fp32) {
    store(size_t(offset), size_t(n), bf16, fp32);
  };
  codec.store_fp32 = [this](int64_t offset, const float* values, int64_t n) {
    placement_.store_weights(size_t(offset), size_t(n), values);
  };
  return codec;
}

}  // namespace zaya
