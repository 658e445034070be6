// The resume of one rank of N: every weight, and only the optimizer state of its own range, read
// with pread from the chunks that overlap what it needs. The old path (load_checkpoint) read
// every rank file whole and assembled every tensor on every rank: about 7 × the parameters of
// memory for a moment, on each rank, which at 1,024 ranks of ZAYA1-base does not fit.
#include <algorithm>
#include <filesystem>
#include <memory>

#include "ckpt/checkpoint.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "optim/optimizer.h"
#include "optim/router_balancer.h"

namespace zaya {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The rank files of one checkpoint, each opened (and its header read) once, on first use.
class ChunkReader {
 public:
  ChunkReader(const std::string& dir, const json& manifest) : dir_(dir) {
    for (const json& t : manifest["tensors"]) tensors_[t["name"].get<std::string>()] = &t;
  }

  // The manifest entry of tensor `name`, which must have the model's shape.
  const json& tensor(const std::string& name, const Shape& shape) const {
    const auto it = tensors_.find(name);
    ZAYA_CHECK(it != tensors_.end(), "checkpoint ", dir_, ": missing tensor '", name,
               "' that this model needs (shape ", shape_str(shape), ")");
    const Shape got = (*it->second)["shape"].get<Shape>();
    ZAYA_CHECK(got == shape, "checkpoint ", dir_, ": tensor '", name, "' has shape ",
               shape_str(got), ", the config needs ", shape_str(shape));
    return *it->second;
  }

  // Elements [lo, hi) of a manifest tensor into dst (dst[0] is element lo): the parts of the
  // chunks that overlap them, nothing else.
  void read(const json& t, int64_t lo, int64_t hi, float* dst) {
    for (const json& c : t["chunks"]) {
      const int64_t b = c["begin"].get<int64_t>(), e = c["end"].get<int64_t>();
      const int64_t from = std::max(b, lo), to = std::min(e, hi);
      if (from >= to) continue;
      SafetensorsReader& f = file(c["file"].get<std::string>());
      const std::string key = c["key"].get<std::string>();
      const auto entry = f.index().tensors.find(key);
      ZAYA_CHECK(entry != f.index().tensors.end(), "checkpoint ", dir_, ": ",
                 c["file"].get<std::string>(), " lacks tensor '", key, "' (a chunk of '",
                 t["name"].get<std::string>(), "')");
      ZAYA_CHECK(shape_numel(entry->second.shape) == e - b, "checkpoint ", dir_, ": ",
                 c["file"].get<std::string>(), " tensor '", key, "' has ",
                 shape_numel(entry->second.shape), " elements, the manifest says ", e - b);
      f.read_f32(key, from - b, to - from, dst + (from - lo));
    }
  }

  uint64_t bytes_read() const {
    uint64_t n = 0;
    for (const auto& [name, f] : files_) n += f->bytes_read();
    return n;
  }

 private:
  SafetensorsReader& file(const std::string& name) {
    auto& f = files_[name];
    if (!f) f = std::make_unique<SafetensorsReader>((fs::path(dir_) / name).string());
    return *f;
  }

  std::string dir_;
  std::map<std::string, const json*> tensors_;
  std::map<std::string, std::unique_ptr<SafetensorsReader>> files_;
};

}  // namespace

uint64_t restore_checkpoint_weights(const LoadedCheckpoint& header, ParamStore& params) {
  ChunkReader chunks(header.dir, header.manifest);
  for (const ParamSpec& s : params.registry().specs())
    chunks.read(chunks.tensor(s.name, s.shape), 0, s.numel, params.weights() + s.offset);
  return chunks.bytes_read();
}

uint64_t restore_checkpoint_range(const LoadedCheckpoint& header, ParamStore& params,
                                  Optimizer& optimizer, RouterBalancer& balancer) {
  ChunkReader chunks(header.dir, header.manifest);
  const int64_t begin = optimizer.shard().begin(), end = optimizer.shard().end();
  // Views of the live state on host memory, host copies off it (set_state sends them there).
  std::map<std::string, Tensor> state = optimizer.state_tensors();
  for (const ParamSpec& s : params.registry().specs()) {
    chunks.read(chunks.tensor(s.name, s.shape), 0, s.numel, params.weights() + s.offset);
    // The part of this tensor inside the rank's range, in the tensor's own element numbers.
    const int64_t lo = std::max<int64_t>(begin, int64_t(s.offset)) - int64_t(s.offset);
    const int64_t hi = std::min<int64_t>(end, int64_t(s.offset) + s.numel) - int64_t(s.offset);
    for (const char* name : {"exp_avg", "exp_avg_sq"}) {
      const json& t = chunks.tensor(std::string(name) + "/" + s.name, s.shape);
      if (lo < hi)
        chunks.read(t, lo, hi, state.at(name).data<float>() + (int64_t(s.offset) + lo - begin));
    }
  }
  optimizer.set_state(state);
  optimizer.set_step_count(header.state.optimizer_steps);
  std::map<std::string, Tensor> bal;
  for (const auto& [name, t] : balancer.state_tensors()) {
    Tensor full(t.shape(), DType::F32);
    chunks.read(chunks.tensor("balancer/" + name, t.shape()), 0, t.numel(), full.data<float>());
    bal[name] = full;
  }
  balancer.load_state(bal, header.state.balancer_steps);
  return chunks.bytes_read();
}

}  // namespace zaya
