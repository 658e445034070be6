// The device registry (backend/device_registry.h): the names registered, whether each is usable
// here and why not, what each says it can do, and the listing an unknown --device prints.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/device_registry.h"
#include "backend/device_select.h"
#include "backend/plugin_api.h"
#include "core/error.h"
#include "dist/local_communicator.h"
#include "test_util.h"

namespace zaya {
namespace {

using test::error_of;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(DeviceRegistry, TheRegisteredNamesInOrder) {
  std::vector<std::string> names;
  for (const DeviceEntry& e : registered_devices()) names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"cpu", "cuda", "auto", "cpu-as-device", "cuda-emu"}));
  EXPECT_EQ(&find_device("cuda-emu"), &registered_devices()[4]);
  // auto is a choice rule, the others devices.
  for (const DeviceEntry& e : registered_devices()) {
    EXPECT_EQ(bool(e.choose), e.name == "auto") << e.name;
    EXPECT_EQ(bool(e.open), e.name != "auto") << e.name;
  }
}

TEST(DeviceRegistry, CpuAndCpuAsDeviceSayWhatTheyCanDo) {
  const DeviceEntry& cpu = find_device("cpu");
  EXPECT_EQ(cpu.unavailable_reason(), "");
  EXPECT_EQ(cpu.caps, DeviceCapabilities{});  // host memory, fp32, host collectives, any ranks
  const DeviceEntry& staged = find_device("cpu-as-device");
  EXPECT_EQ(staged.unavailable_reason(), "");
  // It counts its device memory (in use and peak; no total: the plan's check takes
  // --device-memory there).
  EXPECT_EQ(staged.caps,
            (DeviceCapabilities{.own_memory = true, .bf16 = true, .memory_figures = true}));
  const DeviceMemory before = staged.memory();
  {
    const BackendBuffer held(cpu_as_device_backend(), 1000);
    EXPECT_EQ(staged.memory().used, before.used + 1000);
    EXPECT_GE(staged.memory().peak, before.used + 1000);
  }
  EXPECT_EQ(staged.memory().used, before.used);
  EXPECT_EQ(staged.memory().total, 0u);

  // The opened devices answer as registered: memory, collectives (none: the host's move them),
  // any number of ranks.
  dist::LocalCommunicator host;
  for (const char* name : {"cpu", "cpu-as-device"}) {
    const ComputeDevice d = open_device(name);
    EXPECT_EQ(d.entry, &find_device(name));
    EXPECT_EQ(d.backend->host_memory(), !d.caps().own_memory) << name;
    EXPECT_EQ(d.make_collective(host, true), nullptr) << name;
    EXPECT_EQ(d.memory().total, 0u) << name;
    EXPECT_NO_THROW(d.check_world(64)) << name;
  }
}

TEST(DeviceRegistry, TheEmulatedDeviceIsUsableWithOneRank) {
  setenv("ZAYA_CUDA_EMU_BACKEND", ZAYA_TEST_CUDA_EMU_PLUGIN, 1);
  const DeviceEntry& emu = find_device("cuda-emu");
  EXPECT_EQ(emu.unavailable_reason(), "");
  EXPECT_EQ(emu.caps, (DeviceCapabilities{.own_memory = true,
                                          .bf16 = true,
                                          .bf16_by_default = true,
                                          .one_rank = true,
                                          .memory_figures = true,
                                          .timings = true}));

  const ComputeDevice d = open_device("cuda-emu");
  EXPECT_EQ(d.precision, Precision::kBf16);  // the default where the device takes bf16 by default
  EXPECT_FALSE(d.backend->host_memory());
  EXPECT_STREQ(d.backend->name(), "cuda");
  dist::LocalCommunicator host;
  EXPECT_EQ(d.make_collective(host, true), nullptr);
  EXPECT_NO_THROW(d.check_world(1));
  EXPECT_TRUE(contains(error_of([&] { d.check_world(2); }),
                       "--device cuda-emu runs one rank only; this run has 2 ranks"));
  // Memory figures: the emulated device's 16 GiB, and an allocation of exactly its bytes.
  const DeviceMemory before = d.memory();
  EXPECT_EQ(before.total, size_t(16) << 30);
  const BackendBuffer block(*d.backend, 1 << 20);
  EXPECT_EQ(d.memory().used, before.used + (1 << 20));
}

