#include "io/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_limits.h"

namespace zaya {

using nlohmann::json;

namespace {

float half_to_float(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v;
  if (exp == 0)
    v = std::ldexp(float(mant), -24);
  else if (exp == 31)
    v = mant ? NAN : INFINITY;
  else
    v = std::ldexp(float(mant | 0x400), exp - 25);
  return sign ? -v : v;
}

}  // namespace

SafetensorsIndex read_safetensors_index(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  ZAYA_CHECK(in.good(), "cannot open safetensors file '", path, "'");
  in.seekg(0, std::ios::end);
  const uint64_t file_size = uint64_t(in.tellg());
  in.seekg(0);
  ZAYA_CHECK(file_size >= 8, path, ": not a safetensors file (", file_size,
             " bytes, shorter than the 8-byte header length)");
  uint64_t header_len = 0;
  unsigned char len_bytes[8];
  in.read(reinterpret_cast<char*>(len_bytes), 8);
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  ZAYA_CHECK(header_len <= file_size - 8, path, ": header length ", header_len,
             " runs past the end of the file (", file_size,
             " bytes): truncated or not safetensors");
  std::string header(header_len, '\0');
  in.read(header.data(), std::streamsize(header_len));
  check_json_depth(header, path + ": safetensors header");
  json j;
  try {
    j = json::parse(header);
  } catch (const json::exception& e) {
    ZAYA_FAIL(path, ": malformed safetensors JSON header: ", e.what());
  }
  ZAYA_CHECK(j.is_object(), path, ": safetensors header is not a JSON object");
  const uint64_t data_start = 8 + header_len, data_size = file_size - data_start;

  SafetensorsIndex out;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [name, info] : j.items()) {
    if (name == "__metadata__") {
      ZAYA_CHECK(info.is_object(), path, ": __metadata__ must be an object of strings");
      for (const auto& [k, v] : info.items()) {
        ZAYA_CHECK(v.is_string(), path, ": __metadata__ value '", k, "' is not a string");
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    ZAYA_CHECK(info.is_object() && info.contains("dtype") && info.contains("shape") &&
                   info.contains("data_offsets"),
               path, ": tensor '", name, "' needs dtype, shape and data_offsets");
    // Types are checked before get<>: nlohmann throws its own type_error otherwise, and iterating
    // a number or an object as the shape would read it as one dimension or its values.
    ZAYA_CHECK(info["dtype"].is_string(), path, ": tensor '", name, "' field 'dtype' must be a ",
               "string, got ", info["dtype"].dump());
    const std::string dt = info["dtype"].get<std::string>();
    ZAYA_CHECK(info["shape"].is_array(), path, ": tensor '", name,
               "' field 'shape' must be an array, got ", info["shape"].dump());
    Shape shape;
    for (const auto& d : info["shape"]) {
      ZAYA_CHECK(d.is_number_unsigned() && d.get<uint64_t>() <= uint64_t(INT64_MAX), path,
                 ": tensor '", name, "' has a bad shape ", info["shape"].dump());
      shape.push_back(d.get<int64_t>());
    }
    const auto& offs = info["data_offsets"];
    ZAYA_CHECK(offs.is_array() && offs.size() == 2 && offs[0].is_number_unsigned() &&
                   offs[1].is_number_unsigned(),
               path, ": tensor '", name, "' has bad data_offsets ", offs.dump());
    const uint64_t begin = offs[0].get<uint64_t>(), end = offs[1].get<uint64_t>();
    ZAYA_CHECK(begin <= end && end <= data_size, path, ": tensor '", name, "' data [", begin, ", ",
               end, ") lies outside the data section of ", data_size, " bytes (file truncated?)");
    size_t elem = 0;
    if (dt == "F32" || dt == "I32")
      elem = 4;
    else if (dt == "BF16" || dt == "F16")
      elem = 2;
    else if (dt == "F64")
      elem = 8;
    else
      ZAYA_FAIL(path, ": tensor '", name, "' has unsupported dtype ", dt,
                " (supported: F32, BF16, F16, F64, I32)");
    // numel is compared before it is multiplied: numel * elem can wrap around 2^64 (shape
    // [2^61] of F64 "needs" 0 bytes) and then a tensor of 2^61 elements would be allocated.
    const uint64_t numel = uint64_t(shape_numel(shape, path + ": tensor '" + name + "'"));
    ZAYA_CHECK(numel <= (end - begin) / elem && end - begin == numel * elem, path, ": tensor '",
               name, "' has ", end - begin, " bytes but shape ", shape_str(shape), " of ", dt,
               " needs ", numel, " x ", elem, " bytes");
    ranges.push_back({begin, end});
    out.tensors.emplace(name, SafetensorsEntry{dt, shape, data_start + begin, end - begin});
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    ZAYA_CHECK(ranges[i].first >= ranges[i - 1].second, path,
               ": tensors overlap in the data section");
  return out;
}

SafetensorsFile read_safetensors(const std::string& path) {
  SafetensorsIndex index = read_safetensors_index(path);
  std::ifstream in(path, std::ios::binary);
  ZAYA_CHECK(in.good(), "cannot open safetensors file '", path, "'");
  SafetensorsFile out;
  out.metadata = std::move(index.metadata);
  for (const auto& [name, e] : index.tensors) {
    // F16 and F64 are widened to F32 on load.
    const DType dtype = e.dtype == "BF16"  ? DType::BF16
                        : e.dtype == "I32" ? DType::I32
                                           : DType::F32;
    Tensor t(e.shape, dtype);
    std::vector<char> raw(e.bytes);
    in.seekg(std::streamoff(e.offset));
    in.read(raw.data(), std::streamsize(raw.size()));
    ZAYA_CHECK(in.good() || raw.empty(), path, ": short read of tensor '", name, "'");
    const int64_t n = shape_numel(e.shape);
    if (e.dtype == "F16") {
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, raw.data() + 2 * i, 2);
        t.data<float>()[i] = half_to_float(h);
      }
    } else if (e.dtype == "F64") {
      for (int64_t i = 0; i < n; ++i) {
        double v;
        std::memcpy(&v, raw.data() + 8 * i, 8);
        t.data<float>()[i] = float(v);
      }
    } else if (!raw.empty()) {
      std::memcpy(t.raw(), raw.data(), raw.size());
    }
    out.tensors.emplace(name, std::move(t));
  }
  return out;
}

SafetensorsReader::SafetensorsReader(const std::string& path)
    : path_(path), index_(read_safetensors_index(path)) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ZAYA_CHECK(fd_ >= 0, "cannot open safetensors file '", path, "': ", std::strerror(errno));
}

