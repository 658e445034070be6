// The emulated device's memory: every cudaMalloc is a host allocation of exactly the bytes asked
// (no rounding, no reuse of freed blocks), so AddressSanitizer catches a kernel that reads or
// writes past a buffer, and a registry of the live ones, so a kernel argument or a copy that
// points outside every allocation (a host pointer, a freed block) is refused by name.
#pragma once

#include <cstddef>
#include <string>

namespace zaya::emu {

void* device_allocate(size_t bytes);
// False when p is not the start of a live allocation.
bool device_release(void* p);
// The live allocation holding [p, p + bytes) (bytes 0: p may be its end), or false.
bool device_range(const void* p, size_t bytes, const void** begin = nullptr,
                  size_t* size = nullptr);
size_t device_bytes_in_use();
// A range of device memory not from device_allocate (the virtual memory's reservations,
// backend/cuda/virtual_memory.cu): kernels and copies may point into it; not counted in use.
void register_device_range(void* p, size_t bytes);
void unregister_device_range(void* p);
// Throws zaya::Error "WHAT: [p, p + bytes) is not inside a device allocation (...)".
void require_device_range(const void* p, size_t bytes, const std::string& what);

}  // namespace zaya::emu
