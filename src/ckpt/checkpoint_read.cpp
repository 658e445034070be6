// Reading a checkpoint: verification (marker, manifest, per-file size and checksum), assembling
// tensors from their chunks, restoring the trainer's state, and picking the one to resume from.
#include <algorithm>
#include <cstring>
#include <filesystem>

#include "ckpt/checkpoint.h"
#include "ckpt/ckpt_fs.h"
#include "core/error.h"
#include "core/json_number.h"
#include "data/checksum.h"
#include "dist/communicator.h"
#include "io/json_limits.h"
#include "io/safetensors.h"
#include "optim/optimizer.h"
#include "optim/router_balancer.h"

namespace zaya {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A manifest field of the expected JSON type, or an error naming the field.
const json& field(const json& j, const char* key, json::value_t type, const std::string& where,
                  const std::string& what) {
  ZAYA_CHECK(j.is_object() && j.contains(key), where, ": ", what, " lacks field '", key, "'");
  const json& v = j[key];
  const bool ok = v.type() == type ||
                  (type == json::value_t::number_integer && v.is_number_integer()) ||
                  (type == json::value_t::number_unsigned && v.is_number_unsigned());
  ZAYA_CHECK(ok, where, ": ", what, " field '", key, "' has the wrong type (", v.type_name(), ")");
  return v;
}

using VT = json::value_t;

}  // namespace

namespace {

// Every check of verify_checkpoint on this process; the checksums of the files this rank reads.
json verify_here(const std::string& dir, bool checksums, int my_rank, int ranks) {
  const std::string where = "checkpoint " + dir;
  ZAYA_CHECK(fs::is_directory(dir), where, ": not a directory");
  const fs::path d(dir);
  ZAYA_CHECK(fs::exists(d / "COMPLETE"), where, ": missing COMPLETE marker (incomplete write)");
  ZAYA_CHECK(fs::exists(d / "manifest.json"), where, ": missing manifest.json");
  const std::string text = ckpt_fs::read_all((d / "manifest.json").string());
  const std::string marker = ckpt_fs::read_all((d / "COMPLETE").string());
  const std::string want = checksum_hex(fnv1a64(text.data(), text.size()));
  ZAYA_CHECK(marker.find(want) != std::string::npos, where, ": manifest.json checksum ", want,
             " does not match the COMPLETE marker ('", marker.substr(0, marker.find('\n')),
             "'): corrupt manifest");
  check_json_depth(text, where + "/manifest.json");
  json m;
  try {
    m = json::parse(text);
  } catch (const json::exception& e) {
    ZAYA_FAIL(where, ": manifest.json is not valid JSON: ", e.what());
  }
  const std::string mw = where + "/manifest.json";
  ZAYA_CHECK(m.is_object() && m.contains("format") && m["format"] == "zaya-sharded-checkpoint", mw,
             ": field 'format' must be \"zaya-sharded-checkpoint\"");
  // Compared as JSON numbers, not after get<int>(): 4294967297 would narrow to 1 and pass.
  ZAYA_CHECK(field(m, "version", VT::number_integer, mw, "manifest") == 1, mw,
             ": field 'version' must be 1 (this zaya reads version 1)");
  const int64_t step = field(m, "step", VT::number_integer, mw, "manifest").get<int64_t>();
  const int world = json_integer_as<int>(field(m, "world_size", VT::number_integer, mw, "manifest"),
                                         1, mw + ": field 'world_size'");
  ZAYA_CHECK(step >= 0 && world >= 1, mw, ": fields 'step' (", step, ") and 'world_size' (", world,
             ") must be >= 0 and >= 1");
  const json& tr = field(m, "trainer", VT::object, mw, "manifest");
  for (const char* k : {"step", "tokens_done", "sample_index", "optimizer_steps", "balancer_steps"})
    ZAYA_CHECK(field(tr, k, VT::number_integer, mw, "'trainer'").get<int64_t>() >= 0, mw,
               ": field 'trainer.", k, "' must be >= 0");
  field(field(m, "rng", VT::object, mw, "manifest"), "seed", VT::number_integer, mw, "'rng'");
  field(m, "config", VT::object, mw, "manifest");
  const json& files = field(m, "files", VT::array, mw, "manifest");
  ZAYA_CHECK(int(files.size()) == world, mw, ": lists ", files.size(), " files for world size ",
             world);
  std::map<std::string, bool> listed;
  int index = -1;
  for (const json& f : files) {
    ++index;
    const std::string name = field(f, "name", VT::string, mw, "a 'files' entry").get<std::string>();
    const uint64_t bytes =
        field(f, "bytes", VT::number_integer, mw, "file " + name).get<uint64_t>();
    const std::string sum = field(f, "fnv1a64", VT::string, mw, "file " + name).get<std::string>();
    ZAYA_CHECK(name.find('/') == std::string::npos, mw, ": file name '", name, "' must be plain");
    const std::string path = (d / name).string();
    ZAYA_CHECK(fs::exists(path), where, ": missing shard file ", name);
    const uint64_t size = fs::file_size(path);
    ZAYA_CHECK(size == bytes, where, ": ", name, " has ", size, " bytes, the manifest says ", bytes,
               " (truncated or overwritten file)");
    if (checksums && index % ranks == my_rank) {
      uint64_t got_bytes = 0;
      const std::string got = checksum_hex(ckpt_fs::file_checksum(path, &got_bytes));
      ZAYA_CHECK(got_bytes == bytes, where, ": ", name, " has ", got_bytes,
                 " bytes, the manifest says ", bytes, " (truncated or overwritten file)");
      ZAYA_CHECK(got == sum, where, ": ", name, " checksum ", got,
                 " does not match the manifest's ", sum, " (corrupt file)");
    }
    listed[name] = true;
  }
  for (const json& t : field(m, "tensors", VT::array, mw, "manifest")) {
    const std::string name =
        field(t, "name", VT::string, mw, "a 'tensors' entry").get<std::string>();
    const std::string what = "tensor '" + name + "'";
    ZAYA_CHECK(field(t, "dtype", VT::string, mw, what).get<std::string>() == "F32", mw, ": ", what,
               " field 'dtype' must be \"F32\"");
    Shape shape;
    for (const json& s : field(t, "shape", VT::array, mw, what)) {
      ZAYA_CHECK(s.is_number_integer() && s.get<int64_t>() >= 0, mw, ": ", what,
                 " has a bad 'shape'");
      shape.push_back(s.get<int64_t>());
    }
    shape_numel(shape, mw + ": " + what);
    // The chunks must tile [0, numel) exactly: sorted, contiguous, no overlap, no gap.
    std::vector<std::pair<int64_t, int64_t>> ranges;
    for (const json& c : field(t, "chunks", VT::array, mw, what)) {
      const std::string file = field(c, "file", VT::string, mw, what + " chunk").get<std::string>();
      ZAYA_CHECK(listed.count(file), mw, ": ", what, " has a chunk in '", file,
                 "', which 'files' does not list");
      field(c, "key", VT::string, mw, what + " chunk");
      ranges.emplace_back(field(c, "begin", VT::number_integer, mw, what + " chunk").get<int64_t>(),
                          field(c, "end", VT::number_integer, mw, what + " chunk").get<int64_t>());
    }
    std::sort(ranges.begin(), ranges.end());
    int64_t at = 0;
    for (const auto& [b, e] : ranges) {
      ZAYA_CHECK(b == at && e > b, mw, ": ", what, " chunks do not tile its ", shape_numel(shape),
                 " elements (chunk [", b, ", ", e, ") after element ", at, ")");
      at = e;
    }
    ZAYA_CHECK(at == shape_numel(shape), mw, ": ", what, " chunks cover ", at, " of ",
               shape_numel(shape), " elements");
  }
  return m;
}

}  // namespace

