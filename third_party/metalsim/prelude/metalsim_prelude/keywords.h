// MSL keywords with no C++ meaning in the simulator, defined away.
//
// Included LAST by metal_stdlib: once `thread` or `device` is a macro, any standard
// header included afterwards breaks (libstdc++ uses `thread` as an identifier), so the
// prelude includes every standard header it needs before this point, and translated
// shaders must not include standard headers themselves.
//
// Address spaces (device, constant, threadgroup, thread) only say where memory lives;
// in the simulator it is all ordinary host memory. `kernel` marks an entry point, whose
// wrapper the translator generates.
//
// NOTE: `kernel` as a macro also rewrites the namespace name in `metalsim::kernel::x`
// written after this header; such code must use metalsim::kernel_rt::x (an alias
// declared in host.h) or #undef kernel first. See README.md.
#pragma once

#define kernel
#define device
#define constant const
#define threadgroup
#define thread
#define threadgroup_imageblock
