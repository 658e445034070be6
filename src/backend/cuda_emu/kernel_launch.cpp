// The emulated device's kernel runner (kernel_launch.h). A block's threads are fibers
// (Boost.Context: a switch is a few instructions, no system call) on the calling thread; the
// block runs in rounds: every ready fiber runs until it ends or waits at a barrier or a shuffle,
// then the waits are settled: a shuffle when every lane of its warp waits at it, a barrier when
// every live thread of the block does. Blocks run one after the other.
#include "backend/cuda_emu/kernel_launch.h"

#include <boost/context/fiber.hpp>

#include <algorithm>
#include <cstring>
#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <tuple>

#include "backend/cuda_emu/device_memory.h"
#include "core/error.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ZAYA_EMU_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define ZAYA_EMU_ASAN 1
#endif
#if defined(ZAYA_EMU_ASAN)
#include <sanitizer/common_interface_defs.h>
#endif

namespace zaya::emu {

namespace ctx = boost::context;

namespace {

constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr unsigned kMaxGridYZ = 65535;
constexpr size_t kDefaultDynamicShared = 48 * 1024;
#if defined(ZAYA_EMU_ASAN)
constexpr size_t kStackBytes = 256 * 1024;  // ASan's redzones make frames larger
#else
constexpr size_t kStackBytes = 64 * 1024;
#endif

enum class Wait { kNone, kBarrier, kShuffle, kDone };

struct EmuThread {
  uint3 index;
  int linear = 0;
  Wait wait = Wait::kNone;
  int line = 0;             // where it waits
  uint64_t shuffle_in = 0;  // its value for the shuffle, and what it gets back
  uint64_t shuffle_out = 0;
  int lane_mask = 0;
  unsigned mask = 0;
  ctx::fiber fiber;  // the thread, while it has not ended
  ctx::fiber back;   // the scheduler, while the thread runs
  std::exception_ptr error;
};

// A stack allocator over memory the runner keeps from launch to launch.
struct PooledStack {
  void* base;  // the top of the stack (stacks grow down)
  ctx::stack_context allocate() {
    ctx::stack_context sc;
    sc.size = kStackBytes;
    sc.sp = base;
    return sc;
  }
  void deallocate(ctx::stack_context&) noexcept {}
};

// What the running block shares with its fibers (one block at a time per OS thread).
struct BlockRun {
  const char* kernel = nullptr;
  const LaunchShape* shape = nullptr;
  uint3 block;
  std::vector<EmuThread> threads;
  EmuThread* current = nullptr;
  std::vector<unsigned char> dynamic_shared;
#if defined(ZAYA_EMU_ASAN)
  const void* main_stack_bottom = nullptr;
  size_t main_stack_size = 0;
#endif
};

thread_local BlockRun* t_block = nullptr;

struct StackPool {
  std::vector<std::unique_ptr<unsigned char[]>> stacks;
  void* top(size_t i) {
    while (stacks.size() <= i) stacks.push_back(std::make_unique<unsigned char[]>(kStackBytes));
    return stacks[i].get() + kStackBytes;
  }
};
thread_local StackPool t_stacks;

std::mutex g_attribute_mutex;
std::map<const void*, size_t>& opted_in_shared() {
  static std::map<const void*, size_t> m;
  return m;
}

std::string shape_text(const LaunchShape& s) {
  std::ostringstream o;
  o << "grid (" << s.grid.x << ", " << s.grid.y << ", " << s.grid.z << "), block (" << s.block.x
    << ", " << s.block.y << ", " << s.block.z << "), " << s.shared_bytes
    << " bytes of dynamic shared memory";
  return o.str();
}

[[noreturn]] void fail(const BlockRun& b, const std::string& what) {
  std::ostringstream o;
  o << "cuda-emu: kernel " << b.kernel << " (" << shape_text(*b.shape) << "), block (" << b.block.x
    << ", " << b.block.y << ", " << b.block.z << "): " << what;
  throw Error(o.str());
}

// Switches from the scheduler into thread t and back (with ASan told about the stacks).
void enter(BlockRun& b, EmuThread& t) {
  b.current = &t;
#if defined(ZAYA_EMU_ASAN)
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(
      &fake, static_cast<char*>(t_stacks.top(size_t(t.linear))) - kStackBytes, kStackBytes);
  t.fiber = std::move(t.fiber).resume();
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
  t.fiber = std::move(t.fiber).resume();
#endif
  b.current = nullptr;
}

// From thread t back to the scheduler until the scheduler resumes it.
void leave(EmuThread& t) {
#if defined(ZAYA_EMU_ASAN)
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, t_block->main_stack_bottom, t_block->main_stack_size);
  t.back = std::move(t.back).resume();
  __sanitizer_finish_switch_fiber(fake, &t_block->main_stack_bottom, &t_block->main_stack_size);
#else
  t.back = std::move(t.back).resume();
#endif
}

EmuThread& running() {
  ZAYA_CHECK(t_block && t_block->current, "cuda-emu: a device function ran outside a kernel");
  return *t_block->current;
}

void start_threads(BlockRun& b, const std::function<void()>& body) {
  const dim3 bd = b.shape->block;
  const size_t count = size_t(bd.x) * bd.y * bd.z;
  b.threads.clear();
  b.threads.resize(count);
  for (size_t i = 0; i < count; ++i) {
    EmuThread& t = b.threads[i];
    t.linear = int(i);
    t.index = {unsigned(i % bd.x), unsigned(i / bd.x % bd.y), unsigned(i / (size_t(bd.x) * bd.y))};
    void* top = t_stacks.top(i);
    ctx::preallocated place(top, kStackBytes, ctx::stack_context{});
    place.sctx.size = kStackBytes;
    place.sctx.sp = top;
    t.fiber = ctx::fiber(std::allocator_arg, place, PooledStack{top},
                         [&t, &body](ctx::fiber&& scheduler) {
#if defined(ZAYA_EMU_ASAN)
                           __sanitizer_finish_switch_fiber(nullptr, &t_block->main_stack_bottom,
                                                           &t_block->main_stack_size);
#endif
                           t.back = std::move(scheduler);
                           try {
                             body();
                           } catch (const ctx::detail::forced_unwind&) {
                             throw;
                           } catch (...) {
                             t.error = std::current_exception();
                           }
                           t.wait = Wait::kDone;
#if defined(ZAYA_EMU_ASAN)
                           __sanitizer_start_switch_fiber(nullptr, t_block->main_stack_bottom,
                                                          t_block->main_stack_size);
#endif
                           return std::move(t.back);
                         });
  }
}

// Every lane of each warp waiting at a shuffle gets its partner's value; a warp some of whose
// lanes wait elsewhere (or have ended) is an error. Returns whether any shuffle was settled.
bool settle_shuffles(BlockRun& b) {
  const int ws = warp_size();
  bool settled = false;
  const int count = int(b.threads.size());
  for (int w0 = 0; w0 < count; w0 += ws) {
    const int lanes = std::min(ws, count - w0);
    int waiting = 0;
    for (int l = 0; l < lanes; ++l) waiting += b.threads[size_t(w0 + l)].wait == Wait::kShuffle;
    if (waiting == 0) continue;
    const EmuThread& first = b.threads[size_t(w0)];
    for (int l = 0; l < lanes; ++l) {
      const EmuThread& t = b.threads[size_t(w0 + l)];
      if (t.wait != Wait::kShuffle || t.line != first.line || t.lane_mask != first.lane_mask)
        fail(b, "warp " + std::to_string(w0 / ws) + ": lane " + std::to_string(l) +
                    (t.wait == Wait::kShuffle ? " shuffles at another line or distance"
                                              : " does not take part in the shuffle at line " +
                                                    std::to_string(first.line)) +
                    " (every lane of the warp must shuffle together)");
      if (t.mask != 0xffffffffu) fail(b, "a shuffle with a partial lane mask");
    }
    if (lanes != ws) fail(b, "a shuffle in a warp of " + std::to_string(lanes) + " live lanes");
    for (int l = 0; l < lanes; ++l) {
      EmuThread& t = b.threads[size_t(w0 + l)];
      const int partner = l ^ t.lane_mask;
      t.shuffle_out = partner < lanes ? b.threads[size_t(w0 + partner)].shuffle_in : t.shuffle_in;
    }
    for (int l = 0; l < lanes; ++l) b.threads[size_t(w0 + l)].wait = Wait::kNone;
    settled = true;
  }
  return settled;
}

// Releases the barrier when every live thread waits at it, at one line.
bool settle_barrier(BlockRun& b) {
  const EmuThread* first = nullptr;
  for (const EmuThread& t : b.threads) {
    if (t.wait == Wait::kDone) continue;
    if (t.wait != Wait::kBarrier) return false;
    if (!first) first = &t;
    if (t.line != first->line)
      fail(b, "threads " + std::to_string(first->linear) + " and " + std::to_string(t.linear) +
                  " wait at different barriers (lines " + std::to_string(first->line) + " and " +
                  std::to_string(t.line) +
                  "): __syncthreads must be reached by every live "
                  "thread of the block together");
  }
  if (!first) return false;
  for (EmuThread& t : b.threads)
    if (t.wait == Wait::kBarrier) t.wait = Wait::kNone;
  return true;
}

// Runs one block to its end, its threads in `reverse` order or not.
void run_block(BlockRun& b, const std::function<void()>& body, bool reverse) {
  start_threads(b, body);
  const int count = int(b.threads.size());
  for (;;) {
    for (int k = 0; k < count; ++k) {
      EmuThread& t = b.threads[size_t(reverse ? count - 1 - k : k)];
      if (t.wait == Wait::kNone) enter(b, t);
      if (t.error) std::rethrow_exception(t.error);
    }
    bool all_done = true;
    for (const EmuThread& t : b.threads) all_done = all_done && t.wait == Wait::kDone;
    if (all_done) return;
    if (settle_shuffles(b)) continue;
    if (settle_barrier(b)) continue;
    fail(b,
         "its threads wait for each other forever (a barrier some threads reach and others, "
         "ended or at a shuffle, never will)");
  }
}

void check_shape(const char* kernel, const void* fn, const LaunchShape& s) {
  const auto refuse = [&](const std::string& why) {
    throw Error(std::string("cuda-emu: kernel ") + kernel + " (" + shape_text(s) + "): " + why);
  };
  const size_t threads = size_t(s.block.x) * s.block.y * s.block.z;
  if (threads == 0 || s.grid.x == 0 || s.grid.y == 0 || s.grid.z == 0)
    refuse("an empty grid or block (CUDA refuses the launch: invalid configuration)");
  if (threads > kMaxThreadsPerBlock)
    refuse(std::to_string(threads) + " threads in a block, more than " +
           std::to_string(kMaxThreadsPerBlock));
  if (s.block.z > 64) refuse("block z over 64");
  if (s.grid.y > kMaxGridYZ || s.grid.z > kMaxGridYZ) refuse("grid y or z over 65,535");
  size_t limit = kDefaultDynamicShared;
  {
    const std::lock_guard<std::mutex> lock(g_attribute_mutex);
    const auto it = opted_in_shared().find(fn);
    if (it != opted_in_shared().end()) limit = std::max(limit, it->second);
  }
  if (s.shared_bytes > limit)
    refuse(std::to_string(s.shared_bytes) + " bytes of dynamic shared memory, over the " +
           std::to_string(limit) +
           " allowed (above 48 KiB a kernel must opt in with "
           "cudaFuncSetAttribute)");
}

// The allocations the pointer arguments lie in: what the kernel can touch.
struct Region {
  unsigned char* begin;
  size_t size;
};
std::vector<Region> argument_regions(const char* kernel, const LaunchShape& shape,
                                     const std::vector<PointerArgument>& pointers) {
  std::vector<Region> regions;
  for (const PointerArgument& p : pointers) {
    const void* begin = nullptr;
    size_t size = 0;
    if (!device_range(p.address, 0, &begin, &size))
      throw Error(std::string("cuda-emu: kernel ") + kernel + " (" + shape_text(shape) +
                  "): argument " + std::to_string(p.index) +
                  " points outside every device allocation (a host pointer or a freed block)");
    auto* b = static_cast<unsigned char*>(const_cast<void*>(begin));
    if (std::none_of(regions.begin(), regions.end(), [&](const Region& r) { return r.begin == b; }))
      regions.push_back({b, size});
  }
  return regions;
}

void run_grid(const char* kernel, const LaunchShape& shape, const std::function<void()>& body,
              bool reverse) {
  struct Restore {
    BlockRun* outer;
    ~Restore() { t_block = outer; }
  } restore{t_block};
  BlockRun b;  // destroyed first: fibers an error left waiting unwind while t_block is theirs
  b.kernel = kernel;
  b.shape = &shape;
  t_block = &b;
  const dim3 g = shape.grid;
  const size_t blocks = size_t(g.x) * g.y * g.z;
  for (size_t k = 0; k < blocks; ++k) {
    const size_t i = reverse ? blocks - 1 - k : k;
    b.block = {unsigned(i % g.x), unsigned(i / g.x % g.y), unsigned(i / (size_t(g.x) * g.y))};
    // Dynamic shared memory starts with the same bytes in every block and run: what a kernel
    // reads there before writing it is its own bug, seen as a difference between the runs.
    b.dynamic_shared.assign(shape.shared_bytes, reverse ? 0xA5 : 0x5A);
    run_block(b, body, reverse);
  }
}

// ZAYA_EMU_RACE_CHECK: "all" runs every launch twice; "0" none; by default the first
// kRaceChecksPerShape launches of each kernel at each launch shape (a kernel's races show in its
// structure, not in its data; the op tests launch every kernel at several shapes).
constexpr int kRaceChecksPerShape = 2;
enum class RaceChecks { kNone, kFirst, kAll };
RaceChecks race_checks() {
  static const RaceChecks mode = [] {
    const char* v = std::getenv("ZAYA_EMU_RACE_CHECK");
    const std::string s = v ? v : "";
    return s == "0" ? RaceChecks::kNone : s == "all" ? RaceChecks::kAll : RaceChecks::kFirst;
  }();
  return mode;
}

bool race_check_this(const void* kernel, const LaunchShape& s) {
  switch (race_checks()) {
    case RaceChecks::kNone:
      return false;
    case RaceChecks::kAll:
      return true;
    case RaceChecks::kFirst:
      break;
  }
  using Key = std::tuple<const void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                         size_t>;
  static std::mutex mutex;
  static std::map<Key, int> seen;
  const std::lock_guard<std::mutex> lock(mutex);
  int& n = seen[Key{kernel, s.grid.x, s.grid.y, s.grid.z, s.block.x, s.block.y, s.block.z,
                    s.shared_bytes}];
  return n++ < kRaceChecksPerShape;
}

// The memory a race check copies, kept from launch to launch (no page faults per launch).
struct RaceBuffers {
  std::vector<std::vector<unsigned char>> before, forward;
};
thread_local RaceBuffers t_race;

}  // namespace

