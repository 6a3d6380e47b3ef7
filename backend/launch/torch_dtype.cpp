// torch's dtypes as the kernels name them (see torch_dtype.h).
#include "launch/torch_dtype.h"

namespace metalx::launch {

std::optional<kernels::DType> storageDtype(c10::ScalarType t) {
  using kernels::DType;
  switch (t) {
    case c10::ScalarType::Bool: return DType::Bool;
    case c10::ScalarType::Byte: return DType::UInt8;
    case c10::ScalarType::Char: return DType::Int8;
    case c10::ScalarType::Short: return DType::Int16;
    case c10::ScalarType::Int: return DType::Int32;
    case c10::ScalarType::Long: return DType::Int64;
    case c10::ScalarType::Half: return DType::Float16;
    case c10::ScalarType::BFloat16: return DType::BFloat16;
    case c10::ScalarType::Float: return DType::Float32;
    case c10::ScalarType::Double: return DType::Float64;
    case c10::ScalarType::ComplexFloat: return DType::Complex64;
    case c10::ScalarType::ComplexDouble: return DType::Complex128;
    default: return std::nullopt;
  }
}

std::optional<kernels::DType> bitsDtype(size_t element_size) {
  using kernels::DType;
  switch (element_size) {
    case 1: return DType::UInt8;
    case 2: return DType::Int16;
    case 4: return DType::Int32;
    case 8: return DType::Int64;
    default: return std::nullopt;
  }
}

}  // namespace metalx::launch
