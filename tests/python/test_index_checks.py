"""Device-side index checks (backend/device_index_errors.h, backend/ops/index_check.h,
kernels/index_check.metal): an index value out of range is found on the device and
raised at the next host wait (synchronize, .item(), .cpu(), event sync), naming the op
and giving CPU's exception type and message; the process stays usable and the error is
reported once. METALX_SYNC_INDEX_CHECKS=1 raises CPU's exact error at the op. A
training step (embedding + cross entropy, forward and backward) has no host wait."""

import pytest
import torch
import torch.nn.functional as F

from conftest import check_python
from device_checks import assert_native

pytestmark = pytest.mark.usefixtures("fallback_stats_reset")

DEV = "metalx"


def cpu_error(fn, *args):
    with pytest.raises(Exception) as e:
        fn(*args)
    return e.value


def long_t(*v):
    return torch.tensor(v, dtype=torch.long)


X = torch.arange(20, dtype=torch.float32).reshape(4, 5)

# (op name the error gives, fn(x, index), a bad index, a good index): fn computes on
# the tensors it is given, so it runs on CPU for the reference and on metalx.
CASES = [
    ("gather", lambda x, i: torch.gather(x, 1, i.view(1, -1)), long_t(7), long_t(4)),
    ("index_select", lambda x, i: x.index_select(0, i), long_t(1, 4), long_t(3)),
    ("index_select", lambda x, i: F.embedding(i, x), long_t(0, 9), long_t(2)),  # embedding
    ("scatter", lambda x, i: x.scatter(1, i.view(1, -1), 1.0), long_t(5), long_t(0)),
    ("scatter_add", lambda x, i: x.scatter_add(1, i.view(1, -1), torch.ones_like(x)[:1, :1]), long_t(-1), long_t(2)),
    ("scatter_reduce", lambda x, i: x.scatter_reduce(1, i.view(1, -1), torch.ones_like(x)[:1, :1], "amax"),
     long_t(6), long_t(1)),
    ("index_add_", lambda x, i: x.index_add(0, i, torch.ones_like(x)[:1]), long_t(4), long_t(3)),
    ("index_copy_", lambda x, i: x.index_copy(0, i, torch.ones_like(x)[:1]), long_t(8), long_t(1)),
    ("index_fill_", lambda x, i: x.index_fill(1, i, -1.0), long_t(-6), long_t(-5)),
    ("index", lambda x, i: x[i], long_t(0, 4), long_t(-4)),
    ("index", lambda x, i: x[:, i], long_t(-6), long_t(-1)),
    ("index_put_", lambda x, i: x.index_put((i,), torch.tensor(3.0)), long_t(9), long_t(0)),
    ("index_put_", lambda x, i: x.index_put((i,), torch.tensor(3.0), accumulate=True), long_t(-5), long_t(-4)),
    ("take", lambda x, i: x.take(i), long_t(20), long_t(-20)),
    ("put_", lambda x, i: x.clone().put_(i, torch.ones_like(x).view(-1)[: i.numel()]), long_t(-21), long_t(19)),
    ("put_", lambda x, i: x.clone().put_(i, torch.ones_like(x).view(-1)[: i.numel()], accumulate=True), long_t(25), long_t(7)),
    ("nll_loss", lambda x, i: F.nll_loss(x[: i.numel()], i), long_t(5), long_t(4)),
]


def on_device(fn, index):
    return fn(X.to(DEV), index.to(DEV))


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{n}" for n, c in enumerate(CASES)])
def test_bad_index_raises_at_next_sync_naming_the_op(case):
    op, fn, bad, good = case
    expected = cpu_error(fn, X, bad)
    on_device(fn, bad)  # queued: no error, no wait
    with pytest.raises(type(expected)) as got:
        torch.metalx.synchronize()
    message = str(got.value).split("\n")[0]
    assert f"device-side index check failed in {op}: {str(expected).splitlines()[0]}" in message
    torch.metalx.synchronize()  # reported once: a second wait is clean
    # the process stays usable: the same op with a good index gives CPU's result
    torch.testing.assert_close(on_device(fn, good).cpu(), fn(X, good))
    assert_native()


