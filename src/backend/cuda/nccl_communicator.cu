// NcclCommunicator (nccl_communicator.h): NCCL's transfers on a stream of their own, ordered
// after the kernels already queued on the default stream, and the rank-order reductions as
// kernels. Every call but the start_* ones returns with its result in place (the host waits for
// the stream), which keeps the Communicator's blocking contract.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "backend/cuda/bf16.cuh"
#include "backend/cuda/device.h"
#include "backend/cuda/nccl_api.h"
#include "backend/cuda/nccl_communicator.h"
#include "backend/cuda/reduce.cuh"
#include "core/error.h"
#include "dist/async_error_watch.h"

namespace zaya::cuda {

const NcclApi& nccl() {
  static const NcclApi api = [] {
    const char* env = std::getenv("ZAYA_NCCL");
    const std::string path = env && *env ? env : "libnccl.so.2";
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    ZAYA_CHECK(lib != nullptr, "NCCL: cannot load ", path, " (", dlerror(),
               "); put its directory on LD_LIBRARY_PATH or name the file in $ZAYA_NCCL");
    auto get = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      ZAYA_CHECK(fn != nullptr, "NCCL: ", path, " has no ", name);
    };
    NcclApi a{};
    get(a.get_unique_id, "ncclGetUniqueId");
    get(a.comm_init_rank, "ncclCommInitRank");
    get(a.comm_destroy, "ncclCommDestroy");
    get(a.comm_abort, "ncclCommAbort");
    get(a.comm_get_async_error, "ncclCommGetAsyncError");
    get(a.error_string, "ncclGetErrorString");
    get(a.group_start, "ncclGroupStart");
    get(a.group_end, "ncclGroupEnd");
    get(a.send, "ncclSend");
    get(a.recv, "ncclRecv");
    get(a.all_gather, "ncclAllGather");
    get(a.broadcast, "ncclBroadcast");
    get(a.all_reduce, "ncclAllReduce");
    get(a.reduce_scatter, "ncclReduceScatter");
    get(a.reduce, "ncclReduce");
    return a;
  }();
  return api;
}

namespace {

#define ZAYA_NCCL_CHECK(call)                                        \
  do {                                                               \
    const ncclResult_t zaya_nccl_result_ = (call);                   \
    ZAYA_CHECK(zaya_nccl_result_ == ncclSuccess, #call,              \
               " failed: ", nccl().error_string(zaya_nccl_result_)); \
  } while (0)

// dtype_size lives in core/tensor.cpp, which the plugin does not link (it links with no
// undefined symbol and carries only core/error.cpp and dist/communicator.cpp of zaya_lib).
size_t size_of(DType t) {
  switch (t) {
    case DType::F32:
    case DType::I32:
      return 4;
    case DType::BF16:
      return 2;
  }
  return 0;
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::F32:
      return ncclFloat32;
    case DType::I32:
      return ncclInt32;
    case DType::BF16:
      return ncclBfloat16;
  }
  ZAYA_FAIL("NCCL: unknown dtype");
}

ncclRedOp_t nccl_op(dist::ReduceOp op) {
  switch (op) {
    case dist::ReduceOp::Sum:
      return ncclSum;
    case dist::ReduceOp::Max:
      return ncclMax;
    case dist::ReduceOp::Min:
      return ncclMin;
  }
  ZAYA_FAIL("NCCL: unknown reduce op");
}

// dist::reduce_into's arithmetic, per element: integer sums wrap, bf16 partials round back to bf16.
template <typename T>
__device__ T combine(T a, T b, int op) {
  return op == 0 ? T(a + b) : op == 1 ? (a < b ? b : a) : (b < a ? b : a);
}
__device__ int32_t combine_i32(int32_t a, int32_t b, int op) {
  return op == 0 ? int32_t(uint32_t(a) + uint32_t(b)) : combine(a, b, op);
}

// out[i] = c_0[i] ∘ c_1[i] ∘ … ∘ c_{N−1}[i], left to right: the contributions in rank order,
// back to back in `parts` (stride `count`).
__global__ void rank_order_reduce_kernel(void* out, const void* parts, size_t count, int world,
                                         int dtype, int op) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  if (dtype == int(DType::F32)) {
    const float* p = static_cast<const float*>(parts);
    float acc = p[i];
    for (int r = 1; r < world; ++r) acc = combine(acc, p[size_t(r) * count + i], op);
    static_cast<float*>(out)[i] = acc;
  } else if (dtype == int(DType::I32)) {
    const int32_t* p = static_cast<const int32_t*>(parts);
    int32_t acc = p[i];
    for (int r = 1; r < world; ++r) acc = combine_i32(acc, p[size_t(r) * count + i], op);
    static_cast<int32_t*>(out)[i] = acc;
  } else {
    const uint16_t* p = static_cast<const uint16_t*>(parts);
    uint16_t acc = p[i];
    for (int r = 1; r < world; ++r)
      acc = f32_to_bf16(combine(bf16_to_f32(acc), bf16_to_f32(p[size_t(r) * count + i]), op));
    static_cast<uint16_t*>(out)[i] = acc;
  }
}

