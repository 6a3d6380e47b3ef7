"""A character-level Transformer language model trained on the metalx device.

The text is this repository's own documentation (README.md and docs/*.md), so the
example needs no download. It trains a small decoder-only Transformer (token and
position embeddings, pre-norm attention blocks with a causal mask, GELU MLPs,
dropout, AdamW) to predict the next character, shows a progress bar, reports how many
aten calls of the training steps fell back to the CPU, writes the loss curve as an SVG
plot and samples some text from the trained model.

    python examples/char_transformer.py [--steps 300] [--device metalx] [--plot loss.svg]
"""

import argparse
import math
import pathlib
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

REPO = pathlib.Path(__file__).resolve().parent.parent


def load_text(paths):
    if not paths:
        paths = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    text = "\n".join(pathlib.Path(p).read_text(encoding="utf-8") for p in paths if pathlib.Path(p).is_file())
    if len(text) < 10_000:
        sys.exit(f"char_transformer: need at least 10,000 characters of text, found {len(text)} "
                 f"(pass --text FILE ...)")
    return text


class Vocabulary:
    def __init__(self, text):
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}

    def encode(self, text):
        return torch.tensor([self.index[c] for c in text], dtype=torch.long)

    def decode(self, ids):
        return "".join(self.chars[i] for i in ids)


class Block(nn.Module):
    """Pre-norm self-attention and MLP, each added to the residual stream."""

    def __init__(self, width, heads, dropout):
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, dropout=dropout, batch_first=True)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width),
                                 nn.Dropout(dropout))

    def forward(self, x, causal_mask):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, attn_mask=causal_mask, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class CharTransformer(nn.Module):
    def __init__(self, vocab, block, width, heads, layers, dropout):
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(block, width)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(width, heads, dropout) for _ in range(layers))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)

    def forward(self, ids):
        t = ids.shape[1]
        pos = torch.arange(t, device=ids.device)
        x = self.drop(self.tokens(ids) + self.positions(pos))
        # True above the diagonal: a position attends to itself and what came before.
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool, device=ids.device), diagonal=1)
        for b in self.blocks:
            x = b(x, causal)
        return self.head(self.norm(x))


def batches(data, block, batch, generator):
    """Random windows of `block` characters and the same windows shifted by one."""
    while True:
        starts = torch.randint(0, len(data) - block - 1, (batch,), generator=generator)
        x = torch.stack([data[s:s + block] for s in starts.tolist()])
        y = torch.stack([data[s + 1:s + block + 1] for s in starts.tolist()])
        yield x, y


