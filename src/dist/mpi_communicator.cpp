#include "dist/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "core/error.h"
#include "dist/reduce.h"

namespace zaya::dist {

namespace {

// MPI counts and displacements are int; the callers split larger buffers (max_call_bytes_), so
// this only guards the arithmetic.
int as_int(size_t bytes, const char* what) {
  ZAYA_CHECK(bytes <= size_t(INT_MAX), what, ": ", bytes, " bytes exceeds the ", INT_MAX,
             " bytes one MPI call can move");
  return int(bytes);
}

void check_rank(int peer, int world, const char* what) {
  ZAYA_CHECK(peer >= 0 && peer < world, what, ": rank ", peer, " is not in 0..", world - 1);
}

bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto* pa = static_cast<const unsigned char*>(a);
  const auto* pb = static_cast<const unsigned char*>(b);
  return pa < pb + b_bytes && pb < pa + a_bytes;
}

}  // namespace

void mpi_init(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int provided = 0;
  // OpenMP threads compute, only the main thread talks to MPI.
  ZAYA_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) == MPI_SUCCESS,
             "MPI_Init_thread failed (launched by mpirun/srun?)");
}

void mpi_finalize() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void mpi_abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();  // MPI_Abort does not return; this keeps [[noreturn]] honest
}

int mpi_world_max(int value) {
  int out = value;
  ZAYA_CHECK(MPI_Allreduce(&value, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD) == MPI_SUCCESS,
             "MPI_Allreduce failed while the ranks compared their command lines");
  return out;
}

int mpi_world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int mpi_world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

MpiCommunicator::MpiCommunicator()
    : comm_(MPI_COMM_WORLD),
      rank_(mpi_world_rank()),
      world_(mpi_world_size()),
      max_call_bytes_(size_t(INT_MAX)) {}

MpiCommunicator::MpiCommunicator(MPI_Comm owned)
    : comm_(owned), owned_(true), max_call_bytes_(size_t(INT_MAX)) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &world_);
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owned_ && !finalized) MPI_Comm_free(&comm_);
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key) {
  ZAYA_CHECK(color >= 0, "split: color ", color, " must be >= 0");
  MPI_Comm child = MPI_COMM_NULL;
  ZAYA_CHECK(MPI_Comm_split(comm_, color, key, &child) == MPI_SUCCESS, "MPI_Comm_split failed");
  std::unique_ptr<MpiCommunicator> c(new MpiCommunicator(child));
  c->max_call_bytes_ = max_call_bytes_;
  return c;
}

namespace {

// The requests of one start_sendrecv; the receive pieces are checked for their sizes at wait().
class MpiTransfer final : public Transfer {
 public:
  std::vector<MPI_Request> requests;
  std::vector<int> expected;  // bytes of each request (sends included, unchecked)
  size_t first_recv = 0;      // requests[first_recv..] are receives
  int src = -1, tag = 0;
  bool done = false;

  void wait() override {
    if (done) return;
    done = true;
    std::vector<MPI_Status> status(requests.size());
    MPI_Waitall(int(requests.size()), requests.data(), status.data());
    for (size_t i = first_recv; i < requests.size(); ++i) {
      int got = 0;
      MPI_Get_count(&status[i], MPI_BYTE, &got);
      ZAYA_CHECK(got == expected[i], "sendrecv from rank ", src, " tag ", tag, ": got ", got,
                 " bytes, expected ", expected[i], " (the sender's count differs)");
    }
  }
  ~MpiTransfer() override {
    if (!done && !requests.empty()) {
      done = true;
      MPI_Waitall(int(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
    }
  }
};

}  // namespace

std::unique_ptr<Transfer> MpiCommunicator::start_sendrecv(const void* send, size_t send_count,
                                                          int dest, void* recv, size_t recv_count,
                                                          int src, DType dtype, int tag) {
  auto t = std::make_unique<MpiTransfer>();
  t->src = src;
  t->tag = tag;
  const size_t esize = dtype_size(dtype);
  // Pieces of one (peer, tag) arrive in the order they were posted, so they reassemble.
  auto post = [&](bool is_send, const unsigned char* in, unsigned char* out, size_t bytes,
                  int peer) {
    for (size_t off = 0; off < bytes || off == 0; off += max_call_bytes_) {
      const int n = as_int(std::min(max_call_bytes_, bytes - off), "sendrecv");
      MPI_Request r;
      if (is_send)
        MPI_Isend(in + off, n, MPI_BYTE, peer, tag, comm_, &r);
      else
        MPI_Irecv(out + off, n, MPI_BYTE, peer, tag, comm_, &r);
      t->requests.push_back(r);
      t->expected.push_back(n);
      if (bytes == 0) break;
    }
  };
  if (dest >= 0) {
    check_rank(dest, world_, "sendrecv dest");
    post(true, static_cast<const unsigned char*>(send), nullptr, send_count * esize, dest);
  }
  t->first_recv = t->requests.size();
  if (src >= 0) {
    check_rank(src, world_, "sendrecv src");
    post(false, nullptr, static_cast<unsigned char*>(recv), recv_count * esize, src);
  }
  return t;
}

namespace {

// One start_reduce_scatter. The send buffer is cut into pieces as reduce_scatter cuts it (one
// MPI call moves at most max_call_bytes per rank); piece p's all-to-all lands its N contributions
// back to back in `received` at N·offset(p), so `received` holds exactly N·recv_count elements
// however the call was split. wait() reduces each piece in rank order, as the blocking call does.
class MpiReduceScatter final : public Transfer {
 public:
  std::vector<MPI_Request> requests;
  std::unique_ptr<unsigned char[]> received, packed;  // packed: split calls' send pieces
  std::vector<size_t> offsets, counts;                // per piece, in elements of a rank's chunk
  unsigned char* recv = nullptr;
  size_t esize = 0;
  int world = 1;
  DType dtype = DType::F32;
  ReduceOp op = ReduceOp::Sum;
  bool done = false;
  bool arrived = false;  // test() saw every request complete

