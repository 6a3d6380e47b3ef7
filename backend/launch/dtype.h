// The element types the copy kernels know, independent of torch (the torch glue maps
// c10::ScalarType onto these). Kept tiny: sizes and the names used in kernel names.
#pragma once

#include <cstddef>
#include <cstdint>

namespace metalx::kernels {

enum class DType : uint8_t {
  Bool,
  UInt8,
  Int8,
  Int16,
  Int32,
  Int64,
  Float16,
  BFloat16,
  Float32,
  Float64,    // stored as IEEE binary64; Metal has no double, kernels use its bits
  Complex64,  // two float32
  Complex128, // two float64
};

constexpr int kNumDTypes = 12;

constexpr bool isValid(DType t) { return static_cast<int>(t) < kNumDTypes; }

constexpr size_t elementSize(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::UInt8:
    case DType::Int8: return 1;
    case DType::Int16:
    case DType::Float16:
    case DType::BFloat16: return 2;
    case DType::Int32:
    case DType::Float32: return 4;
    case DType::Int64:
    case DType::Float64:
    case DType::Complex64: return 8;
    case DType::Complex128: return 16;
  }
  return 0;
}

// The alignment a kernel needs for a buffer offset of this dtype: complex128 is read as
// two 8-byte words, so nothing needs more than 8.
constexpr size_t elementAlignment(DType t) { return elementSize(t) < 8 ? elementSize(t) : 8; }

constexpr bool isComplex(DType t) { return t == DType::Complex64 || t == DType::Complex128; }

// The dtype's part of cast kernel names (kernels/copy.metal documents the scheme).
constexpr const char* kernelTypeName(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::UInt8: return "uchar";
    case DType::Int8: return "char";
    case DType::Int16: return "short";
    case DType::Int32: return "int";
    case DType::Int64: return "long";
    case DType::Float16: return "half";
    case DType::BFloat16: return "bfloat";
    case DType::Float32: return "float";
    case DType::Float64: return "float64";
    case DType::Complex64: return "complex64";
    case DType::Complex128: return "complex128";
  }
  return "?";
}

// The torch name, for messages.
constexpr const char* dtypeName(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::UInt8: return "uint8";
    case DType::Int8: return "int8";
    case DType::Int16: return "int16";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Complex64: return "complex64";
    case DType::Complex128: return "complex128";
  }
  return "?";
}

}  // namespace metalx::kernels
