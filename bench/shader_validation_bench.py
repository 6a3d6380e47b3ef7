"""Cost of the simulator's shader validation and kernel watchdog on compile_shader kernels.

    python bench/shader_validation_bench.py [--out bench/results/shader-validation-sim-<os>-<arch>.json]
                                            [--reps R] [--calls N]

Both are read once per process, so each configuration runs in its own child: checks
off (METALSIM_SHADER_VALIDATION=0, METALSIM_KERNEL_TIMEOUT_S=0: the baseline), the
watchdog alone, validation alone, and both (the default). Each child compiles the same
kernels and reports, per kernel, the median over R rounds of N calls (each round ends
with a synchronize) in microseconds per call. Rows give each configuration's time as a
ratio to the baseline measured in the same run.

A last row times compiling the source (a disk cache miss).

Kernels: an elementwise a*x+b over 1M floats (one checked load and store per thread),
a row sum looping over 256 elements per thread (a checked load and a loop check per
iteration), and a float4 copy through cast pointers (checked vector accesses).
"""

import argparse
import json
import os
import platform
import subprocess
import sys

CONFIGS = {
    "off": {"METALSIM_SHADER_VALIDATION": "0", "METALSIM_KERNEL_TIMEOUT_S": "0"},
    "watchdog": {"METALSIM_SHADER_VALIDATION": "0", "METALSIM_KERNEL_TIMEOUT_S": "10"},
    "validation": {"METALSIM_SHADER_VALIDATION": "1", "METALSIM_KERNEL_TIMEOUT_S": "0"},
    "both (default)": {"METALSIM_SHADER_VALIDATION": "1", "METALSIM_KERNEL_TIMEOUT_S": "10"},
}

CHILD = r'''
import json, os, statistics, sys, time
import torch
import metalx  # noqa: F401
from metalx import shaders as S
reps, calls = int(sys.argv[1]), int(sys.argv[2])
SOURCE = """
#include <metal_stdlib>
using namespace metal;
kernel void axpb(device float* out [[buffer(0)]], const device float* x [[buffer(1)]],
                 constant float& a [[buffer(2)]], constant float& b [[buffer(3)]],
                 uint i [[thread_position_in_grid]]) {
  out[i] = x[i] * a + b;
}
kernel void row_sum(device float* out [[buffer(0)]], const device float* x [[buffer(1)]],
                    constant uint& cols [[buffer(2)]], uint r [[thread_position_in_grid]]) {
  const device float* row = x + r * cols;
  float s = 0;
  for (uint k = 0; k < cols; ++k) s += row[k];
  out[r] = s;
}
kernel void copy4(device float* out [[buffer(0)]], const device float* x [[buffer(1)]],
                  uint i [[thread_position_in_grid]]) {
  device float4* o = (device float4*)out;
  const device float4* v = (const device float4*)x;
  o[i] = v[i];
}
"""
# A compile the disk cache cannot serve (a fresh comment), timed: the checks also make
# the translated source longer.
t = time.perf_counter()
lib = torch.metalx.compile_shader(SOURCE + "// %d %f\n" % (os.getpid(), time.time()))
compile_ms = (time.perf_counter() - t) * 1e3
n = 1 << 20
x = torch.randn(n, device="metalx")
out = torch.empty(n, device="metalx")
sums = torch.empty(n // 256, device="metalx")
cases = {
    "axpb 1M floats": lambda: lib.axpb(out, x, 2.0, 1.0, threads=n, group_size=256),
    "row_sum 4096x256 (loop per thread)": lambda: lib.row_sum(sums, x, S.UInt32(256), threads=n // 256, group_size=64),
    "copy4 1M floats as float4": lambda: lib.copy4(out, x, threads=n // 4, group_size=256),
}
result = {}
for name, fn in cases.items():
    fn(); torch.metalx.synchronize()
    rounds = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.metalx.synchronize()
        rounds.append((time.perf_counter() - t) / calls * 1e6)
    result[name] = statistics.median(rounds)
result["compile_shader of these kernels, cache miss (us)"] = compile_ms * 1e3
print(json.dumps(result))
'''


def run_config(env_overrides, reps, calls):
    env = dict(os.environ)
    env.update(env_overrides)
    out = subprocess.run([sys.executable, "-c", CHILD, str(reps), str(calls)], env=env, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    times = {name: run_config(env, args.reps, args.calls) for name, env in CONFIGS.items()}
    rows = []
    for kernel, base in times["off"].items():
        row = {"kernel": kernel, "off_us": base}
        for name in CONFIGS:
            if name != "off":
                row[f"{name}_us"] = times[name][kernel]
                row[f"{name}_ratio"] = times[name][kernel] / base
        rows.append(row)
        print(f"{kernel:40s} off {base:9.1f} us  " +
              "  ".join(f"{n} x{row[f'{n}_ratio']:.2f}" for n in CONFIGS if n != "off"))
    report = {
        "driver": "sim",
        "machine": platform.machine(),
        "threads": os.cpu_count(),
        "load_average": list(os.getloadavg()),
        "reps": args.reps,
        "calls_per_rep": args.calls,
        "baseline": "same kernels with METALSIM_SHADER_VALIDATION=0 METALSIM_KERNEL_TIMEOUT_S=0, same run",
        "results": rows,
    }
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
