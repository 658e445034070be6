#include "aegis/heartbeat_reader.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace zaya::aegis {

namespace fs = std::filesystem;

void HeartbeatReader::clear(const std::string& archive_dir) {
  const std::string dir = heartbeat_dir(out_dir_);
  if (fs::exists(dir)) {
    if (archive_dir.empty()) {
      fs::remove_all(dir);
    } else {
      fs::remove_all(archive_dir);  // left by an earlier supervision of this run directory
      fs::create_directories(fs::path(archive_dir).parent_path());
      fs::rename(dir, archive_dir);
    }
  }
  offsets_.clear();
}

std::vector<Heartbeat> HeartbeatReader::read_new() {
  std::vector<Heartbeat> beats;
  const fs::path dir = heartbeat_dir(out_dir_);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return beats;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() != ".jsonl") continue;
    const std::string path = entry.path().string();
    std::ifstream in(path, std::ios::binary);
    long long& offset = offsets_[path];
    in.seekg(offset);
    std::string line;
    while (std::getline(in, line)) {
      if (in.eof()) break;  // no newline yet: the writer is mid-line
      offset += (long long)line.size() + 1;
      if (line.empty()) continue;
      const std::string where = path + " byte " + std::to_string(offset);
      nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded()) continue;  // a torn line of a writer that died mid-write
      try {
        beats.push_back(heartbeat_from_json(j, where));
      } catch (const Error& e) {  // a malformed beat must not end the supervision
        std::fprintf(stderr, "aegis: ignoring %s\n", e.what());
      }
    }
  }
  return beats;
}

}  // namespace zaya::aegis
