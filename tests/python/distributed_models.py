"""The small model, batch and one-process reference training the distributed tests share
(DDP, FSDP2, errors): ranks each train on their rows of one batch, the tests compare with
one process training on the whole batch on the CPU.

Functions take the `torch` module, so that spawned ranks import torch (and metalx) first.
"""

BATCH, STEPS, LR = 16, 3, 0.1
IN_FEATURES, HIDDEN, OUT_FEATURES = 8, 32, 4


def model(torch):
    """The same initial parameters on every call (and every rank)."""
    torch.manual_seed(0)
    return untrained_model(torch)


def untrained_model(torch):
    """The model's layers, initialised from torch's current random state."""
    return torch.nn.Sequential(torch.nn.Linear(IN_FEATURES, HIDDEN), torch.nn.Tanh(),
                               torch.nn.Linear(HIDDEN, OUT_FEATURES))


def data(torch):
    """The whole batch (inputs, targets), on the CPU: the same on every call."""
    g = torch.Generator().manual_seed(1)
    return torch.randn(BATCH, IN_FEATURES, generator=g), torch.randn(BATCH, OUT_FEATURES, generator=g)


def rank_rows(rank, world_size):
    """The rows of the batch that `rank` trains on."""
    return slice(rank * BATCH // world_size, (rank + 1) * BATCH // world_size)


def reference(torch, loss_scale=1.0):
    """The model trained STEPS SGD steps on the whole batch on the CPU (loss scaled by
    `loss_scale`)."""
    net = model(torch)
    x, y = data(torch)
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    for _ in range(STEPS):
        opt.zero_grad()
        (loss_scale * torch.nn.functional.mse_loss(net(x), y)).backward()
        opt.step()
    return net
