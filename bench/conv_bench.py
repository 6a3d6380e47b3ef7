"""conv2d on metalx against CPU torch, measured in one run.

    python bench/conv_bench.py [--out bench/results/conv-<driver>-<os>-<arch>.json] [--reps N]

ResNet-style shapes at N=8 (float32, NCHW): forward, and backward (input + weight +
bias gradients of one conv2d) timed separately. CPU torch runs with
torch.set_num_threads(2) (the simulator also uses the machine's cores). Reports times,
GFLOP/s (2 * MACs / time; backward counts the two gradient convolutions) and the ratio
CPU time / metalx time (target: >= 0.5). The machine's load average before and after
the run is recorded too: on a shared machine both sides slow down, CPU torch (whose
two threads wait for each other) far more than the simulator, so ratios measured
under load flatter metalx; compare runs made when the machine was quiet.
"""

import argparse
import os
import time

import torch
import torch.nn.functional as F

from report import write_results

SHAPES = [
    # name, cin, cout, hw, k, stride, groups
    ("64ch@56x56 3x3", 64, 64, 56, 3, 1, 1),
    ("128ch@28x28 3x3", 128, 128, 28, 3, 1, 1),
    ("256ch@14x14 3x3", 256, 256, 14, 3, 1, 1),
    ("1x1 64->256 @56x56", 64, 256, 56, 1, 1, 1),
    ("1x1 256->512 s2 @28x28", 256, 512, 28, 1, 2, 1),
    ("depthwise 3x3 128ch@28x28", 128, 128, 28, 3, 1, 128),
]
N = 8


def timed(fn, reps, sync, min_seconds=0.25):
    """Best of at least `reps` timed runs (after a warm-up), and of as many more as fit
    in `min_seconds`: the machine is shared, and the best run is the one least
    disturbed by other processes, for both sides; sub-millisecond cases need many runs
    for that minimum to mean anything."""
    fn()
    sync()
    samples = []
    begin = time.perf_counter()
    while len(samples) < reps or time.perf_counter() - begin < min_seconds:
        start = time.perf_counter()
        fn()
        sync()
        samples.append(time.perf_counter() - start)
    return min(samples)


def case(device, cin, cout, hw, k, stride, groups, reps):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N, cin, hw, hw, generator=g).to(device).requires_grad_()
    w = (torch.randn(cout, cin // groups, k, k, generator=g) * 0.05).to(device).requires_grad_()
    b = torch.randn(cout, generator=g).to(device).requires_grad_()
    pad = k // 2
    sync = torch.metalx.synchronize if device == "metalx" else (lambda: None)
    with torch.no_grad():
        fwd = timed(lambda: F.conv2d(x, w, b, stride=stride, padding=pad, groups=groups), reps, sync)
    out = F.conv2d(x, w, b, stride=stride, padding=pad, groups=groups)
    go = torch.ones_like(out)
    bwd = timed(lambda: torch.autograd.grad(out, [x, w, b], go, retain_graph=True), reps, sync)
    macs = N * cout * out.shape[2] * out.shape[3] * (cin // groups) * k * k
    return fwd, bwd, macs


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(2)
    load_before = os.getloadavg()
    rows = []
    print(f"{'shape':28} {'pass':4} {'metalx ms':>10} {'cpu ms':>9} {'mx GF/s':>8} {'cpu GF/s':>8} {'ratio':>6}")
    for name, cin, cout, hw, k, stride, groups in SHAPES:
        m_f, m_b, macs = case("metalx", cin, cout, hw, k, stride, groups, args.reps)
        c_f, c_b, _ = case("cpu", cin, cout, hw, k, stride, groups, args.reps)
        for pas, m, c, flops in (("fwd", m_f, c_f, 2 * macs), ("bwd", m_b, c_b, 4 * macs)):
            r = dict(shape=name, pass_=pas, metalx_ms=m * 1e3, cpu_ms=c * 1e3, metalx_gflops=flops / m / 1e9,
                     cpu_gflops=flops / c / 1e9, ratio=c / m, target=">= 0.5", met=c / m >= 0.5)
            rows.append(r)
            print(f"{name:28} {pas:4} {r['metalx_ms']:10.1f} {r['cpu_ms']:9.1f} {r['metalx_gflops']:8.2f} "
                  f"{r['cpu_gflops']:8.2f} {r['ratio']:6.2f}", flush=True)
    if args.out:
        write_results(args.out, load_before, rows, n=N)


if __name__ == "__main__":
    main()