json verify_checkpoint(const std::string& dir, dist::Communicator* comm, bool checksums) {
  const int world = comm ? comm->world_size() : 1, rank = comm ? comm->rank() : 0;
  if (world == 1) return verify_here(dir, checksums, 0, 1);
  // Every rank reaches the agreement, whatever it found: a rank that threw alone would leave the
  // others waiting in the collective.
  json m;
  std::string error;
  try {
    m = verify_here(dir, checksums, rank, world);
  } catch (const Error& e) {
    error = e.what();
  }
  int32_t mine = error.empty() ? world : rank, first = world;
  comm->all_reduce(&mine, &first, 1, DType::I32, dist::ReduceOp::Min);
  if (first == world) return m;
  int32_t len = int32_t(error.size());
  comm->broadcast(&len, &len, 1, DType::I32, first);
  std::vector<int32_t> text((size_t(len) + 3) / 4, 0);
  if (rank == first) std::memcpy(text.data(), error.data(), error.size());
  comm->broadcast(text.data(), text.data(), text.size(), DType::I32, first);
  throw Error(std::string(reinterpret_cast<const char*>(text.data()), size_t(len)));
}

LoadedCheckpoint checkpoint_header(const std::string& dir, const json& m) {
  LoadedCheckpoint ck;
  ck.dir = dir;
  ck.manifest = m;
  const json& tr = m["trainer"];
  ck.world_size = m["world_size"].get<int>();
  ck.state.step = tr["step"].get<int64_t>();
  ck.state.tokens_done = tr["tokens_done"].get<int64_t>();
  ck.state.sample_index = tr["sample_index"].get<int64_t>();
  ck.state.optimizer_steps = tr["optimizer_steps"].get<int64_t>();
  ck.state.balancer_steps = tr["balancer_steps"].get<int64_t>();
  ck.state.seed = m["rng"]["seed"].get<uint64_t>();
  ck.state.config = m["config"];
  return ck;
}