const uint3& thread_index() {
  return running().index;
}
const uint3& block_index() {
  running();
  return t_block->block;
}
const dim3& block_dim() {
  running();
  return t_block->shape->block;
}
const dim3& grid_dim() {
  running();
  return t_block->shape->grid;
}

int warp_size() {
#if defined(ZAYA_EMU_WARP_SIZE)
  return ZAYA_EMU_WARP_SIZE;
#else
  return 32;
#endif
}

void* dynamic_shared_memory() {
  running();
  return t_block->dynamic_shared.empty() ? nullptr : t_block->dynamic_shared.data();
}

void sync_threads(int line) {
  EmuThread& t = running();
  t.wait = Wait::kBarrier;
  t.line = line;
  leave(t);
}

uint64_t shuffle_xor_bits(uint64_t bits, int lane_mask, unsigned mask, int line) {
  EmuThread& t = running();
  t.wait = Wait::kShuffle;
  t.line = line;
  t.shuffle_in = bits;
  t.lane_mask = lane_mask;
  t.mask = mask;
  leave(t);
  return t.shuffle_out;
}

void set_max_dynamic_shared(const void* kernel, size_t bytes) {
  const std::lock_guard<std::mutex> lock(g_attribute_mutex);
  opted_in_shared()[kernel] = bytes;
}

