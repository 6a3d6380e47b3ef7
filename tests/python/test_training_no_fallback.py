"""Training steps of small versions of the three models bench/models_bench.py trains run
with no CPU-fallback call at all (forward, backward and optimizer step, in float32 and
under autocast float16/bfloat16), and their losses and gradients match CPU torch's:

  - a ResNet-style CNN: conv, batch norm, ReLU, max/avg/adaptive pooling, linear,
    cross-entropy, SGD with momentum;
  - a Transformer language model: embedding, positional add, causal self-attention
    (nn.MultiheadAttention's math path through F.scaled_dot_product_attention, and an
    explicit masked softmax), layer norm, GELU, dropout, cross-entropy, AdamW;
  - an LSTM language model: embedding, LSTM, linear, cross-entropy, Adam.

The reference is CPU torch in float32 from the same weights and batch; autocast steps
are held to tolerances of their 16-bit dtypes. Fallback calls are counted by
torch.metalx.fallback_stats() around each step, and one run goes through
METALX_FALLBACK=error, which turns any fallback into an error."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from conftest import check_python

DEV = "metalx"


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x):
        return F.relu(x + self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))


class TinyCNN(nn.Module):
    def __init__(self, classes=5):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2))
        self.block = Block(8)
        self.pool = nn.AvgPool2d(2)
        self.head = nn.Linear(8 * 2 * 2, classes)

    def forward(self, x):
        x = self.pool(self.block(self.stem(x)))
        x = F.adaptive_max_pool2d(x, 2) + F.adaptive_avg_pool2d(x, 2)
        return self.head(torch.flatten(x, 1))


class TinyLM(nn.Module):
    """Two attention paths: nn.TransformerEncoderLayer (MultiheadAttention -> SDPA with
    is_causal) and a hand-written masked softmax (tril mask, masked_fill)."""

    def __init__(self, vocab=20, d=16, heads=2, seq=8, dropout=0.0):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(seq, d) * 0.02)
        self.layer = nn.TransformerEncoderLayer(d, heads, 2 * d, dropout=dropout, activation="gelu",
                                                batch_first=True, norm_first=True)
        self.qkv = nn.Linear(d, 3 * d)
        self.drop = nn.Dropout(dropout)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos[:t]
        mask = nn.Transformer.generate_square_subsequent_mask(t, device=idx.device)
        x = self.layer(x, src_mask=mask, is_causal=True)
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = (q @ k.transpose(-2, -1)) / q.shape[-1] ** 0.5
        causal = torch.ones(t, t, dtype=torch.bool, device=idx.device).tril()
        att = self.drop(F.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1))
        x = x + att @ v
        return self.head(self.norm(x))


class TinyLSTM(nn.Module):
    def __init__(self, vocab=20, d=8, hidden=16):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.lstm = nn.LSTM(d, hidden, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, idx):
        return self.head(self.lstm(self.tok(idx))[0])


MODELS = {
    "cnn": (lambda dropout: TinyCNN(), lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)),
    "transformer": (lambda dropout: TinyLM(dropout=dropout), lambda p: torch.optim.AdamW(p, lr=1e-3)),
    "lstm": (lambda dropout: TinyLSTM(), lambda p: torch.optim.Adam(p, lr=1e-3)),
}
PRECISIONS = {"float32": None, "float16": torch.float16, "bfloat16": torch.bfloat16}
# (loss, gradient) relative errors allowed against CPU float32. CPU's own bfloat16
# autocast is as far off as metalx's (gradients ~0.1 on the CNN: a small batch through
# batch norm).
TOLERANCE = {"float32": (1e-4, 1e-3), "float16": (2e-2, 1e-1), "bfloat16": (5e-2, 2.5e-1)}


def batch(name, seed=0):
    g = torch.Generator().manual_seed(seed)
    if name == "cnn":
        return torch.randn(4, 3, 16, 16, generator=g), torch.randint(0, 5, (4,), generator=g)
    seq = torch.randint(0, 20, (2, 9), generator=g)
    return seq[:, :-1], seq[:, 1:]


def make(name, device, dropout=0.0):
    factory, optimizer = MODELS[name]
    torch.manual_seed(0)
    model = factory(dropout).to(device).train()
    return model, optimizer(model.parameters())


def step(model, opt, x, y, dtype, scaler=None, apply=True):
    opt.zero_grad(set_to_none=True)
    with torch.autocast(x.device.type, dtype=dtype, enabled=dtype is not None):
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1))
    if scaler is None:
        loss.backward()
        grads = [p.grad.detach().clone() for p in model.parameters()]
        if apply:
            opt.step()
    else:
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        grads = [p.grad.detach().clone() for p in model.parameters()]
        scaler.step(opt)
        scaler.update()
    return loss.detach(), grads


def rel_err(a, b):
    a, b = a.detach().cpu().double(), b.detach().cpu().double()
    return float((a - b).norm() / b.norm().clamp_min(1e-12))


@pytest.mark.parametrize("precision", list(PRECISIONS))
@pytest.mark.parametrize("name", ["transformer", "cnn", "lstm"])
def test_training_step_is_native_and_matches_cpu(name, precision):
    dtype = PRECISIONS[precision]
    x, y = batch(name)
    cpu_model, cpu_opt = make(name, "cpu")
    dev_model, dev_opt = make(name, DEV)
    for k in range(2):  # the second step runs with the optimizer's state in place
        torch.metalx.synchronize()
        torch.metalx.reset_fallback_stats()
        dev_loss, dev_grads = step(dev_model, dev_opt, x.to(DEV), y.to(DEV), dtype, apply=False)
        cpu_loss, cpu_grads = step(cpu_model, cpu_opt, x, y, None, apply=False)
        loss_tol, grad_tol = TOLERANCE[precision]
        assert rel_err(dev_loss, cpu_loss) < loss_tol
        assert max(rel_err(a, b) for a, b in zip(dev_grads, cpu_grads)) < grad_tol
        # Both optimizers step from the same (CPU's) gradients: Adam turns noise-level
        # gradient differences (a key bias's gradient is zero up to rounding) into whole
        # steps of the learning rate, which would say nothing about the kernels.
        for p, g in zip(dev_model.parameters(), cpu_grads):
            p.grad.copy_(g)
        dev_opt.step()
        cpu_opt.step()
        torch.metalx.synchronize()
        assert torch.metalx.fallback_stats() == {}, f"step {k} fell back"
        for p, q in zip(dev_model.parameters(), cpu_model.parameters()):
            assert p.device.type == DEV and p.dtype == torch.float32
            assert rel_err(p, q) < 1e-5


@pytest.mark.parametrize("name", list(MODELS))
def test_training_with_dropout_and_grad_scaler_is_native(name):
    """Dropout on (the numbers are metalx's own) and torch.amp.GradScaler in float16."""
    x, y = (t.to(DEV) for t in batch(name))
    model, opt = make(name, DEV, dropout=0.1)
    scaler = torch.amp.GradScaler(DEV, init_scale=2.0**8, growth_interval=1)
    for _ in range(2):
        torch.metalx.synchronize()
        torch.metalx.reset_fallback_stats()
        loss, grads = step(model, opt, x, y, torch.float16, scaler)
        torch.metalx.synchronize()
        assert torch.metalx.fallback_stats() == {}
        assert torch.isfinite(loss) and all(torch.isfinite(g).all() for g in grads)
    assert scaler.get_scale() == 2.0**10  # grew once per step: no step was skipped


def test_training_steps_under_fallback_error_mode():
    """The same steps in a process where any CPU fallback raises."""
    check_python(
        """
        import sys
        sys.path.insert(0, %r)
        import torch
        from test_training_no_fallback import MODELS, PRECISIONS, batch, make, step
        for name in MODELS:
            for dtype in PRECISIONS.values():
                model, opt = make(name, "metalx", dropout=0.1)
                x, y = (t.to("metalx") for t in batch(name))
                for _ in range(2):
                    loss, _ = step(model, opt, x, y, dtype)
                torch.metalx.synchronize()
                assert torch.isfinite(loss), (name, dtype)
        print("ok")
        """ % __import__("os").path.dirname(__file__),
        METALX_FALLBACK="error",
    )
