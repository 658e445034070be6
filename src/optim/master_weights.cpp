#include "optim/master_weights.h"

#include <algorithm>

#include "core/error.h"

namespace zaya {

MasterWeights::MasterWeights(const Backend& be, const ParamStore& params, size_t begin, size_t end)
    : be_(&be), begin_(begin), end_(end) {
  ZAYA_CHECK(begin <= end && end <= params.size(), "MasterWeights: the range [", begin, ", ", end,
             ") is not inside the ", params.size(), " parameters");
  values_ = BackendBuffer(be, sizeof(float) * (end - begin));
  load(params, begin, end - begin);
}

void MasterWeights::load(const ParamStore& params, size_t offset, size_t n) {
  const size_t lo = std::max(offset, begin_), hi = std::min(offset + n, end_);
  if (lo < hi)
    be_->to_device(values_.floats() + (lo - begin_), params.weights() + lo,
                   sizeof(float) * (hi - lo));
}

void MasterWeights::save(ParamStore& params) const {
  if (!empty())
    be_->to_host(params.weights() + begin_, values_.floats(), sizeof(float) * (end_ - begin_));
}

}  // namespace zaya
