#include "dist/rank_sum.h"

#include <cstring>
#include <vector>

namespace zaya::dist {

namespace {

// 8-byte values travel as pairs of 4-byte I32 elements: all_gather only moves bytes.
template <typename T>
void sum_8byte(Communicator* comm, std::span<T> values) {
  static_assert(sizeof(T) == 8);
  if (comm == nullptr || comm->world_size() == 1 || values.empty()) return;
  const size_t n = values.size();
  std::vector<T> all(n * size_t(comm->world_size()));
  comm->all_gather(values.data(), all.data(), n * 2, DType::I32);
  for (size_t i = 0; i < n; ++i) {
    T s = all[i];
    for (int r = 1; r < comm->world_size(); ++r) s += all[size_t(r) * n + i];
    values[i] = s;
  }
}

}  // namespace

void sum_over_ranks(Communicator* comm, std::span<double> values) {
  sum_8byte(comm, values);
}

void sum_over_ranks(Communicator* comm, std::span<int64_t> values) {
  sum_8byte(comm, values);
}

}  // namespace zaya::dist