  bool test() override {
    if (done || arrived || requests.empty()) return true;
    int flag = 0;  // all complete (and freed: wait() skips them) or none touched
    MPI_Testall(int(requests.size()), requests.data(), &flag, MPI_STATUSES_IGNORE);
    arrived = flag != 0;
    return arrived;
  }
  void wait() override {
    if (done) return;
    done = true;
    if (!arrived) MPI_Waitall(int(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
    for (size_t p = 0; p < offsets.size(); ++p) {
      const size_t bytes = counts[p] * esize;
      unsigned char* base = received.get() + size_t(world) * offsets[p] * esize;
      // Rank order 0..N-1: the same sums as MpiCommunicator::reduce_scatter.
      for (int j = 1; j < world; ++j)
        reduce_into(base, base + size_t(j) * bytes, counts[p], dtype, op);
      std::memcpy(recv + offsets[p] * esize, base, bytes);
    }
  }
  ~MpiReduceScatter() override {
    if (!done && !arrived && !requests.empty())
      MPI_Waitall(int(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
  }
};

}  // namespace

std::unique_ptr<Transfer> MpiCommunicator::start_reduce_scatter(const void* send, void* recv,
                                                                size_t recv_count, DType dtype,
                                                                ReduceOp op) {
  auto t = std::make_unique<MpiReduceScatter>();
  t->recv = static_cast<unsigned char*>(recv);
  t->esize = dtype_size(dtype);
  t->world = world_;
  t->dtype = dtype;
  t->op = op;
  if (recv_count == 0) return t;
  const size_t esize = t->esize, n_ranks = size_t(world_);
  const size_t per = piece_elements(n_ranks * esize);
  const bool split = recv_count > per;
  t->received = std::make_unique_for_overwrite<unsigned char[]>(n_ranks * recv_count * esize);
  if (split)
    t->packed = std::make_unique_for_overwrite<unsigned char[]>(n_ranks * recv_count * esize);
  const auto* in = static_cast<const unsigned char*>(send);
  for (size_t off = 0; off < recv_count; off += per) {
    const size_t n = std::min(per, recv_count - off), bytes = n * esize;
    const int chunk = as_int(bytes, "reduce_scatter");
    as_int(bytes * n_ranks, "reduce_scatter");
    const unsigned char* piece = in;
    if (split) {
      // Piece [off, off + n) of every rank's chunk, packed back to back (as reduce_scatter does).
      unsigned char* dst = t->packed.get() + n_ranks * off * esize;
      for (size_t j = 0; j < n_ranks; ++j)
        std::memcpy(dst + j * bytes, in + (j * recv_count + off) * esize, bytes);
      piece = dst;
    }
    MPI_Request r;
    MPI_Ialltoall(piece, chunk, MPI_BYTE, t->received.get() + n_ranks * off * esize, chunk,
                  MPI_BYTE, comm_, &r);
    t->requests.push_back(r);
    t->offsets.push_back(off);
    t->counts.push_back(n);
  }
  return t;
}

void MpiCommunicator::set_max_call_bytes(size_t bytes) {
  ZAYA_CHECK(bytes >= 1 && bytes <= size_t(INT_MAX), "set_max_call_bytes: ", bytes,
             " is not in [1, INT_MAX]");
  max_call_bytes_ = bytes;
}

size_t MpiCommunicator::piece_elements(size_t per_element) const {
  return std::max<size_t>(1, max_call_bytes_ / per_element);
}

unsigned char* MpiCommunicator::scratch(size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  return scratch_.data();
}

void MpiCommunicator::reduce_slots(size_t count, DType dtype, ReduceOp op) {
  const size_t bytes = count * dtype_size(dtype);
  // Rank order 0..N-1, never arrival order: this is the whole determinism argument.
  for (int j = 1; j < world_; ++j)
    reduce_into(scratch_.data(), scratch_.data() + size_t(j) * bytes, count, dtype, op);
}

void MpiCommunicator::all_reduce(const void* send, void* recv, size_t count, DType dtype,
                                 ReduceOp op) {
  // Element ranges reduce independently. A piece's all-to-all moves its bytes plus up to one
  // element per rank of rounding (balanced chunks), so the ranks' slack is kept below the limit.
  const size_t esize = dtype_size(dtype);
  const size_t whole = max_call_bytes_ / esize;
  const size_t per = whole > size_t(2 * world_) ? whole - size_t(world_) : 1;
  const auto* in = static_cast<const unsigned char*>(send);
  auto* out = static_cast<unsigned char*>(recv);
  for (size_t off = 0; off < count; off += per)
    all_reduce_piece(in + off * esize, out + off * esize, std::min(per, count - off), dtype, op);
}

void MpiCommunicator::all_reduce_piece(const void* send, void* recv, size_t count, DType dtype,
                                       ReduceOp op) {
  if (count == 0) return;
  const size_t esize = dtype_size(dtype);
  const size_t n = size_t(world_);
  // Balanced chunks: any count works, chunk sizes differ by at most one element.
  auto lo = [&](size_t r) { return count * r / n; };
  const size_t mine = lo(rank_ + 1) - lo(rank_);
  std::vector<int> scounts(n), sdispls(n), rcounts(n), rdispls(n);
  for (size_t j = 0; j < n; ++j) {
    scounts[j] = as_int((lo(j + 1) - lo(j)) * esize, "all_reduce");
    sdispls[j] = as_int(lo(j) * esize, "all_reduce");
    rcounts[j] = as_int(mine * esize, "all_reduce");
    rdispls[j] = as_int(j * mine * esize, "all_reduce");
  }
  unsigned char* tmp = scratch(n * mine * esize);
  MPI_Alltoallv(send, scounts.data(), sdispls.data(), MPI_BYTE, tmp, rcounts.data(), rdispls.data(),
                MPI_BYTE, comm_);
  // With count < N some ranks own an empty chunk (and an empty scratch: no pointer to copy from).
  if (mine > 0) {
    reduce_slots(mine, dtype, op);
    // send has been read completely, so writing recv is safe even in-place.
    std::memcpy(static_cast<unsigned char*>(recv) + lo(rank_) * esize, tmp, mine * esize);
  }
  MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, scounts.data(), sdispls.data(), MPI_BYTE,
                 comm_);
}

void MpiCommunicator::reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype,
                                     ReduceOp op) {
  const size_t esize = dtype_size(dtype), per = piece_elements(size_t(world_) * esize);
  if (recv_count <= per) return reduce_scatter_piece(send, recv, recv_count, dtype, op);
  // Piece [off, off + n) of every rank's chunk, packed back to back: one all-to-all per piece.
  // In place (recv == send + rank·recv_count) is safe: a piece of recv is written only after the
  // same piece of send has been packed, and no later piece reads it.
  const auto* in = static_cast<const unsigned char*>(send);
  auto* out = static_cast<unsigned char*>(recv);
  for (size_t off = 0; off < recv_count; off += per) {
    const size_t n = std::min(per, recv_count - off), bytes = n * esize;
    if (staging_.size() < bytes * size_t(world_)) staging_.resize(bytes * size_t(world_));
    for (int j = 0; j < world_; ++j)
      std::memcpy(staging_.data() + size_t(j) * bytes, in + (size_t(j) * recv_count + off) * esize,
                  bytes);
    reduce_scatter_piece(staging_.data(), out + off * esize, n, dtype, op);
  }
}

void MpiCommunicator::reduce_scatter_piece(const void* send, void* recv, size_t recv_count,
                                           DType dtype, ReduceOp op) {
  if (recv_count == 0) return;
  const size_t bytes = recv_count * dtype_size(dtype);
  const int chunk = as_int(bytes, "reduce_scatter");
  as_int(bytes * size_t(world_), "reduce_scatter");
  unsigned char* tmp = scratch(bytes * size_t(world_));
  MPI_Alltoall(send, chunk, MPI_BYTE, tmp, chunk, MPI_BYTE, comm_);
  reduce_slots(recv_count, dtype, op);
  std::memcpy(recv, tmp, bytes);
}

void MpiCommunicator::all_gather(const void* send, void* recv, size_t send_count, DType dtype) {
  const size_t esize = dtype_size(dtype), per = piece_elements(size_t(world_) * esize);
  if (send_count <= per) return all_gather_piece(send, recv, send_count, dtype);
  // Piece [off, off + n) of every rank's block, gathered back to back, then put in place. The
  // input piece is staged first, so in place (send == recv + rank·send_count) is safe.
  const auto* in = static_cast<const unsigned char*>(send);
  auto* out = static_cast<unsigned char*>(recv);
  for (size_t off = 0; off < send_count; off += per) {
    const size_t n = std::min(per, send_count - off), bytes = n * esize;
    if (staging_.size() < bytes * size_t(world_ + 1)) staging_.resize(bytes * size_t(world_ + 1));
    unsigned char* mine = staging_.data() + bytes * size_t(world_);
    std::memcpy(mine, in + off * esize, bytes);
    all_gather_piece(mine, staging_.data(), n, dtype);
    for (int j = 0; j < world_; ++j)
      std::memcpy(out + (size_t(j) * send_count + off) * esize, staging_.data() + size_t(j) * bytes,
                  bytes);
  }
}

void MpiCommunicator::all_gather_piece(const void* send, void* recv, size_t send_count,
                                       DType dtype) {
  if (send_count == 0) return;
  const size_t bytes = send_count * dtype_size(dtype);
  const int chunk = as_int(bytes, "all_gather");
  as_int(bytes * size_t(world_), "all_gather");
  auto* out = static_cast<unsigned char*>(recv);
  if (send == out + size_t(rank_) * bytes) {
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, chunk, MPI_BYTE, comm_);
    return;
  }
  const void* src = send;
  if (overlaps(send, bytes, recv, bytes * size_t(world_))) {
    // MPI forbids aliasing other than MPI_IN_PLACE; stage the input.
    src = std::memcpy(scratch(bytes), send, bytes);
  }
  MPI_Allgather(src, chunk, MPI_BYTE, recv, chunk, MPI_BYTE, comm_);
}

void MpiCommunicator::broadcast(const void* send, void* recv, size_t count, DType dtype, int root) {
  check_rank(root, world_, "broadcast root");
  const size_t bytes = count * dtype_size(dtype);
  if (rank_ == root && send != recv) std::memmove(recv, send, bytes);
  auto* out = static_cast<unsigned char*>(recv);
  for (size_t off = 0; off < bytes; off += max_call_bytes_)
    MPI_Bcast(out + off, as_int(std::min(max_call_bytes_, bytes - off), "broadcast"), MPI_BYTE,
              root, comm_);
}

void MpiCommunicator::send(const void* buf, size_t count, DType dtype, int peer, int tag) {
  check_rank(peer, world_, "send");
  // Messages between two ranks with one tag arrive in order: the pieces reassemble.
  const size_t bytes = count * dtype_size(dtype);
  const auto* in = static_cast<const unsigned char*>(buf);
  for (size_t off = 0; off < bytes || off == 0; off += max_call_bytes_) {
    MPI_Send(in + off, as_int(std::min(max_call_bytes_, bytes - off), "send"), MPI_BYTE, peer, tag,
             comm_);
    if (bytes == 0) break;
  }
}

void MpiCommunicator::recv(void* buf, size_t count, DType dtype, int peer, int tag) {
  check_rank(peer, world_, "recv");
  const size_t bytes = count * dtype_size(dtype);
  auto* out = static_cast<unsigned char*>(buf);
  for (size_t off = 0; off < bytes || off == 0; off += max_call_bytes_) {
    const int expected = as_int(std::min(max_call_bytes_, bytes - off), "recv");
    MPI_Status status;
    MPI_Recv(out + off, expected, MPI_BYTE, peer, tag, comm_, &status);
    int got = 0;
    MPI_Get_count(&status, MPI_BYTE, &got);
    ZAYA_CHECK(got == expected, "recv from rank ", peer, " tag ", tag, ": got ", got,
               " bytes, expected ", expected, " (the sender's count differs)");
    if (bytes == 0) break;
  }
}

void MpiCommunicator::barrier() {
  MPI_Barrier(comm_);
}

}  // namespace zaya::dist
