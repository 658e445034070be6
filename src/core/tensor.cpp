#include "core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "core/error.h"

namespace zaya {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32:
      return 4;
    case DType::BF16:
      return 2;
    case DType::I32:
      return 4;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "F32";
    case DType::BF16:
      return "BF16";
    case DType::I32:
      return "I32";
  }
  return "?";
}

uint16_t f32_to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);                                         // round to nearest even
  return uint16_t(u >> 16);
}

float bf16_to_f32(uint16_t x) {
  const uint32_t u = uint32_t(x) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

namespace {
// False on a negative dimension or a product past int64.
bool numel_fits(const Shape& s, int64_t& n) {
  n = 1;
  for (int64_t d : s)
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return false;
  return true;
}
}  // namespace

int64_t shape_numel(const Shape& s) {
  int64_t n = 0;
  ZAYA_CHECK(numel_fits(s, n), "tensor shape ", shape_str(s),
             ": negative dimension or more than 2^63 elements");
  return n;
}

int64_t shape_numel(const Shape& s, const std::string& where) {
  int64_t n = 0;
  ZAYA_CHECK(numel_fits(s, n), where, ": shape ", shape_str(s),
             " has a negative dimension or more than 2^63 elements");
  return n;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

Storage::Storage(size_t bytes) : bytes_(bytes) {
  const size_t rounded = (bytes + 63) / 64 * 64;
  data_ = static_cast<std::byte*>(std::aligned_alloc(64, rounded ? rounded : 64));
  if (!data_) throw std::bad_alloc();
  std::memset(data_, 0, rounded ? rounded : 64);
}

Storage::~Storage() {
  std::free(data_);
}

Tensor::Tensor(Shape shape, DType dtype, Device device)
    : shape_(std::move(shape)), dtype_(dtype), device_(device) {
  ZAYA_CHECK(device == Device::CPU, "Tensor: only CPU storage is implemented in this build");
  for (int64_t d : shape_)
    ZAYA_CHECK(d >= 0, "Tensor: negative dimension in shape ", shape_str(shape_));
  storage_ = std::make_shared<Storage>(nbytes());
}

Tensor::Tensor(std::shared_ptr<Storage> storage, size_t offset, Shape shape, DType dtype)
    : storage_(std::move(storage)), offset_(offset), shape_(std::move(shape)), dtype_(dtype) {
  ZAYA_CHECK(offset_ + nbytes() <= storage_->bytes(), "Tensor view ", shape_str(shape_),
             " at byte ", offset_, " runs past its storage of ", storage_->bytes(), " bytes");
}

int64_t Tensor::dim(int i) const {
  ZAYA_CHECK(i >= 0 && i < ndim(), "Tensor::dim(", i, ") on a tensor of shape ", shape_str(shape_));
  return shape_[i];
}

std::byte* Tensor::raw() const {
  ZAYA_CHECK(storage_, "use of an undefined Tensor");
  return storage_->data() + offset_;
}

Tensor Tensor::reshape(Shape shape) const {
  ZAYA_CHECK(shape_numel(shape) == numel(), "reshape from ", shape_str(shape_), " to ",
             shape_str(shape), " changes the element count");
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::slice(int64_t begin, int64_t end) const {
  ZAYA_CHECK(ndim() >= 1 && begin >= 0 && begin <= end && end <= shape_[0], "slice [", begin, ", ",
             end, ") out of range for shape ", shape_str(shape_));
  Tensor t = *this;
  const int64_t row = numel() / (shape_[0] ? shape_[0] : 1);
  t.offset_ += size_t(begin * row) * dtype_size(dtype_);
  t.shape_[0] = end - begin;
  return t;
}

Tensor Tensor::clone() const {
  Tensor t(shape_, dtype_);
  std::memcpy(t.raw(), raw(), nbytes());
  return t;
}

Tensor Tensor::to_dtype(DType to) const {
  if (to == dtype_) return clone();
  Tensor t(shape_, to);
  const int64_t n = numel();
  if (dtype_ == DType::F32 && to == DType::BF16) {
    const float* src = data<float>();
    uint16_t* dst = t.data<uint16_t>();
    for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
  } else if (dtype_ == DType::BF16 && to == DType::F32) {
    const uint16_t* src = data<uint16_t>();
    float* dst = t.data<float>();
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
  } else {
    ZAYA_FAIL("Tensor::to_dtype: no conversion from ", dtype_name(dtype_), " to ", dtype_name(to));
  }
  return t;
}

}  // namespace zaya
