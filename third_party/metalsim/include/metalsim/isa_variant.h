// Included first by a translated kernel file compiled for an instruction-set level
// other than the baseline (the wrappers metalsim_kernel_library generates), with
// METALSIM_ISA_VARIANT naming the level.
//
// The baseline object and this one are compiled from the same source with different
// target flags and linked into one image. Every inline function, template and inline
// variable they both define would be one weak symbol, and the linker keeps one copy:
// baseline code could end up calling an AVX2 copy on a CPU without AVX2. So in this
// translation unit the prelude's namespaces (`metal`, `metalsim`) are renamed, and the
// wrapper puts the kernel source in a namespace of its own; only the registration
// entry (renamed by the wrapper) is shared by name. The test
// `metalsim_isa_objects_are_isolated` checks the objects' symbols.
#pragma once

#ifndef METALSIM_ISA_VARIANT
#error "define METALSIM_ISA_VARIANT before including metalsim/isa_variant.h"
#endif

#define METALSIM_ISA_PASTE_(a, b, c) a##b##c
#define METALSIM_ISA_PASTE(a, b, c) METALSIM_ISA_PASTE_(a, b, c)
#define metal METALSIM_ISA_PASTE(metalsim_isa_, METALSIM_ISA_VARIANT, _metal)
#define metalsim METALSIM_ISA_PASTE(metalsim_isa_, METALSIM_ISA_VARIANT, _rt)

#include "metalsim_prelude/glue.h"
#include "metal_stdlib"
