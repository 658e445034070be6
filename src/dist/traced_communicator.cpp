#include "dist/traced_communicator.h"

#include <utility>

#include "core/trace.h"

namespace zaya::dist {

namespace {

// A transfer in flight whose wait() is a span of its own (the time the rank waited for it).
class TracedTransfer final : public Transfer {
 public:
  TracedTransfer(std::unique_ptr<Transfer> inner, std::string name, int64_t bytes)
      : inner_(std::move(inner)), name_(std::move(name)), bytes_(bytes) {}
  void wait() override {
    const trace::Span span(name_, "collective", bytes_);
    inner_->wait();
  }
  bool test() override { return inner_->test(); }

 private:
  std::unique_ptr<Transfer> inner_;
  std::string name_;
  int64_t bytes_;
};

}  // namespace

TracedCommunicator::TracedCommunicator(std::unique_ptr<Communicator> inner, std::string name)
    : owned_(std::move(inner)), inner_(*owned_), name_(std::move(name)) {}

TracedCommunicator::TracedCommunicator(Communicator& inner, std::string name)
    : inner_(inner), name_(std::move(name)) {}

void TracedCommunicator::all_reduce(const void* send, void* recv, size_t count, DType dtype,
                                    ReduceOp op) {
  const trace::Span span(this->span("all_reduce"), "collective", payload_bytes(count, dtype));
  inner_.all_reduce(send, recv, count, dtype, op);
}

void TracedCommunicator::reduce_scatter(const void* send, void* recv, size_t recv_count,
                                        DType dtype, ReduceOp op) {
  const trace::Span span(this->span("reduce_scatter"), "collective",
                         payload_bytes(recv_count * size_t(world_size()), dtype));
  inner_.reduce_scatter(send, recv, recv_count, dtype, op);
}

void TracedCommunicator::all_gather(const void* send, void* recv, size_t send_count, DType dtype) {
  const trace::Span span(this->span("all_gather"), "collective",
                         payload_bytes(send_count * size_t(world_size()), dtype));
  inner_.all_gather(send, recv, send_count, dtype);
}

void TracedCommunicator::broadcast(const void* send, void* recv, size_t count, DType dtype,
                                   int root) {
  const trace::Span span(this->span("broadcast"), "collective", payload_bytes(count, dtype));
  inner_.broadcast(send, recv, count, dtype, root);
}

void TracedCommunicator::send(const void* buf, size_t count, DType dtype, int peer, int tag) {
  const trace::Span span(this->span("send"), "collective", payload_bytes(count, dtype));
  inner_.send(buf, count, dtype, peer, tag);
}

void TracedCommunicator::recv(void* buf, size_t count, DType dtype, int peer, int tag) {
  const trace::Span span(this->span("recv"), "collective", payload_bytes(count, dtype));
  inner_.recv(buf, count, dtype, peer, tag);
}

void TracedCommunicator::barrier() {
  const trace::Span span(this->span("barrier"), "collective", 0);
  inner_.barrier();
}

std::unique_ptr<Transfer> TracedCommunicator::start_sendrecv(const void* send, size_t send_count,
                                                             int dest, void* recv,
                                                             size_t recv_count, int src,
                                                             DType dtype, int tag) {
  const int64_t bytes = payload_bytes(send_count + recv_count, dtype);
  const trace::Span span(this->span("sendrecv start"), "collective", bytes);
  return std::make_unique<TracedTransfer>(
      inner_.start_sendrecv(send, send_count, dest, recv, recv_count, src, dtype, tag),
      this->span("sendrecv wait"), bytes);
}

std::unique_ptr<Transfer> TracedCommunicator::start_reduce_scatter(const void* send, void* recv,
                                                                   size_t recv_count, DType dtype,
                                                                   ReduceOp op) {
  const int64_t bytes = payload_bytes(recv_count * size_t(world_size()), dtype);
  const trace::Span span(this->span("reduce_scatter start"), "collective", bytes);
  return std::make_unique<TracedTransfer>(
      inner_.start_reduce_scatter(send, recv, recv_count, dtype, op),
      this->span("reduce_scatter wait"), bytes);
}

std::unique_ptr<Transfer> TracedCommunicator::start_reduce(const void* send, void* recv,
                                                           size_t count, DType dtype, ReduceOp op,
                                                           int root) {
  const int64_t bytes = payload_bytes(count, dtype);
  const trace::Span span(this->span("reduce start"), "collective", bytes);
  return std::make_unique<TracedTransfer>(inner_.start_reduce(send, recv, count, dtype, op, root),
                                          this->span("reduce wait"), bytes);
}

std::unique_ptr<Communicator> TracedCommunicator::split(int color, int key) {
  return std::make_unique<TracedCommunicator>(inner_.split(color, key),
                                              name_ + "/" + std::to_string(color));
}

}  // namespace zaya::dist
