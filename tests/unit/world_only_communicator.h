// A communicator that only states its rank and world size: it stands in for one rank of a large
// job in tests of code that needs the layout of a rank (ZeRO-1 buffers, a rank's checkpoint
// range) but talks to nobody. Every collective fails the test.
#pragma once

#include <memory>
#include <string>

#include "core/error.h"
#include "dist/communicator.h"

namespace zaya::test {

class WorldOnly final : public dist::Communicator {
 public:
  WorldOnly(int rank, int world) : rank_(rank), world_(world) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string kind() const override { return "stub"; }
  void all_reduce(const void*, void*, size_t, DType, dist::ReduceOp) override { fail(); }
  void reduce_scatter(const void*, void*, size_t, DType, dist::ReduceOp) override { fail(); }
  void all_gather(const void*, void*, size_t, DType) override { fail(); }
  void broadcast(const void*, void*, size_t, DType, int) override { fail(); }
  void send(const void*, size_t, DType, int, int) override { fail(); }
  void recv(void*, size_t, DType, int, int) override { fail(); }
  void barrier() override { fail(); }
  std::unique_ptr<dist::Transfer> start_sendrecv(const void*, size_t, int, void*, size_t, int,
                                                 DType, int) override {
    fail();
  }
  std::unique_ptr<dist::Communicator> split(int, int) override { fail(); }

 private:
  [[noreturn]] static void fail() { ZAYA_FAIL("WorldOnly: no collectives in this test"); }
  int rank_, world_;
};

}  // namespace zaya::test
