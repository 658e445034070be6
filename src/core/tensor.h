// Tensor: a shape and dtype over shared, owned storage. Views (slices of the outermost dimension,
// reshapes, flat sub-ranges) share the storage with the tensor they came from; the storage lives
// as long as any view does. Compute kernels take plain pointers (`data<float>()`) and sizes, like
// llm.c; this type is for ownership, naming and I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace zaya {

enum class DType : uint8_t { F32, BF16, I32 };
enum class Device : uint8_t { CPU, CUDA };

size_t dtype_size(DType t);
const char* dtype_name(DType t);  // "F32", "BF16", "I32" (the safetensors spelling)

// bf16 <-> f32. Rounding is to nearest, ties to even; NaN stays NaN.
uint16_t f32_to_bf16(float x);
float bf16_to_f32(uint16_t x);

using Shape = std::vector<int64_t>;
int64_t shape_numel(const Shape& s);
// The same for a shape read from a file: `where` (FILE: tensor 'NAME') begins the message.
int64_t shape_numel(const Shape& s, const std::string& where);
std::string shape_str(const Shape& s);  // "[2, 3]"

// 64-byte aligned, zero-initialised host memory.
class Storage {
 public:
  explicit Storage(size_t bytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  std::byte* data() { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  std::byte* data_ = nullptr;
  size_t bytes_ = 0;
};

class Tensor {
 public:
  Tensor() = default;
  // A new zero-filled tensor.
  Tensor(Shape shape, DType dtype, Device device = Device::CPU);
  // A view of `storage` from byte `offset` (used by parameter registries over one flat buffer).
  Tensor(std::shared_ptr<Storage> storage, size_t offset, Shape shape, DType dtype);

  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const;
  int ndim() const { return int(shape_.size()); }
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool defined() const { return storage_ != nullptr; }

  template <typename T>
  T* data() const {
    return reinterpret_cast<T*>(raw());
  }
  std::byte* raw() const;

  // Same data, new shape with the same element count.
  Tensor reshape(Shape shape) const;
  // Rows [begin, end) of the outermost dimension.
  Tensor slice(int64_t begin, int64_t end) const;
  // A deep copy with its own storage.
  Tensor clone() const;
  // Converted copy (F32 <-> BF16); a clone when the dtype is already `to`.
  Tensor to_dtype(DType to) const;

 private:
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;
  Shape shape_;
  DType dtype_ = DType::F32;
  Device device_ = Device::CPU;
};

}  // namespace zaya
