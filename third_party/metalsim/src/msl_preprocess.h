// The C preprocessor pass over MSL that Apple's compiler does first: includes of the
// kernel's own folder resolved and macros expanded (kernels stamp out their
// instantiations and parameter lists with macros), with the prelude's target.h standing
// in for the Metal headers. The host C++ compiler does the work.
#pragma once

#include <string>
#include <vector>

namespace metalsim {

// `source` (read from `path`, whose folder is searched for "..." includes) through
// `cpp -E` with `flags`; `scratch` is a path prefix for temporary files. Linemarkers
// name `path`. Throws std::runtime_error when preprocessing fails.
std::string preprocessMsl(const std::string& source, const std::string& path, const std::string& cpp,
                          const std::string& prelude, const std::vector<std::string>& flags,
                          const std::string& scratch);

}  // namespace metalsim
