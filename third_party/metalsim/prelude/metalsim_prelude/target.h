// The vector unit this build targets, for kernels that size per-thread register tiles
// by it (as MSL code does by GPU family): bytes per vector register. The simulator's
// "GPU" is the host CPU; a kernel seeing 64 (AVX-512: 32 registers of 16 floats) can
// keep four times the accumulators of an AVX2 build in registers.
//
// Macros only, and nothing else: the build's preprocessor pass over kernel files
// (tools/msl2cpp.cpp) includes this alone, with the target flags of each kernel build,
// so that a kernel's #if on METALSIM_VECTOR_BYTES is decided per build.
#pragma once

#if defined(__AVX512F__)
#define METALSIM_VECTOR_BYTES 64
#elif defined(__AVX__)
#define METALSIM_VECTOR_BYTES 32
#else
#define METALSIM_VECTOR_BYTES 16
#endif
