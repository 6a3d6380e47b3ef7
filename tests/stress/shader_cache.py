"""compile_shader from several processes at once, sharing one on-disk kernel cache
(the simulator's METALSIM_CACHE_DIR), then again after cache entries are corrupted.
Each process compiles the same sources in its own order, so compiles of one source
race; every kernel's result is checked against CPU torch.

Run as a script, it is one such process (`--child`)."""

import argparse
import os
import random
import subprocess
import sys
import tempfile

SOURCE = """#include <metal_stdlib>
using namespace metal;
kernel void scale_shift_{k}(device float* out [[buffer(0)]], const device float* x [[buffer(1)]],
                           uint i [[thread_position_in_grid]]) {{
  out[i] = x[i] * {scale}.0f + ({shift}.0f);
}}
"""


def source(k):
    return SOURCE.format(k=k, scale=k + 2, shift=-k)


def child(sources, seed):
    import torch

    order = list(range(sources))
    random.Random(seed).shuffle(order)
    failures = 0
    for k in order:
        library = torch.metalx.compile_shader(source(k))
        x = torch.randn(513)
        out = torch.empty(513, device="metalx")
        getattr(library, f"scale_shift_{k}")(out, x.to("metalx"))
        if not torch.equal(out.cpu(), x * (k + 2) - k):
            print(f"kernel {k}: wrong result", file=sys.stderr)
            failures += 1
    return failures


def _run_processes(count, sources, cache_dir, seed):
    env = dict(os.environ, METALSIM_CACHE_DIR=cache_dir)
    if env.get("METALSIM_SHADER_VALIDATION") == "all":
        # The phase is about user shaders in the cache: the built-in kernels compiled from
        # source (validation of everything) would fill the fresh cache first, in every process.
        env["METALSIM_SHADER_VALIDATION"] = "1"
    procs = [
        subprocess.Popen([sys.executable, __file__, "--child", "--sources", str(sources), "--seed", str(seed + i)],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for i in range(count)
    ]
    outputs = [p.communicate(timeout=900)[0] for p in procs]
    return [(p.returncode, out) for p, out in zip(procs, outputs)]


def _corrupt(cache_dir):
    """Garbles one compiled object and truncates one stored source; returns how many."""
    entries = sorted(os.listdir(cache_dir))
    objects = [e for e in entries if e.endswith(".so")]
    stored = [e for e in entries if e.endswith(".cpp")]
    corrupted = 0
    if objects:
        with open(os.path.join(cache_dir, objects[0]), "wb") as f:
            f.write(b"\x7fELF not really a shared object")
        corrupted += 1
    if len(stored) > 1:
        path = os.path.join(cache_dir, stored[1])
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 2)
        corrupted += 1
    return corrupted


def run(processes, sources, seed, tally):
    with tempfile.TemporaryDirectory(prefix="metalx-stress-cache-") as cache_dir:
        for phase in ("cold cache", "after corruption"):
            if phase == "after corruption":
                tally.count("corrupted cache entries", _corrupt(cache_dir))
            for code, output in _run_processes(processes, sources, cache_dir, seed):
                if code != 0:
                    tally.error(f"compile_shader ({phase})", f"a process exited with {code}: {output[-2000:]}")
                else:
                    tally.count("compile_shader kernels checked", sources)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", action="store_true", required=True)
    parser.add_argument("--sources", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sys.exit(1 if child(args.sources, args.seed) else 0)