SafetensorsReader::~SafetensorsReader() {
  if (fd_ >= 0) ::close(fd_);
}

void SafetensorsReader::read_f32(const std::string& name, int64_t first, int64_t count,
                                 float* dst) {
  const auto it = index_.tensors.find(name);
  ZAYA_CHECK(it != index_.tensors.end(), path_, ": no tensor '", name, "'");
  const SafetensorsEntry& e = it->second;
  const int64_t numel = shape_numel(e.shape);
  ZAYA_CHECK(e.dtype == "F32", path_, ": tensor '", name, "' is ", e.dtype, ", expected F32");
  ZAYA_CHECK(first >= 0 && count >= 0 && first + count <= numel, path_, ": elements [", first, ", ",
             first + count, ") of tensor '", name, "' are outside its ", numel);
  auto* out = reinterpret_cast<char*>(dst);
  uint64_t at = e.offset + uint64_t(first) * 4, left = uint64_t(count) * 4;
  while (left > 0) {
    const ssize_t got = ::pread(fd_, out, left, off_t(at));
    if (got < 0 && errno == EINTR) continue;
    ZAYA_CHECK(got > 0, path_, ": short read of tensor '", name, "' at byte ", at,
               got < 0 ? std::string(": ") + std::strerror(errno) : std::string(""));
    out += got;
    at += uint64_t(got);
    left -= uint64_t(got);
  }
  bytes_read_ += uint64_t(count) * 4;
}

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    ZAYA_CHECK(!header.contains(name), "write_safetensors: duplicate tensor name '", name, "'");
    header[name] = {{"dtype", dtype_name(t.dtype())},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string h = header.dump();
  while ((8 + h.size()) % 8) h.push_back(' ');  // align the data section to 8 bytes
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    ZAYA_CHECK(out.good(), "cannot write '", tmp, "'");
    unsigned char len_bytes[8];
    uint64_t len = h.size();
    for (int i = 0; i < 8; ++i) len_bytes[i] = uint8_t(len >> (8 * i));
    out.write(reinterpret_cast<const char*>(len_bytes), 8);
    out.write(h.data(), std::streamsize(h.size()));
    for (const auto& [name, t] : tensors)
      out.write(reinterpret_cast<const char*>(t.raw()), std::streamsize(t.nbytes()));
    out.close();  // the last bytes are written here: a full disk must not pass as success
    if (out.fail()) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);  // nothing half-written is left behind
      ZAYA_FAIL("writing '", tmp, "' failed (disk full?)");
    }
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace zaya
