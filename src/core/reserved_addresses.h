// A range of the process's address space with no memory behind it (mmap PROT_NONE, nothing
// committed): unique addresses that can name things stored elsewhere, and that fault at once if
// anything reads or writes through them. The model's bf16 weight storage uses one for the fp32
// addresses of weights that exist only in bf16 (ParameterPlacement::set_bf16_weight_storage).
#pragma once

#include <cstddef>

namespace zaya {

class ReservedAddresses {
 public:
  ReservedAddresses() = default;
  explicit ReservedAddresses(size_t bytes);  // throws zaya::Error when the system refuses
  ReservedAddresses(ReservedAddresses&& o) noexcept;
  ReservedAddresses& operator=(ReservedAddresses&& o) noexcept;
  ReservedAddresses(const ReservedAddresses&) = delete;
  ReservedAddresses& operator=(const ReservedAddresses&) = delete;
  ~ReservedAddresses() { reset(); }
  void reset() noexcept;
  void* get() const { return p_; }
  size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace zaya