@pytest.mark.parametrize("wait", ["item", "cpu", "event", "stream"])
def test_every_host_wait_reports(wait):
    out = X.to(DEV).index_select(0, long_t(3, 9).to(DEV))
    with pytest.raises(IndexError, match="device-side index check failed in index_select: index out of range in self"):
        if wait == "item":
            out.sum().item()
        elif wait == "cpu":
            out.cpu()
        elif wait == "event":
            e = torch.metalx.Event()
            e.record()
            e.synchronize()
        else:
            torch.metalx.current_stream().synchronize()
    torch.metalx.synchronize()


def test_first_error_wins_and_later_good_work_is_kept():
    x = X.to(DEV)
    # made before the errors: a copy from the host waits, and would report them
    first, second, good = long_t(6).to(DEV), long_t(9).view(1, 1).to(DEV), long_t(4, 0).to(DEV)
    x.index_select(0, first)
    torch.gather(x, 0, second)  # dropped: the first error wins
    y = x.index_select(1, good)  # good work queued after the errors
    with pytest.raises(IndexError, match="in index_select: index out of range in self"):
        torch.metalx.synchronize()
    torch.metalx.synchronize()
    torch.testing.assert_close(y.cpu(), X.index_select(1, long_t(4, 0)))


def test_streams_keep_their_own_checks_and_memory_stats_ignore_them():
    # Each stream has its own record: a bad index on one stream is reported with its own
    # op and value while other streams run good checks at the same time, and no check
    # reports an error that is not there. The records are not allocated device memory.
    torch.metalx.synchronize()
    allocated = torch.metalx.memory_allocated()
    x = X.to(DEV)
    good = long_t(3, 1, 0).to(DEV)
    bad = long_t(2, 11).to(DEV)
    streams = [torch.metalx.Stream() for _ in range(4)]
    outs = []
    for k, s in enumerate(streams):
        s.wait_stream(torch.metalx.current_stream())
        with torch.metalx.stream(s):
            for _ in range(20):
                outs.append(x.index_select(0, good))
            if k == 2:
                torch.gather(x, 1, bad.view(1, -1))
    with pytest.raises(RuntimeError, match="in gather: index 11 is out of bounds for dimension 1 with size 5"):
        torch.metalx.synchronize()
    torch.metalx.synchronize()  # reported once
    for y in outs:
        torch.testing.assert_close(y.cpu(), X.index_select(0, long_t(3, 1, 0)))
    del x, good, bad, outs, y
    torch.metalx.synchronize()
    assert torch.metalx.memory_allocated() == allocated


def test_bad_elements_are_skipped_not_written():
    x = torch.zeros(3, 4).to(DEV)
    rows, cols, fill = long_t(1, 5, -1).to(DEV), long_t(0, 9, 3).view(1, 3).to(DEV), long_t(7).to(DEV)
    value = torch.tensor(2.0, device=DEV)
    x.index_put_((rows,), value)
    x.scatter_(1, cols, 1.0)
    x.index_fill_(1, fill, 5.0)
    with pytest.raises(IndexError, match="in index_put_"):
        torch.metalx.synchronize()
    ref = torch.zeros(3, 4)
    ref[1] = 2.0
    ref[2] = 2.0
    ref[0, 0] = ref[0, 3] = 1.0
    torch.testing.assert_close(x.cpu(), ref)


def test_negative_indices_wrap_and_int32_indices_check():
    x = X.to(DEV)
    for idx in (long_t(-1, -4, 0), torch.tensor([-1, 3], dtype=torch.int32)):
        torch.testing.assert_close(x[idx.to(DEV)].cpu(), X[idx])
        torch.testing.assert_close(x.take(idx.long().to(DEV)).cpu(), X.take(idx.long()))
    x.index_select(0, torch.tensor([0, 4], dtype=torch.int32, device=DEV))
    with pytest.raises(IndexError, match="index out of range in self"):
        torch.metalx.synchronize()
    assert_native()