void rank_order_reduce(void* out, const void* parts, size_t count, int world, DType t,
                       dist::ReduceOp op) {
  if (count == 0) return;
  ZAYA_LAUNCH(rank_order_reduce_kernel, blocks_for(long(count), 256), 256, 0, 0)
  (out, parts, count, world, int(t), int(op));
  ZAYA_CUDA_LAUNCHED("rank_order_reduce");
}

// ncclGroupStart … ncclGroupEnd, closed on every path: a group left open by an error would take
// in every later NCCL call of the thread.
class NcclGroup {
 public:
  NcclGroup() { ZAYA_NCCL_CHECK(nccl().group_start()); }
  ~NcclGroup() {
    if (open_) (void)nccl().group_end();
  }
  void end() {
    open_ = false;
    ZAYA_NCCL_CHECK(nccl().group_end());
  }
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

 private:
  bool open_ = true;
};

// A transfer on the communicator's stream: done when its event is; a reduce-scatter's local
// reduction runs in wait(), into the caller's buffer.
class StreamTransfer final : public dist::Transfer {
 public:
  StreamTransfer(cudaStream_t stream, dist::AsyncErrorWatch& watch,
                 ScratchBuffer<unsigned char> parts, void* recv, size_t count, int world, DType t,
                 dist::ReduceOp op)
      : watch_(watch),
        parts_(std::move(parts)),
        recv_(recv),
        count_(count),
        world_(world),
        t_(t),
        op_(op) {
    ZAYA_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
    ZAYA_CUDA_CHECK(cudaEventRecord(done_, stream));
  }
  ~StreamTransfer() override {
    try {
      wait();
    } catch (const std::exception& e) {  // a destructor must not throw: say it at least
      std::fprintf(stderr, "zaya: error: an NCCL transfer dropped unwaited failed: %s\n", e.what());
    }
    cudaEventDestroy(done_);
  }
  void wait() override {
    if (finished_) return;
    finished_ = true;
    const cudaError_t status = cudaEventSynchronize(done_);
    watch_.check("NCCL transfer");  // an aborted communicator: its error, not the CUDA one
    ZAYA_CUDA_CHECK(status);
    if (parts_.size()) rank_order_reduce(recv_, parts_.get(), count_, world_, t_, op_);
  }
  bool test() override {
    if (finished_) return true;
    const cudaError_t status = cudaEventQuery(done_);
    if (status == cudaSuccess) return true;
    watch_.check("NCCL transfer");
    ZAYA_CHECK(status == cudaErrorNotReady, "NCCL transfer: ", cudaGetErrorString(status));
    (void)cudaGetLastError();  // "not ready" is no error: the next launch check must not see it
    return false;
  }

 private:
  cudaEvent_t done_ = nullptr;
  dist::AsyncErrorWatch& watch_;
  ScratchBuffer<unsigned char> parts_;  // a reduce-scatter's N contributions (empty: none)
  void* recv_;
  size_t count_;
  int world_;
  DType t_;
  dist::ReduceOp op_;
  bool finished_ = false;
};

