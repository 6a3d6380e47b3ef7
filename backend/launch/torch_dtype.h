// torch's dtypes as the kernels name them (launch/dtype.h): the one mapping every
// launcher and the copy path use.
#pragma once

#include <c10/core/ScalarType.h>

#include <optional>

#include "launch/dtype.h"

namespace metalx::launch {

// Every dtype device memory can hold (copies move float64 and complex as bits), or
// nullopt for the rest (quantized, float8, ...).
std::optional<kernels::DType> storageDtype(c10::ScalarType t);

}  // namespace metalx::launch
