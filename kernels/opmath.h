// The type a kernel computes in for each storage type: float for half and bfloat (as
// CPU PyTorch's opmath), the storage type otherwise. Shared by the elementwise and
// multi-tensor kernels.
#pragma once
#include <metal_stdlib>
using namespace metal;

template <typename T> struct opmath { typedef T type; };
template <> struct opmath<half> { typedef float type; };
template <> struct opmath<bfloat> { typedef float type; };
