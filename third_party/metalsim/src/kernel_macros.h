// Expansion of the source's own macros that generate kernels, before translation.
//
// Real Metal code instantiates kernel templates through macros:
//   #define instantiate_norm(T) template [[host_name("norm_" #T)]] [[kernel]] void norm<T>(...);
//   instantiate_norm(float)
// The translator registers the kernels it can see, so every invocation of a
// function-like macro whose body declares a kernel (`kernel`, `[[kernel]]`,
// `host_name`, or another such macro) is expanded in place, as the C preprocessor
// would (parameters, `#` stringizing, `##` pasting, __VA_ARGS__, nested kernel
// macros). Other macros are left to the compiler. The expansion takes one line and
// the lines the invocation spanned follow it, so line numbers do not move.
#pragma once

#include <string>

namespace metalsim {

std::string expandKernelMacros(const std::string& source);

}  // namespace metalsim
