#include "dist/communicator.h"

#include <cstring>
#include <vector>

#include "core/error.h"
#include "dist/reduce.h"

namespace zaya::dist {

std::unique_ptr<Transfer> Communicator::start_reduce_scatter(const void* send, void* recv,
                                                             size_t recv_count, DType dtype,
                                                             ReduceOp op) {
  reduce_scatter(send, recv, recv_count, dtype, op);
  return std::make_unique<CompletedTransfer>();
}

namespace {

// Tag of start_reduce's messages (MPI keeps messages of one tag between two ranks in order, so
// reduces in flight at once match in the order every rank started them).
constexpr int kTagReduce = 7501;

// One start_reduce by point-to-point messages: every other rank's contribution lands in root's
// `received` (world × count, root's own slot unused), and wait() reduces them in rank order as
// MpiCommunicator's reduce_scatter does.
class HostReduce final : public Transfer {
 public:
  std::vector<std::unique_ptr<Transfer>> parts;
  std::vector<unsigned char> received;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  DType dtype = DType::F32;
  ReduceOp op = ReduceOp::Sum;
  int root = 0, rank = 0, world = 1;
  bool done = false;

  bool test() override {
    bool all = true;
    for (auto& p : parts) all = p->test() && all;  // every part gets its chance to move
    return all;
  }
  void wait() override {
    if (done) return;
    done = true;
    for (auto& p : parts) p->wait();
    if (rank != root || count == 0) return;
    const size_t bytes = count * dtype_size(dtype);
    auto contribution = [&](int r) -> const void* {
      return r == root ? send : received.data() + size_t(r) * bytes;
    };
    std::memmove(recv, contribution(0), bytes);
    for (int r = 1; r < world; ++r) reduce_into(recv, contribution(r), count, dtype, op);
  }
  ~HostReduce() override {
    for (auto& p : parts) p->wait();
  }
};

}  // namespace

std::unique_ptr<Transfer> Communicator::start_reduce(const void* send, void* recv, size_t count,
                                                     DType dtype, ReduceOp op, int root) {
  const int world = world_size(), me = rank();
  ZAYA_CHECK(root >= 0 && root < world, "start_reduce: root ", root, " is not a rank of ", world);
  ZAYA_CHECK(!device_memory(), "start_reduce: the ", kind(),
             " communicator moves device memory and has no reduce of its own");
  auto t = std::make_unique<HostReduce>();
  t->send = send;
  t->recv = recv;
  t->count = count;
  t->dtype = dtype;
  t->op = op;
  t->root = root;
  t->rank = me;
  t->world = world;
  if (count == 0) return t;
  const size_t bytes = count * dtype_size(dtype);
  if (me != root) {
    t->parts.push_back(start_sendrecv(send, count, root, nullptr, 0, -1, dtype, kTagReduce));
    return t;
  }
  t->received.resize(size_t(world) * bytes);
  for (int r = 0; r < world; ++r)
    if (r != root)
      t->parts.push_back(start_sendrecv(nullptr, 0, -1, t->received.data() + size_t(r) * bytes,
                                        count, r, dtype, kTagReduce));
  return t;
}

void sendrecv(Communicator& comm, const void* send, size_t send_count, int dest, void* recv,
              size_t recv_count, int src, DType dtype, int tag) {
  comm.start_sendrecv(send, send_count, dest, recv, recv_count, src, dtype, tag)->wait();
}

}  // namespace zaya::dist
