"""Training steps of three real model shapes on metalx against CPU torch, in one run:
a ResNet-style CNN (conv, batch norm, ReLU, max/adaptive-avg pooling, linear,
cross-entropy, SGD with momentum), a Transformer language model (embedding, positional
add, attention, layer norm, GELU, dropout, cross-entropy, AdamW) and an LSTM model
(embedding, LSTM, linear, cross-entropy, Adam).

    python bench/models_bench.py [--out bench/results/models-<driver>-<os>-<arch>.json] [--steps N]

For each model:
  - correctness: the same initial weights and batches on both devices, dropout off,
    three steps; the losses of every step and the gradients of the last one are
    compared with CPU's (relative error recorded);
  - fallback: the aten ops of one training step that ran on the CPU fallback
    (torch.metalx.fallback_stats() around a step), and the share of the step's calls
    that ran natively, in float32 and under autocast (float16 and bfloat16);
  - speed: the best of --steps timed steps each (dropout on, as in training; the step
    ends when the device has finished), ratio = CPU step time / metalx step time.
CPU torch runs with torch.set_num_threads(2), the cores the simulator uses.
"""

import argparse
import json
import os
import platform
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode


class ResidualBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.bn2(self.conv2(y)))


class SmallResNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
                                  nn.MaxPool2d(2))
        self.blocks = nn.Sequential(ResidualBlock(32), ResidualBlock(32))
        self.head = nn.Linear(32, classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class TinyLM(nn.Module):
    def __init__(self, vocab=96, d=128, heads=4, layers=2, seq=64, dropout=0.1):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(seq, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=dropout, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        x = self.tok(idx) + self.pos[: idx.shape[1]]
        mask = nn.Transformer.generate_square_subsequent_mask(idx.shape[1], device=idx.device)
        return self.head(self.norm(self.encoder(x, mask=mask, is_causal=True)))


class LSTMModel(nn.Module):
    def __init__(self, vocab=96, d=64, hidden=128):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.lstm = nn.LSTM(d, hidden, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, idx):
        out, _ = self.lstm(self.tok(idx))
        return self.head(out)


def batches(kind, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        if kind == "cnn":
            out.append((torch.randn(16, 3, 32, 32, generator=g), torch.randint(0, 10, (16,), generator=g)))
        else:
            seq = torch.randint(0, 96, (8, 65), generator=g)
            out.append((seq[:, :-1], seq[:, 1:]))
    return out


MODELS = {
    "resnet_cnn": (lambda dropout: SmallResNet(), "cnn", lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)),
    "transformer_lm": (lambda dropout: TinyLM(dropout=dropout), "lm", lambda p: torch.optim.AdamW(p, lr=1e-3)),
    "lstm_lm": (lambda dropout: LSTMModel(), "lm", lambda p: torch.optim.Adam(p, lr=1e-3)),
}


def make(name, device, dropout):
    factory, kind, optimizer = MODELS[name]
    torch.manual_seed(0)
    model = factory(dropout).to(device)
    return model, optimizer(model.parameters()), kind


def step(model, opt, x, y, autocast_dtype=None):
    opt.zero_grad(set_to_none=True)
    device = x.device.type
    with torch.autocast(device, dtype=autocast_dtype, enabled=autocast_dtype is not None):
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1))
    loss.backward()
    opt.step()
    return loss


def rel_err(a, b):
    a, b = a.detach().cpu().double(), b.detach().cpu().double()
    return float((a - b).norm() / b.norm().clamp_min(1e-12))


def correctness(name):
    data = batches(MODELS[name][1], 3)
    losses, grads = {}, {}
    for device in ("cpu", "metalx"):
        model, opt, _ = make(name, device, dropout=0.0)
        model.train()
        losses[device] = [step(model, opt, x.to(device), y.to(device)).item() for x, y in data]
        grads[device] = [p.grad for p in model.parameters()]
    loss_err = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(losses["metalx"], losses["cpu"]))
    grad_err = max(rel_err(a, b) for a, b in zip(grads["metalx"], grads["cpu"]))
    return {"losses_cpu": losses["cpu"], "losses_metalx": losses["metalx"], "max_loss_rel_err": loss_err,
            "max_grad_rel_err": grad_err}


class CallCounter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls += 1
        return func(*args, **(kwargs or {}))


def fallbacks(name, autocast_dtype=None):
    model, opt, kind = make(name, "metalx", dropout=0.1)
    x, y = batches(kind, 1, seed=1)[0]
    x, y = x.to("metalx"), y.to("metalx")
    step(model, opt, x, y, autocast_dtype)  # creates the optimizer state
    torch.metalx.synchronize()
    torch.metalx.reset_fallback_stats()
    counter = CallCounter()
    with counter:
        step(model, opt, x, y, autocast_dtype)
    torch.metalx.synchronize()
    stats = torch.metalx.fallback_stats()
    fell_back = sum(stats.values())
    return {"fallback_ops": stats, "calls": counter.calls,
            "native_share": 1.0 - fell_back / max(counter.calls, 1)}


def timing(name, steps):
    result = {}
    for device in ("cpu", "metalx"):
        model, opt, kind = make(name, device, dropout=0.1)
        data = [(x.to(device), y.to(device)) for x, y in batches(kind, 2, seed=2)]
        sync = torch.metalx.synchronize if device == "metalx" else (lambda: None)
        step(model, opt, *data[0])
        sync()
        best = float("inf")
        for i in range(steps):
            t0 = time.perf_counter()
            step(model, opt, *data[i % 2])
            sync()
            best = min(best, time.perf_counter() - t0)
        result[device] = best
    return {"cpu_s": result["cpu"], "metalx_s": result["metalx"], "ratio": result["cpu"] / result["metalx"]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    args = parser.parse_args()
    torch.set_num_threads(2)
    load_before = os.getloadavg()
    report = {}
    for name in args.models:
        entry = {"correctness": correctness(name)}
        entry["fallback_float32"] = fallbacks(name)
        entry["fallback_autocast_float16"] = fallbacks(name, torch.float16)
        entry["fallback_autocast_bfloat16"] = fallbacks(name, torch.bfloat16)
        entry["speed"] = timing(name, args.steps)
        report[name] = entry
        c, f, s = entry["correctness"], entry["fallback_float32"], entry["speed"]
        print(f"{name:15s} loss rel err {c['max_loss_rel_err']:.1e}  grad rel err {c['max_grad_rel_err']:.1e}  "
              f"native {f['native_share']:.0%} of {f['calls']} calls ({sum(f['fallback_ops'].values())} fell back)  "
              f"step cpu {s['cpu_s'] * 1e3:.1f} ms  metalx {s['metalx_s'] * 1e3:.1f} ms  ratio {s['ratio']:.2f}x",
              flush=True)
        for key in ("fallback_float32", "fallback_autocast_float16", "fallback_autocast_bfloat16"):
            if entry[key]["fallback_ops"]:
                ops = ", ".join(f"{op} x{n}" for op, n in sorted(entry[key]["fallback_ops"].items()))
                print(f"    {key}: {ops}")
    report["_machine"] = {"load_before": load_before, "load_after": os.getloadavg(), "torch": torch.__version__,
                          "driver": torch.metalx.driver_name(),
                          "platform": platform.platform()}
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1, default=str)


if __name__ == "__main__":
    main()