def test_first_bad_value_in_index_order_is_named():
    # Many threads find bad values; the error names the first in index order (what a
    # serial walk, and CPU's host-side message, would name), whatever the thread order.
    idx = torch.zeros(100000, dtype=torch.long)
    idx[70000:] = 11
    idx[31234] = 9
    idx[31235] = 10
    x = torch.zeros(5, 2)
    torch.gather(x.to(DEV), 0, idx.view(-1, 1).expand(-1, 2).to(DEV))
    with pytest.raises(RuntimeError, match="in gather: index 9 is out of bounds for dimension 0 with size 5"):
        torch.metalx.synchronize()


def test_embedding_backward_checks_indices_on_the_device():
    grad = torch.ones(2, 3, device=DEV)
    torch.ops.aten.embedding_dense_backward(grad, torch.tensor([1, 4], device=DEV), 4, -1, False)
    with pytest.raises(IndexError, match="in embedding_dense_backward: index out of range in self"):
        torch.metalx.synchronize()
    got = torch.ops.aten.embedding_dense_backward(grad, torch.tensor([1, 1], device=DEV), 4, -1, False)
    torch.testing.assert_close(got.cpu(), torch.tensor([[0.0] * 3, [2.0] * 3, [0.0] * 3, [0.0] * 3]))


def test_embedding_cross_entropy_step_has_no_host_wait():
    g = torch.Generator().manual_seed(0)
    emb = torch.nn.Embedding(50, 16).to(DEV)
    head = torch.nn.Linear(16, 50).to(DEV)
    tokens = torch.randint(0, 50, (8, 12), generator=g).to(DEV)
    targets = torch.randint(0, 50, (8, 12), generator=g).to(DEV)
    params = list(emb.parameters()) + list(head.parameters())

    def step():
        logits = head(emb(tokens))
        loss = F.cross_entropy(logits.reshape(-1, 50), targets.reshape(-1))
        loss.backward()
        return loss

    step()  # first-use setup (pipelines, the error record) is not part of the count
    torch.metalx.synchronize()
    for p in params:
        p.grad = None
    before = torch.metalx.host_wait_count()
    loss = step()
    assert torch.metalx.host_wait_count() == before, "the training step waited for the device"
    # the counter sees a wait, so the assertion above can fail
    loss.item()
    assert torch.metalx.host_wait_count() > before
    # the same step on CPU gives the same loss and gradients
    emb_c, head_c = torch.nn.Embedding(50, 16), torch.nn.Linear(16, 50)
    emb_c.load_state_dict({k: v.cpu() for k, v in emb.state_dict().items()})
    head_c.load_state_dict({k: v.cpu() for k, v in head.state_dict().items()})
    loss_c = F.cross_entropy(head_c(emb_c(tokens.cpu())).reshape(-1, 50), targets.cpu().reshape(-1))
    loss_c.backward()
    torch.testing.assert_close(loss.cpu(), loss_c)
    torch.testing.assert_close(emb.weight.grad.cpu(), emb_c.weight.grad)
    assert_native()


def test_sync_mode_raises_cpu_error_at_the_op():
    check_python(
        """
import torch, torch.nn.functional as F
x = torch.arange(20.).reshape(4, 5)
cases = [
    lambda x, i: torch.gather(x, 1, i.view(1, -1)),
    lambda x, i: x.index_select(0, i),
    lambda x, i: x[i],
    lambda x, i: x.take(i),
    lambda x, i: x.index_copy(0, i, torch.ones_like(x)[:1]),
    lambda x, i: F.nll_loss(x[:1], i),
]
for fn in cases:
    i = torch.tensor([25])
    try:
        fn(x, i)
        raise SystemExit("cpu did not raise")
    except Exception as e:
        cpu = e
    try:
        fn(x.to("metalx"), i.to("metalx"))  # no synchronize: the op itself raises
        raise SystemExit("metalx did not raise at the op")
    except Exception as e:
        assert type(e) is type(cpu), (type(e), type(cpu))
        assert str(e).splitlines()[0] == str(cpu).splitlines()[0], (str(e), str(cpu))
torch.metalx.synchronize()  # nothing left to report
assert torch.equal(x.to("metalx").index_select(0, torch.tensor([3], device="metalx")).cpu(), x[3:4])
""",
        METALX_SYNC_INDEX_CHECKS="1",
    )