def progress(step, steps, loss, rate, width=30):
    """A bar redrawn in place on a terminal; every tenth of the run as a line in a log."""
    done = int(width * step / steps)
    line = f"  [{'#' * done}{'.' * (width - done)}] {step:4d}/{steps}  loss {loss:.3f}  {rate:5.2f} steps/s"
    if sys.stdout.isatty():
        print("\r" + line, end="\n" if step == steps else "", flush=True)
    elif step == 1 or step == steps or step % max(1, steps // 10) == 0:
        print(line, flush=True)


def write_svg_plot(path, losses, title):
    """The loss curve as a small standalone SVG (no plotting library needed)."""
    w, h, pad = 640, 360, 48
    lo, hi = min(losses), max(losses)
    span = (hi - lo) or 1.0

    def xy(i, v):
        x = pad + (w - 2 * pad) * (i / max(1, len(losses) - 1))
        y = h - pad - (h - 2 * pad) * ((v - lo) / span)
        return f"{x:.1f},{y:.1f}"

    points = " ".join(xy(i, v) for i, v in enumerate(losses))
    ticks = []
    for k in range(5):
        v = lo + span * k / 4
        y = h - pad - (h - 2 * pad) * k / 4
        ticks.append(f'<line x1="{pad - 4}" y1="{y:.1f}" x2="{pad}" y2="{y:.1f}" stroke="black"/>'
                     f'<text x="{pad - 8}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{v:.2f}</text>')
    svg = f"""<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif">
<rect width="{w}" height="{h}" fill="white"/>
<text x="{w / 2}" y="24" font-size="15" text-anchor="middle">{title}</text>
<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="black"/>
<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="black"/>
{''.join(ticks)}
<text x="{w / 2}" y="{h - 12}" font-size="12" text-anchor="middle">step (1 .. {len(losses)})</text>
<text x="14" y="{h / 2}" font-size="12" text-anchor="middle" transform="rotate(-90 14 {h / 2})">training loss</text>
<polyline fill="none" stroke="#c0392b" stroke-width="1.5" points="{points}"/>
</svg>
"""
    pathlib.Path(path).write_text(svg)


@torch.no_grad()
def sample(model, vocab, prompt, length, block, device, generator):
    model.eval()
    ids = vocab.encode(prompt).unsqueeze(0).to(device)
    for _ in range(length):
        logits = model(ids[:, -block:])[:, -1]
        probs = torch.softmax(logits / 0.8, dim=-1).cpu()
        nxt = torch.multinomial(probs, 1, generator=generator).to(device)
        ids = torch.cat([ids, nxt], dim=1)
    model.train()
    return vocab.decode(ids[0].tolist())


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="metalx")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--block", type=int, default=64, help="characters of context")
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--text", nargs="*", help="text files to train on (default: this repo's docs)")
    p.add_argument("--plot", default="char_transformer_loss.svg", help="where to write the loss plot")
    p.add_argument("--sample", type=int, default=200, help="characters to generate at the end")
    args = p.parse_args(argv)

    device = torch.device(args.device)
    text = load_text(args.text)
    vocab = Vocabulary(text)
    data = vocab.encode(text)
    split = int(0.9 * len(data))
    train_data, val_data = data[:split], data[split:]
    print(f"text: {len(text):,} characters, {len(vocab.chars)} distinct; device {device}")

    torch.manual_seed(0)
    model = CharTransformer(len(vocab.chars), args.block, args.width, args.heads, args.layers, 0.1).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=args.steps, pct_start=0.1)
    params = sum(t.numel() for t in model.parameters())
    print(f"model: {args.layers} blocks of width {args.width}, {params:,} parameters")

    g = torch.Generator().manual_seed(0)
    stream = batches(train_data, args.block, args.batch, g)
    on_metalx = device.type == "metalx"
    if on_metalx:
        torch.metalx.reset_fallback_stats()
    losses = []
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        x, y = next(stream)
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        progress(step, args.steps, sum(losses[-20:]) / len(losses[-20:]), step / (time.perf_counter() - start))
    elapsed = time.perf_counter() - start
    fell_back = torch.metalx.fallback_stats() if on_metalx else {}

    model.eval()
    with torch.no_grad():
        vx, vy = next(batches(val_data, args.block, 64, torch.Generator().manual_seed(1)))
        vl = model(vx.to(device))
        val_loss = F.cross_entropy(vl.reshape(-1, vl.shape[-1]), vy.to(device).reshape(-1)).item()
    model.train()
    print(f"first loss {losses[0]:.3f} (uniform guess: {math.log(len(vocab.chars)):.3f}), "
          f"last loss {losses[-1]:.3f}, validation loss {val_loss:.3f}")
    print(f"{args.steps} steps in {elapsed:.1f} s ({elapsed / args.steps * 1e3:.0f} ms per step)")
    if on_metalx:
        calls = sum(v if isinstance(v, int) else v.get("calls", 0) for v in fell_back.values())
        print(f"fallback calls in training: {calls}" +
              ("" if not fell_back else " (" + ", ".join(sorted(fell_back)) + ")"))
    write_svg_plot(args.plot, losses, f"char-level Transformer on {device.type}: training loss")
    print(f"loss plot: {args.plot}")
    if args.sample:
        print("sample:\n" + sample(model, vocab, "metalx ", args.sample, args.block, device,
                                   torch.Generator().manual_seed(2)))


if __name__ == "__main__":
    main()
