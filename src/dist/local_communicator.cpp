#include "dist/local_communicator.h"

#include <cstring>

#include "core/error.h"

namespace zaya::dist {

namespace {

void copy(const void* src, void* dst, size_t count, DType dtype) {
  // memmove: in-place calls pass the same (or an overlapping) buffer.
  if (src != dst) std::memmove(dst, src, count * dtype_size(dtype));
}

void check_peer(int peer, const char* what) {
  ZAYA_CHECK(peer == 0, what, ": peer ", peer, " does not exist (world size 1, expected peer 0)");
}

}  // namespace

void LocalCommunicator::all_reduce(const void* send, void* recv, size_t count, DType dtype,
                                   ReduceOp) {
  copy(send, recv, count, dtype);
}

void LocalCommunicator::reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype,
                                       ReduceOp) {
  copy(send, recv, recv_count, dtype);
}

void LocalCommunicator::all_gather(const void* send, void* recv, size_t send_count, DType dtype) {
  copy(send, recv, send_count, dtype);
}

void LocalCommunicator::broadcast(const void* send, void* recv, size_t count, DType dtype,
                                  int root) {
  check_peer(root, "broadcast root");
  copy(send, recv, count, dtype);
}

void LocalCommunicator::send(const void* buf, size_t count, DType dtype, int peer, int tag) {
  check_peer(peer, "send");
  const auto* p = static_cast<const unsigned char*>(buf);
  mailbox_[tag].emplace_back(p, p + count * dtype_size(dtype));
}

void LocalCommunicator::recv(void* buf, size_t count, DType dtype, int peer, int tag) {
  check_peer(peer, "recv");
  auto it = mailbox_.find(tag);
  ZAYA_CHECK(it != mailbox_.end() && !it->second.empty(), "recv: no message with tag ", tag,
             " was sent (world size 1: send to self before receiving, or it would block forever)");
  const auto msg = std::move(it->second.front());
  it->second.pop_front();
  ZAYA_CHECK(msg.size() == count * dtype_size(dtype), "recv: message with tag ", tag, " has ",
             msg.size(), " bytes, expected ", count * dtype_size(dtype));
  std::memcpy(buf, msg.data(), msg.size());
}

std::unique_ptr<Transfer> LocalCommunicator::start_sendrecv(const void* send, size_t send_count,
                                                            int dest, void* recv, size_t recv_count,
                                                            int src, DType dtype, int tag) {
  if (dest >= 0) this->send(send, send_count, dtype, dest, tag);
  if (src >= 0) this->recv(recv, recv_count, dtype, src, tag);
  return std::make_unique<CompletedTransfer>();
}

std::unique_ptr<Communicator> LocalCommunicator::split(int, int) {
  return std::make_unique<LocalCommunicator>();
}

}  // namespace zaya::dist
