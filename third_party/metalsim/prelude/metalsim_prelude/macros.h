// The predefined macros of Apple's Metal compiler and <metal_stdlib>, as a kernel
// tests them: `#ifdef __METAL__`, `#if __METAL_VERSION__ >= 310`, `METAL_FUNC`.
// The simulator compiles MSL 3.1 (macOS 14, the minimum metalx supports).
#pragma once

#define __METAL__ 1
#define __METAL_VERSION__ 310
#define __METAL_MACOS__ 1
#define __HAVE_BFLOAT__ 1
#define __HAVE_SIMDGROUP_FUNCTIONS__ 1
// Attribute spellings <metal_stdlib> uses for its own functions.
#define METAL_FUNC inline __attribute__((__always_inline__))
#define METAL_INTERNAL
#define METAL_ASM
#define METAL_CONST
#define METAL_PURE
#define METAL_NORETURN [[noreturn]]
#define METAL_ENABLE_IF(...)
#define METAL_CONST_ARG(...)
