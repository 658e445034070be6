// The weights a product reads and the weight gradients its backward adds into, with the type of
// their elements: fp32, or bf16 (the model's bf16 weight storage and gradients, and the bf16 copy
// of fp32 weights that a backend with bf16 products reads; model/parameter_placement.h). The type
// travels with the pointer, so an op never guesses what an address holds, and two models on one
// backend each pass their own. Both live in the backend's memory, like every operand.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/error.h"

namespace zaya {

enum class ElementType : uint8_t { kF32, kBf16 };

inline const char* element_type_name(ElementType t) {
  return t == ElementType::kBf16 ? "bf16" : "fp32";
}

// Weights an op reads. An fp32 pointer converts implicitly (the ops' fp32 callers are the usual
// case); bf16 values are named with WeightRef::bf16.
class WeightRef {
 public:
  WeightRef() = default;
  WeightRef(const float* values) : data_(values) {}  // NOLINT(google-explicit-constructor)
  static WeightRef bf16(const uint16_t* values) { return WeightRef(values, ElementType::kBf16); }

  ElementType type() const { return type_; }
  bool is_bf16() const { return type_ == ElementType::kBf16; }
  bool empty() const { return data_ == nullptr; }
  // The values, of the type they are (the other type throws zaya::Error, naming `what`).
  const float* f32(const char* what = "weights") const {
    ZAYA_CHECK(type_ == ElementType::kF32, what, ": expected fp32 values, got bf16");
    return static_cast<const float*>(data_);
  }
  const uint16_t* bf16_values(const char* what = "weights") const {
    ZAYA_CHECK(type_ == ElementType::kBf16, what, ": expected bf16 values, got fp32");
    return static_cast<const uint16_t*>(data_);
  }
  // The weights `elements` further on (a row block of a matrix, an expert of a stack).
  WeightRef at(size_t elements) const {
    if (data_ == nullptr) return *this;
    return is_bf16() ? bf16(bf16_values() + elements) : WeightRef(f32() + elements);
  }

 private:
  WeightRef(const void* data, ElementType type) : data_(data), type_(type) {}
  const void* data_ = nullptr;
  ElementType type_ = ElementType::kF32;
};

// Weight gradients an op adds into: fp32, or bf16 (each product's fp32 result added with one
// rounding per element). Empty: the op skips that gradient, as with a nullptr float*.
class GradRef {
 public:
  GradRef() = default;
  GradRef(float* values) : data_(values) {}  // NOLINT(google-explicit-constructor)
  GradRef(std::nullptr_t) {}                 // NOLINT(google-explicit-constructor)
  static GradRef bf16(uint16_t* values) { return GradRef(values, ElementType::kBf16); }

  ElementType type() const { return type_; }
  bool is_bf16() const { return type_ == ElementType::kBf16; }
  bool empty() const { return data_ == nullptr; }
  float* f32(const char* what = "gradients") const {
    ZAYA_CHECK(type_ == ElementType::kF32, what, ": expected fp32 values, got bf16");
    return static_cast<float*>(data_);
  }
  uint16_t* bf16_values(const char* what = "gradients") const {
    ZAYA_CHECK(type_ == ElementType::kBf16, what, ": expected bf16 values, got fp32");
    return static_cast<uint16_t*>(data_);
  }
  GradRef at(size_t elements) const {
    if (data_ == nullptr) return *this;
    return is_bf16() ? bf16(bf16_values() + elements) : GradRef(f32() + elements);
  }

 private:
  GradRef(void* data, ElementType type) : data_(data), type_(type) {}
  void* data_ = nullptr;
  ElementType type_ = ElementType::kF32;
};

}  // namespace zaya
