// File-system helpers of the checkpoint writer and reader (internal to src/ckpt).
#pragma once

#include <cstdint>
#include <string>

namespace zaya::ckpt_fs {

// fsync of a file or directory, so a rename that follows publishes durable data.
void sync_path(const std::string& path);
// Writes text to path and fsyncs it.
void write_synced(const std::string& path, const std::string& text);
std::string read_all(const std::string& path);
// FNV-1a 64 of a whole file and its size in bytes.
uint64_t file_checksum(const std::string& path, uint64_t* bytes);

}  // namespace zaya::ckpt_fs