void run_kernel(const char* name, const void* kernel, const LaunchShape& shape,
                const std::vector<PointerArgument>& pointers, const std::function<void()>& body) {
  check_shape(name, kernel, shape);
  const std::vector<Region> regions = argument_regions(name, shape, pointers);
  if (!race_check_this(kernel, shape)) {
    run_grid(name, shape, body, false);
    return;
  }
  // Twice from the same memory: forward, then reverse; the two must agree bit for bit.
  RaceBuffers& r = t_race;
  if (r.before.size() < regions.size()) {
    r.before.resize(regions.size());
    r.forward.resize(regions.size());
  }
  for (size_t i = 0; i < regions.size(); ++i)
    r.before[i].assign(regions[i].begin, regions[i].begin + regions[i].size);
  run_grid(name, shape, body, false);
  for (size_t i = 0; i < regions.size(); ++i) {
    r.forward[i].assign(regions[i].begin, regions[i].begin + regions[i].size);
    std::copy(r.before[i].begin(), r.before[i].end(), regions[i].begin);
  }
  run_grid(name, shape, body, true);
  for (size_t i = 0; i < regions.size(); ++i) {
    const std::vector<unsigned char>& forward = r.forward[i];
    if (std::memcmp(forward.data(), regions[i].begin, regions[i].size) == 0) continue;
    const auto diff = std::mismatch(forward.begin(), forward.end(), regions[i].begin);
    throw Error(std::string("cuda-emu: kernel ") + name + " (" + shape_text(shape) +
                "): its result depends on the order its threads run in (a race): byte " +
                std::to_string(diff.first - forward.begin()) + " of the " +
                std::to_string(regions[i].size) +
                "-byte allocation it writes differs between the forward and the reverse order of "
                "its blocks and threads");
  }
}

}  // namespace zaya::emu