LoadedCheckpoint load_checkpoint(const std::string& dir) {
  LoadedCheckpoint ck = checkpoint_header(dir, verify_checkpoint(dir));
  const json& m = ck.manifest;
  std::map<std::string, SafetensorsFile> files;
  for (const json& f : m["files"]) {
    const std::string name = f["name"].get<std::string>();
    files[name] = read_safetensors((fs::path(dir) / name).string());
  }
  for (const json& t : m["tensors"]) {
    const std::string name = t["name"].get<std::string>();
    // Every chunk is matched with its stored tensor before the full tensor is allocated: the
    // manifest's shape alone (verified only to be tiled by the chunks) could ask for terabytes.
    std::vector<std::pair<int64_t, const Tensor*>> parts;
    for (const json& c : t["chunks"]) {
      const std::string file = c["file"].get<std::string>(), key = c["key"].get<std::string>();
      const int64_t b = c["begin"].get<int64_t>(), e = c["end"].get<int64_t>();
      const auto& tensors = files.at(file).tensors;
      const auto it = tensors.find(key);
      ZAYA_CHECK(it != tensors.end(), "checkpoint ", dir, ": ", file, " lacks tensor '", key,
                 "' (a chunk of '", name, "')");
      ZAYA_CHECK(it->second.dtype() == DType::F32 && it->second.numel() == e - b, "checkpoint ",
                 dir, ": ", file, " tensor '", key, "' is ", dtype_name(it->second.dtype()), " ",
                 shape_str(it->second.shape()), ", the manifest says F32 with ", e - b,
                 " elements");
      parts.emplace_back(b, &it->second);
    }
    Tensor full(t["shape"].get<Shape>(), DType::F32);
    for (const auto& [b, part] : parts)
      std::memcpy(full.data<float>() + b, part->raw(), size_t(part->numel()) * sizeof(float));
    ck.tensors[name] = full;
  }
  return ck;
}

void restore_checkpoint(const LoadedCheckpoint& ck, ParamStore& params, Optimizer& optimizer,
                        RouterBalancer& balancer) {
  const int64_t total = int64_t(params.size());
  Tensor exp_avg({total}, DType::F32), exp_avg_sq({total}, DType::F32);
  auto get = [&](const std::string& name, const Shape& shape) -> const Tensor& {
    const auto it = ck.tensors.find(name);
    ZAYA_CHECK(it != ck.tensors.end(), "checkpoint ", ck.dir, ": missing tensor '", name,
               "' that this model needs (shape ", shape_str(shape), ")");
    ZAYA_CHECK(it->second.shape() == shape, "checkpoint ", ck.dir, ": tensor '", name,
               "' has shape ", shape_str(it->second.shape()), ", the config needs ",
               shape_str(shape));
    return it->second;
  };
  for (const ParamSpec& s : params.registry().specs()) {
    const size_t n = size_t(s.numel) * sizeof(float);
    std::memcpy(params.weights() + s.offset, get(s.name, s.shape).raw(), n);
    std::memcpy(exp_avg.data<float>() + s.offset, get("exp_avg/" + s.name, s.shape).raw(), n);
    std::memcpy(exp_avg_sq.data<float>() + s.offset, get("exp_avg_sq/" + s.name, s.shape).raw(), n);
  }
  optimizer.load_state({{"exp_avg", exp_avg}, {"exp_avg_sq", exp_avg_sq}},
                       ck.state.optimizer_steps);
  std::map<std::string, Tensor> bal;
  for (const auto& [name, t] : balancer.state_tensors())
    bal[name] = get("balancer/" + name, t.shape());
  balancer.load_state(bal, ck.state.balancer_steps);
}

std::string find_latest_checkpoint(const std::string& root,
                                   const std::function<void(const std::string&)>& skipped,
                                   dist::Communicator* comm, std::vector<std::string>* damaged) {
  if (!fs::is_directory(root)) return "";
  std::vector<std::pair<int64_t, std::string>> found;
  for (const auto& d : fs::directory_iterator(root)) {
    const std::string n = d.path().filename().string();
    if (!d.is_directory() || n.rfind("step-", 0) != 0) continue;
    const auto step = committed_checkpoint_step(n);
    if (!step) {  // step-N.tmp / .old: a save that never finished; .damaged-*: set aside
      skipped("checkpoint " + d.path().string() +
              (n.find(".damaged-") != std::string::npos
                   ? ": a damaged checkpoint set aside for inspection, skipped"
                   : ": temporary directory of an unfinished save, skipped"));
      continue;
    }
    found.emplace_back(*step, d.path().string());
  }
  std::sort(found.rbegin(), found.rend());
  for (const auto& [step, dir] : found) {
    try {
      verify_checkpoint(dir, comm);
      return dir;
    } catch (const Error& e) {
      std::string msg = e.what();
      msg = msg.substr(0, msg.rfind(" ["));  // the source location is noise here
      skipped(msg + ", skipped");
      if (damaged) damaged->push_back(dir);
    }
  }
  return "";
}

}  // namespace zaya