class NcclCommunicator final : public dist::Communicator {
 public:
  NcclCommunicator(dist::Communicator& host, std::unique_ptr<dist::Communicator> owned_host,
                   bool rank_order_sums)
      : owned_host_(std::move(owned_host)),
        host_(owned_host_ ? *owned_host_ : host),
        rank_order_(rank_order_sums) {
    // Rank 0 makes the id, and says whether it could, before anyone waits for the id: a rank
    // that cannot load NCCL fails, and so does every rank with it, instead of hanging.
    int32_t ok = 1;
    std::string why;
    try {
      nccl();
    } catch (const Error& e) {
      ok = 0;
      why = e.what();
    }
    host_.all_reduce(&ok, &ok, 1, DType::I32, dist::ReduceOp::Min);
    ZAYA_CHECK(ok == 1, why.empty() ? "NCCL could not be loaded on another rank" : why);
    const NcclApi& api = nccl();
    ncclUniqueId id{};
    int32_t made = 1;
    if (host_.rank() == 0) made = api.get_unique_id(&id) == ncclSuccess ? 1 : 0;
    host_.broadcast(&made, &made, 1, DType::I32, 0);
    ZAYA_CHECK(made == 1, "ncclGetUniqueId failed on rank 0");
    static_assert(sizeof(id) % 4 == 0);
    host_.broadcast(&id, &id, sizeof(id) / 4, DType::I32, 0);
    ZAYA_NCCL_CHECK(api.comm_init_rank(&comm_, host_.world_size(), id, host_.rank()));
    ZAYA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    ZAYA_CUDA_CHECK(cudaEventCreateWithFlags(&queued_, cudaEventDisableTiming));
    // A peer that dies or a network that fails leaves NCCL's kernels spinning; NCCL records the
    // error on the side, and the watch aborts the communicator on it, which ends the kernels
    // (dist/async_error_watch.h).
    watch_ = std::make_unique<dist::AsyncErrorWatch>(
        [this] {
          ncclResult_t async = ncclSuccess;
          const ncclResult_t r = nccl().comm_get_async_error(comm_, &async);
          if (r != ncclSuccess)
            return std::string("ncclCommGetAsyncError: ") + nccl().error_string(r);
          if (async == ncclSuccess || async == ncclInProgress) return std::string();
          return std::string(nccl().error_string(async));
        },
        [this] { nccl().comm_abort(comm_); });
  }
  ~NcclCommunicator() override {
    const bool aborted = !watch_->error().empty();
    watch_.reset();  // its thread may not touch comm_ from here on
    if (aborted) {   // ncclCommAbort released the communicator
      cudaEventDestroy(queued_);
      cudaStreamDestroy(stream_);
      return;
    }
    cudaStreamSynchronize(stream_);
    nccl().comm_destroy(comm_);
    cudaEventDestroy(queued_);
    cudaStreamDestroy(stream_);
  }
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return host_.rank(); }
  int world_size() const override { return host_.world_size(); }
  std::string kind() const override { return rank_order_ ? "nccl" : "nccl-native"; }
  bool device_memory() const override { return true; }

  void all_reduce(const void* send, void* recv, size_t count, DType t, dist::ReduceOp op) override {
    after_queued_kernels();
    if (!rank_order_) {
      ZAYA_NCCL_CHECK(
          nccl().all_reduce(send, recv, count, nccl_type(t), nccl_op(op), comm_, stream_));
      finish();
      return;
    }
    ScratchBuffer<unsigned char> parts(count * size_of(t) * size_t(world_size()));
    ZAYA_NCCL_CHECK(nccl().all_gather(send, parts.get(), count, nccl_type(t), comm_, stream_));
    finish();
    rank_order_reduce(recv, parts.get(), count, world_size(), t, op);
    synchronize();  // `parts` is freed on return
  }

  void reduce_scatter(const void* send, void* recv, size_t recv_count, DType t,
                      dist::ReduceOp op) override {
    start_reduce_scatter(send, recv, recv_count, t, op)->wait();
    synchronize();
  }

  std::unique_ptr<dist::Transfer> start_reduce_scatter(const void* send, void* recv,
                                                       size_t recv_count, DType t,
                                                       dist::ReduceOp op) override {
    after_queued_kernels();
    const size_t bytes = recv_count * size_of(t);
    if (!rank_order_) {
      ZAYA_NCCL_CHECK(
          nccl().reduce_scatter(send, recv, recv_count, nccl_type(t), nccl_op(op), comm_, stream_));
      return std::make_unique<StreamTransfer>(stream_, *watch_, ScratchBuffer<unsigned char>(),
                                              recv, 0, 0, t, op);
    }
    // The all-to-all: rank r's chunk of every rank lands in r's parts, in rank order.
    ScratchBuffer<unsigned char> parts(bytes * size_t(world_size()));
    const auto* in = static_cast<const unsigned char*>(send);
    NcclGroup group;
    for (int r = 0; r < world_size(); ++r) {
      ZAYA_NCCL_CHECK(
          nccl().send(in + size_t(r) * bytes, recv_count, nccl_type(t), r, comm_, stream_));
      ZAYA_NCCL_CHECK(nccl().recv(parts.get() + size_t(r) * bytes, recv_count, nccl_type(t), r,
                                  comm_, stream_));
    }
    group.end();
    return std::make_unique<StreamTransfer>(stream_, *watch_, std::move(parts), recv, recv_count,
                                            world_size(), t, op);
  }

  std::unique_ptr<dist::Transfer> start_reduce(const void* send, void* recv, size_t count, DType t,
                                               dist::ReduceOp op, int root) override {
    after_queued_kernels();
    const size_t bytes = count * size_of(t);
    if (!rank_order_) {
      ZAYA_NCCL_CHECK(
          nccl().reduce(send, recv, count, nccl_type(t), nccl_op(op), root, comm_, stream_));
      return std::make_unique<StreamTransfer>(stream_, *watch_, ScratchBuffer<unsigned char>(),
                                              recv, 0, 0, t, op);
    }
    // Every contribution to root's parts, in rank order (root's own by a send to itself).
    const bool is_root = rank() == root;
    ScratchBuffer<unsigned char> parts(is_root ? bytes * size_t(world_size()) : 0);
    NcclGroup group;
    ZAYA_NCCL_CHECK(nccl().send(send, count, nccl_type(t), root, comm_, stream_));
    if (is_root)
      for (int r = 0; r < world_size(); ++r)
        ZAYA_NCCL_CHECK(
            nccl().recv(parts.get() + size_t(r) * bytes, count, nccl_type(t), r, comm_, stream_));
    group.end();
    return std::make_unique<StreamTransfer>(stream_, *watch_, std::move(parts), recv,
                                            is_root ? count : 0, is_root ? world_size() : 0, t, op);
  }

  void all_gather(const void* send, void* recv, size_t send_count, DType t) override {
    after_queued_kernels();
    ZAYA_NCCL_CHECK(nccl().all_gather(send, recv, send_count, nccl_type(t), comm_, stream_));
    finish();
  }

  void broadcast(const void* send, void* recv, size_t count, DType t, int root) override {
    after_queued_kernels();
    ZAYA_NCCL_CHECK(nccl().broadcast(send, recv, count, nccl_type(t), root, comm_, stream_));
    finish();
  }

  void send(const void* buf, size_t count, DType t, int peer, int /*tag*/) override {
    // NCCL matches point-to-point calls by order between two ranks, not by tag: the callers
    // (the Muon exchange, ring steps) issue them in the same order on both sides.
    after_queued_kernels();
    ZAYA_NCCL_CHECK(nccl().send(buf, count, nccl_type(t), peer, comm_, stream_));
    finish();
  }

  void recv(void* buf, size_t count, DType t, int peer, int /*tag*/) override {
    after_queued_kernels();
    ZAYA_NCCL_CHECK(nccl().recv(buf, count, nccl_type(t), peer, comm_, stream_));
    finish();
  }

  void barrier() override {
    synchronize();
    host_.barrier();
  }

  std::unique_ptr<dist::Transfer> start_sendrecv(const void* send, size_t send_count, int dest,
                                                 void* recv, size_t recv_count, int src, DType t,
                                                 int /*tag*/) override {
    after_queued_kernels();
    NcclGroup group;
    if (dest >= 0)
      ZAYA_NCCL_CHECK(nccl().send(send, send_count, nccl_type(t), dest, comm_, stream_));
    if (src >= 0) ZAYA_NCCL_CHECK(nccl().recv(recv, recv_count, nccl_type(t), src, comm_, stream_));
    group.end();
    return std::make_unique<StreamTransfer>(stream_, *watch_, ScratchBuffer<unsigned char>(), recv,
                                            0, 0, t, dist::ReduceOp::Sum);
  }

  std::unique_ptr<dist::Communicator> split(int color, int key) override {
    std::unique_ptr<dist::Communicator> sub = host_.split(color, key);
    dist::Communicator& h = *sub;
    return std::make_unique<NcclCommunicator>(h, std::move(sub), rank_order_);
  }

 private:
  // NCCL's stream waits for what the default stream has queued (the kernels that wrote `send`).
  void after_queued_kernels() {
    ZAYA_CUDA_CHECK(cudaEventRecord(queued_, 0));
    ZAYA_CUDA_CHECK(cudaStreamWaitEvent(stream_, queued_, 0));
  }
  void finish() {
    const cudaError_t status = cudaStreamSynchronize(stream_);
    watch_->check("NCCL");  // an aborted communicator: its error, not the CUDA one
    ZAYA_CUDA_CHECK(status);
  }

  std::unique_ptr<dist::Communicator> owned_host_;  // a split's host communicator
  dist::Communicator& host_;
  bool rank_order_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t queued_ = nullptr;
  std::unique_ptr<dist::AsyncErrorWatch> watch_;
};

}  // namespace

std::unique_ptr<dist::Communicator> make_nccl_communicator(dist::Communicator& host,
                                                           bool rank_order_sums) {
  ZAYA_CHECK(!host.device_memory(), "make_nccl_communicator: the host communicator (", host.kind(),
             ") must move host memory");
  return std::make_unique<NcclCommunicator>(host, nullptr, rank_order_sums);
}

}  // namespace zaya::cuda
