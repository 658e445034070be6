// Kernel launches on the emulated CUDA device (`--device cuda-emu`): the .cu sources of
// backend/cuda compiled as C++, each launch run on the CPU with every thread of a block a fiber
// of its own. What a kernel reads as threadIdx, blockIdx, blockDim and gridDim is its fiber's;
// __syncthreads is a barrier of the block's fibers and a warp shuffle a rendezvous of the warp's.
//
// It holds a kernel to what the hardware holds it to, and says which kernel broke what: more
// than 1,024 threads a block, a grid's y or z over 65,535, dynamic shared memory over 48 KiB
// without the kernel's opt-in (cudaFuncSetAttribute), a barrier some live threads of the block
// wait at while others wait elsewhere, a shuffle not every lane of the warp takes part in, a
// pointer argument outside every device allocation (a host pointer, a freed block). And races:
// every launch runs twice, its blocks and each block's threads in forward and then in reverse
// order, from the same memory; a kernel whose results differ between the two depends on the
// order its threads run in, which a GPU does not promise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace zaya::emu {

struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

// The running thread's coordinates (valid inside a kernel only).
const uint3& thread_index();
const uint3& block_index();
const dim3& block_dim();
const dim3& grid_dim();
// __syncthreads, at a source line (the barrier every live thread must reach together).
void sync_threads(int line);
// The value of lane (this lane XOR lane_mask) of the warp, every lane of which must call it at
// the same line with a full mask.
uint64_t shuffle_xor_bits(uint64_t bits, int lane_mask, unsigned mask, int line);
template <typename T>
T shuffle_xor(T value, int lane_mask, unsigned mask, int line) {
  static_assert(sizeof(T) <= sizeof(uint64_t) && std::is_trivially_copyable_v<T>);
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  bits = shuffle_xor_bits(bits, lane_mask, mask, line);
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}
// The block's dynamic shared memory (the launch's shared_bytes, exactly).
void* dynamic_shared_memory();
// The emulated warp: 32 lanes as NVIDIA's, or 64 as AMD's wavefronts (ZAYA_EMU_WARP_SIZE).
int warp_size();

// Where a pointer argument points: checked to lie inside a device allocation.
struct PointerArgument {
  int index = 0;
  const void* address = nullptr;
};

struct LaunchShape {
  dim3 grid, block;
  size_t shared_bytes = 0;
};

// Runs `body` (the kernel applied to its arguments) over the grid, with the checks above.
// Throws zaya::Error naming the kernel, the launch's shape and the check that failed.
void run_kernel(const char* name, const void* kernel, const LaunchShape& shape,
                const std::vector<PointerArgument>& pointers, const std::function<void()>& body);

// max dynamic shared memory a kernel opted in to (cudaFuncSetAttribute).
void set_max_dynamic_shared(const void* kernel, size_t bytes);

template <typename... Params>
class Launch {
 public:
  Launch(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes)
      : name_(name), kernel_(kernel), shape_{grid, block, shared_bytes} {}

  template <typename... Args>
  void operator()(Args&&... args) const {
    static_assert(sizeof...(Args) == sizeof...(Params), "wrong number of kernel arguments");
    const std::tuple<Params...> values(std::forward<Args>(args)...);  // converted once, as CUDA
    std::vector<PointerArgument> pointers;
    collect(pointers, values, std::index_sequence_for<Params...>{});
    run_kernel(name_, reinterpret_cast<const void*>(kernel_), shape_, pointers,
               [&] { std::apply(kernel_, values); });
  }

 private:
  template <size_t... I>
  static void collect(std::vector<PointerArgument>& out, const std::tuple<Params...>& values,
                      std::index_sequence<I...>) {
    (add_if_pointer(out, int(I), std::get<I>(values)), ...);
  }
  template <typename T>
  static void add_if_pointer(std::vector<PointerArgument>& out, int index, const T& value) {
    if constexpr (std::is_pointer_v<T>)
      if (value != nullptr) out.push_back({index, static_cast<const void*>(value)});
  }

  const char* name_;
  void (*kernel_)(Params...);
  LaunchShape shape_;
};

template <typename... Params>
Launch<Params...> make_launch(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block,
                              size_t shared_bytes) {
  return Launch<Params...>(name, kernel, grid, block, shared_bytes);
}

}  // namespace zaya::emu
