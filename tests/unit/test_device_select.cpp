// --device (backend/device_select.h): the names it takes, a backend plugin loaded with dlopen and
// checked against this build, and the refusals a user sees when it cannot be.
#include <gtest/gtest.h>

#include <string>

#include "backend/backend_abi.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/device_select.h"
#include "backend/plugin_api.h"
#include "core/error.h"

namespace zaya {
namespace {

std::string error_of(const std::string& device) {
  try {
    open_device(device);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DeviceSelect, CpuAndCpuAsDevice) {
  const ComputeDevice cpu = open_device("cpu");
  EXPECT_EQ(cpu.backend, &cpu_backend());
  EXPECT_EQ(cpu.name, "cpu");
  const ComputeDevice staged = open_device("cpu-as-device");
  EXPECT_EQ(staged.backend, &cpu_as_device_backend());
  EXPECT_FALSE(staged.backend->host_memory()) << "the model must take the device path";
  EXPECT_EQ(staged.name, "cpu-as-device");
}

TEST(DeviceSelect, UnknownNamesAreRefusedByName) {
  const std::string e = error_of("tpu");
  EXPECT_NE(
      e.find(
          "--device: 'tpu' is not a device (expected cpu, cuda, auto, cpu-as-device or cuda-emu)"),
      std::string::npos)
      << e;
  EXPECT_NE(error_of("").find("'' is not a device"), std::string::npos);
  EXPECT_NE(error_of("CPU").find("'CPU' is not a device"), std::string::npos);
}

// bf16 is the GPU's; cpu-as-device takes it as the stand-in for a bf16 GPU's weights (its own
// backend object, whose products read bf16 weights), and auto stays fp32 off the GPU.
TEST(DeviceSelect, Bf16IsRefusedOnTheCpuAndAutoIsFp32OffTheGpu) {
  EXPECT_EQ(open_device("cpu", Precision::kAuto).precision, Precision::kFp32);
  EXPECT_EQ(open_device("cpu-as-device", Precision::kAuto).precision, Precision::kFp32);
  EXPECT_EQ(open_device("cpu-as-device", Precision::kFp32).precision, Precision::kFp32);
  EXPECT_FALSE(open_device("cpu-as-device", Precision::kFp32).backend->bf16_weights());
  const ComputeDevice stand_in = open_device("cpu-as-device", Precision::kBf16);
  EXPECT_EQ(stand_in.precision, Precision::kBf16);
  EXPECT_TRUE(stand_in.backend->bf16_weights());
  EXPECT_FALSE(stand_in.backend->host_memory());
  EXPECT_EQ(stand_in.backend, &cpu_as_device_backend(true));
  try {
    open_device("cpu", Precision::kBf16);
    ADD_FAILURE() << "cpu took --precision bf16";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--precision bf16: the cpu backend computes in fp32"),
              std::string::npos)
        << e.what();
  }
}

// A precision is a mode parsed once, from its name: every name maps to its mode and back, and
// nothing else is one (the flags refuse "fp16" naming the flag: cli.bad_input).
TEST(DeviceSelect, PrecisionNamesAreTheModes) {
  EXPECT_EQ(precision_names().size(), 3u);
  for (const auto& [name, mode] : precision_names()) EXPECT_EQ(name, precision_name(mode));
  EXPECT_EQ(precision_names().count("fp16"), 0u);
}

TEST(DeviceSelect, MissingAndForeignPluginsAreRefusedWithTheReason) {
  std::string error;
  EXPECT_EQ(load_backend_plugin("/nonexistent/libzaya_cuda_backend.so", &error), nullptr);
  EXPECT_NE(error.find("/nonexistent/libzaya_cuda_backend.so is missing"), std::string::npos)
      << error;
  EXPECT_EQ(load_backend_plugin(ZAYA_TEST_NOT_A_PLUGIN, &error), nullptr);
  EXPECT_NE(error.find("has no zaya_backend_plugin entry: not a zaya plugin"), std::string::npos)
      << error;
  EXPECT_EQ(load_backend_plugin(ZAYA_TEST_WRONG_ABI_PLUGIN, &error), nullptr);
  EXPECT_NE(error.find("comes from another zaya build (its interface 0123456789abcdef, this "
                       "zaya's " +
                       std::string(kBackendAbi)),
            std::string::npos)
      << error;
  // Not a shared object at all: dlopen's own message is passed on.
  EXPECT_EQ(load_backend_plugin(ZAYA_SOURCE_DIR "/CMakeLists.txt", &error), nullptr);
  EXPECT_NE(error.find("cannot load the backend plugin"), std::string::npos) << error;
}

#ifdef ZAYA_TEST_CUDA_PLUGIN
// The real plugin of this build: it loads, its interface is this build's, and it answers. With
// a GPU, --device cuda opens it; without one, the refusal carries the runtime's reason.
TEST(DeviceSelect, TheBuildsCudaPluginLoadsAndAnswers) {
  std::string error;
  const BackendPlugin* api = load_backend_plugin(ZAYA_TEST_CUDA_PLUGIN, &error);
  ASSERT_NE(api, nullptr) << error;
  EXPECT_STREQ(api->abi, kBackendAbi);
  const std::string why = api->unavailable_reason();
  if (why.empty()) {
    EXPECT_STREQ(api->backend(false).name(), "cuda");
    EXPECT_FALSE(api->backend(false).host_memory());
    EXPECT_NE(&api->backend(true), &api->backend(false));
    EXPECT_FALSE(api->device_summary().empty());
  } else {
    setenv("ZAYA_CUDA_BACKEND", ZAYA_TEST_CUDA_PLUGIN, 1);
    const std::string e = error_of("cuda");
    EXPECT_NE(e.find("--device cuda: no usable GPU (" + why + ")"), std::string::npos) << e;
    std::printf("no GPU here: %s\n", why.c_str());
  }
}
#endif

}  // namespace
}  // namespace zaya
