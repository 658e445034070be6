#include "data/prepare_report.h"

namespace zaya {

using nlohmann::json;

namespace {

json skipped_json(const FileReport& r, bool with_zeros) {
  json s = json::object();
  for (int k = 1; k < kBadRecordKinds; ++k)
    if (with_zeros || r.skipped[size_t(k)] > 0)
      s[bad_record_name(BadRecord(k))] = r.skipped[size_t(k)];
  return s;
}

json dropped_json(const FileReport& r) {
  return {{"empty", r.empty}, {"too_short", r.too_short}, {"duplicate", r.duplicates}};
}

json counts_json(const FileReport& r) {
  return {{"documents", r.documents},
          {"tokens", r.tokens},
          {"content_bytes", r.content_bytes},
          {"file_bytes", r.file_bytes},
          {"tokens_per_byte", r.content_bytes ? double(r.tokens) / double(r.content_bytes) : 0.0},
          {"dropped", dropped_json(r)}};
}

}  // namespace

PrepareReport::PrepareReport(const std::vector<std::string>& files) {
  for (const auto& f : files) files_.push_back(FileReport{.path = f});
}

FileReport PrepareReport::total() const {
  FileReport t;
  for (const FileReport& f : files_) {
    t.file_bytes += f.file_bytes;
    t.content_bytes += f.content_bytes;
    t.documents += f.documents;
    t.tokens += f.tokens;
    for (size_t k = 0; k < t.skipped.size(); ++k) t.skipped[k] += f.skipped[k];
    t.empty += f.empty;
    t.too_short += f.too_short;
    t.duplicates += f.duplicates;
  }
  return t;
}

json PrepareReport::to_json() const {
  const FileReport t = total();
  json j = counts_json(t);
  j["skipped"] = skipped_json(t, true);
  json files = json::array();
  for (const FileReport& f : files_) {
    json fj = counts_json(f);
    fj["path"] = f.path;
    fj["format"] = input_format_name(f.format);
    fj["compression"] = compression_name(f.compression);
    fj["skipped"] = skipped_json(f, false);
    files.push_back(std::move(fj));
  }
  j["files"] = std::move(files);
  return j;
}

std::string PrepareReport::dropped_summary() const {
  const FileReport t = total();
  std::string out;
  for (int k = 1; k < kBadRecordKinds; ++k)
    if (t.skipped[size_t(k)] > 0)
      out += "  skipped " + std::to_string(t.skipped[size_t(k)]) +
             " record(s): " + bad_record_name(BadRecord(k)) + "\n";
  if (t.empty) out += "  dropped " + std::to_string(t.empty) + " empty document(s)\n";
  if (t.too_short)
    out += "  dropped " + std::to_string(t.too_short) + " document(s) under --min-chars\n";
  if (t.duplicates)
    out += "  dropped " + std::to_string(t.duplicates) + " duplicate document(s) (--dedup exact)\n";
  return out;
}

}  // namespace zaya