TEST(DeviceRegistry, CudaSaysWhyItIsNotUsable) {
  const DeviceEntry& cuda = find_device("cuda");
  EXPECT_EQ(cuda.caps, (DeviceCapabilities{.own_memory = true,
                                           .bf16 = true,
                                           .bf16_by_default = true,
                                           .own_collectives = true,
                                           .memory_figures = true,
                                           .timings = true}));

  setenv("ZAYA_CUDA_BACKEND", "/nonexistent/libzaya_cuda_backend.so", 1);
  EXPECT_TRUE(contains(cuda.unavailable_reason(),
                       "the backend plugin /nonexistent/libzaya_cuda_backend.so is missing (it is "
                       "built next to zaya; set ZAYA_CUDA_BACKEND to its path"))
      << cuda.unavailable_reason();
  EXPECT_TRUE(contains(error_of([] { open_device("cuda"); }),
                       "--device cuda: the backend plugin /nonexistent/libzaya_cuda_backend.so"));
  setenv("ZAYA_CUDA_BACKEND", ZAYA_TEST_WRONG_ABI_PLUGIN, 1);
  EXPECT_TRUE(contains(cuda.unavailable_reason(), "comes from another zaya build"));
#ifdef ZAYA_TEST_CUDA_PLUGIN
  // This build's plugin: usable exactly when the runtime finds a device, else its reason.
  setenv("ZAYA_CUDA_BACKEND", ZAYA_TEST_CUDA_PLUGIN, 1);
  std::string error;
  const BackendPlugin* api = load_backend_plugin(ZAYA_TEST_CUDA_PLUGIN, &error);
  ASSERT_NE(api, nullptr) << error;
  const std::string why = api->unavailable_reason();
  EXPECT_EQ(cuda.unavailable_reason(), why.empty() ? "" : "no usable GPU (" + why + ")");
#endif
  unsetenv("ZAYA_CUDA_BACKEND");
}

TEST(DeviceRegistry, AnUnknownNameListsTheRegisteredDevices) {
  setenv("ZAYA_CUDA_BACKEND", "/nonexistent/libzaya_cuda_backend.so", 1);
  setenv("ZAYA_CUDA_EMU_BACKEND", ZAYA_TEST_CUDA_EMU_PLUGIN, 1);
  const std::string e = error_of([] { open_device("tpu"); });
  unsetenv("ZAYA_CUDA_BACKEND");
  EXPECT_TRUE(contains(e,
                       "--device: 'tpu' is not a device (expected cpu, cuda, auto, cpu-as-device "
                       "or cuda-emu); the registered devices:\n"))
      << e;
  EXPECT_TRUE(contains(e, "\n  cpu           usable here\n")) << e;
  EXPECT_TRUE(contains(e, "\n  cpu-as-device usable here\n")) << e;
  EXPECT_TRUE(contains(e, "\n  cuda-emu      usable here\n")) << e;
  EXPECT_TRUE(contains(e,
                       "\n  cuda          not usable here: the backend plugin "
                       "/nonexistent/libzaya_cuda_backend.so is missing"))
      << e;
  EXPECT_TRUE(contains(e, "\n  auto          a choice: ")) << e;
  // Each device's capabilities, in words.
  EXPECT_TRUE(contains(e,
                       "own memory, bf16 (the default), host collectives (MPI), one rank only, "
                       "memory figures, timings (bench gemm|membw)\n"))
      << e;
  EXPECT_TRUE(contains(e, "host memory, fp32 only, host collectives (MPI)\n")) << e;
  // The same listing, from chosen_device (bench gemm|membw).
  EXPECT_TRUE(contains(error_of([] { chosen_device("gpu", "--device"); }),
                       "'gpu' is not a device (expected cpu, cuda, auto, cpu-as-device or "
                       "cuda-emu); the registered devices:\n  cpu "));
}

}  // namespace
}  // namespace zaya
