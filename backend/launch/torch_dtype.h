// torch's dtypes as the kernels name them (launch/dtype.h): the one mapping every
// launcher and the copy path use.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstddef>
#include <optional>

#include "launch/dtype.h"

namespace metalx::launch {

// Every dtype device memory can hold (copies move float64 and complex as bits), or
// nullopt for the rest (quantized, float8, ...).
std::optional<kernels::DType> storageDtype(c10::ScalarType t);

// The unsigned-or-signed integer kernel type of `element_size` bytes (1, 2, 4, 8), or
// nullopt: kernels that only move or test bits have one instantiation per element size
// and serve every dtype of that size through it.
std::optional<kernels::DType> bitsDtype(size_t element_size);

}  // namespace metalx::launch
