// A checkpoint directory whose manifest.json is the input: verify_checkpoint and load_checkpoint
// (chunk tiling, tensor assembly). The COMPLETE marker is written with the input's checksum so
// that the manifest itself is parsed, and one valid rank file (two small F32 tensors) sits beside
// it for the manifest's 'files' and 'chunks' to point at.
#include "ckpt/checkpoint.h"
#include "core/tensor.h"
#include "data/checksum.h"
#include "fuzz_util.h"
#include "io/safetensors.h"

namespace {

const std::string& checkpoint_dir() {
  static const std::string dir = [] {
    const std::string d = zaya::fuzz::scratch_dir() + "/ckpt";
    std::filesystem::create_directories(d);
    zaya::Tensor a({2, 3}, zaya::DType::F32), b({4}, zaya::DType::F32);
    for (int i = 0; i < 6; ++i) a.data<float>()[i] = float(i);
    for (int i = 0; i < 4; ++i) b.data<float>()[i] = float(-i);
    zaya::write_safetensors(d + "/" + zaya::checkpoint_rank_file(0), {{"p.a", a}, {"p.b", b}});
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = checkpoint_dir();
  const std::string text(reinterpret_cast<const char*>(data), size);
  {
    std::ofstream(dir + "/manifest.json", std::ios::binary | std::ios::trunc) << text;
    std::ofstream(dir + "/COMPLETE", std::ios::binary | std::ios::trunc)
        << zaya::checksum_hex(zaya::fnv1a64(text.data(), text.size())) << "\n";
  }
  ZAYA_FUZZ_EXPECT_ERRORS(zaya::load_checkpoint(dir));
  return 0;
}
