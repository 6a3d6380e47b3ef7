"""metalx tensors passed between processes (torch.multiprocessing with 'spawn'): the
receiver maps the same memory, writes are seen on both sides, values match CPU."""

import queue as queue_module

import pytest
import torch
import torch.multiprocessing as mp

DEVICE = "metalx"
TIMEOUT_S = 120


def _child(inbox, outbox):
    # Runs in a spawned process: answers each request, then exits on None.
    torch.metalx.synchronize()
    while True:
        request = inbox.get(timeout=TIMEOUT_S)
        if request is None:
            return
        kind, payload = request
        if kind == "describe":
            # What the child sees: device, layout and the values, on its own device.
            outbox.put(
                (str(payload.device), tuple(payload.shape), payload.stride(), payload.storage_offset(),
                 payload.cpu())
            )
        elif kind == "add_one":
            payload.add_(1)  # a native kernel writing the shared memory
            torch.metalx.synchronize()  # the other process reads only after this
            outbox.put("done")
        elif kind == "make":
            # A tensor the child computes and sends back.
            made = torch.arange(12, dtype=torch.float32, device=DEVICE).reshape(3, 4) * 3
            outbox.put(made)
            outbox.put(made.cpu())
            assert inbox.get(timeout=TIMEOUT_S) == "received"
        elif kind == "same_memory":
            a, b = payload
            outbox.put(a.data_ptr() == b.data_ptr() or torch.equal(a.cpu(), b.cpu()))
            a.fill_(7)
            torch.metalx.synchronize()
            outbox.put(b.cpu())
        elif kind == "parameter":
            outbox.put((type(payload).__name__, payload.requires_grad, payload.is_leaf))


@pytest.fixture(scope="module")
def child():
    ctx = mp.get_context("spawn")
    inbox, outbox = ctx.Queue(), ctx.Queue()
    process = ctx.Process(target=_child, args=(inbox, outbox), daemon=True)
    process.start()

    def ask(kind, payload=None):
        inbox.put((kind, payload))
        try:
            return outbox.get(timeout=TIMEOUT_S)
        except queue_module.Empty:
            raise AssertionError(f"the child did not answer {kind!r} (exit code {process.exitcode})")

    ask.inbox, ask.outbox, ask.process = inbox, outbox, process
    yield ask
    inbox.put(None)
    process.join(TIMEOUT_S)
    assert process.exitcode == 0, f"the child exited with {process.exitcode}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool])
def test_child_sees_values(child, dtype):
    reference = (torch.arange(30) % 7).to(dtype).reshape(5, 6)
    device, shape, stride, offset, values = child("describe", reference.to(DEVICE))
    assert device == "metalx:0"
    assert shape == (5, 6) and stride == (6, 1) and offset == 0
    assert values.dtype == dtype
    torch.testing.assert_close(values, reference, rtol=0, atol=0)


def test_strided_view_keeps_its_layout(child):
    base = torch.randn(6, 8)
    view = base.to(DEVICE)[1:, ::2]  # storage offset and a non-unit stride
    device, shape, stride, offset, values = child("describe", view)
    assert (shape, stride, offset) == ((5, 4), (8, 2), 8)
    torch.testing.assert_close(values, base[1:, ::2], rtol=0, atol=0)


def test_writes_are_seen_by_the_sender(child):
    cpu = torch.randn(1000)
    x = cpu.to(DEVICE)
    assert child("add_one", x) == "done"
    # The child's kernel wrote the memory this process's tensor uses.
    torch.testing.assert_close(x.cpu(), cpu + 1, rtol=0, atol=0)
    # And this process's kernels keep working on it (now shared memory).
    x.mul_(2)
    torch.testing.assert_close(x.cpu(), (cpu + 1) * 2, rtol=0, atol=0)
    # A second send reuses the same shared memory: the child writes it again.
    assert child("add_one", x) == "done"
    torch.testing.assert_close(x.cpu(), (cpu + 1) * 2 + 1, rtol=0, atol=0)


def test_writes_through_a_view_land_in_the_base(child):
    cpu = torch.zeros(4, 5)
    x = cpu.to(DEVICE)
    assert child("add_one", x[:, 1]) == "done"
    cpu[:, 1] += 1
    torch.testing.assert_close(x.cpu(), cpu, rtol=0, atol=0)


def test_tensor_made_in_child_arrives(child):
    received = child("make")
    expected = child.outbox.get(timeout=TIMEOUT_S)
    child.inbox.put("received")
    assert received.device.type == DEVICE
    torch.testing.assert_close(received.cpu(), expected, rtol=0, atol=0)
    torch.testing.assert_close((received + 1).cpu(), expected + 1, rtol=0, atol=0)


def test_two_views_of_one_storage_alias_in_child(child):
    x = torch.zeros(8, device=DEVICE)
    same, b_values = None, None
    child.inbox.put(("same_memory", (x[:4], x[:4])))
    same = child.outbox.get(timeout=TIMEOUT_S)
    b_values = child.outbox.get(timeout=TIMEOUT_S)
    assert same
    # Filling one of the child's tensors changed the other: one memory, in both processes.
    torch.testing.assert_close(b_values, torch.full((4,), 7.0), rtol=0, atol=0)
    torch.testing.assert_close(x.cpu(), torch.tensor([7.0] * 4 + [0.0] * 4), rtol=0, atol=0)


def test_parameter_and_requires_grad_survive(child):
    p = torch.nn.Parameter(torch.randn(3, device=DEVICE))
    assert child("parameter", p) == ("Parameter", True, True)


def test_non_leaf_requiring_grad_is_refused_as_on_cpu():
    import pickle

    from multiprocessing.reduction import ForkingPickler

    def refusal(device):
        leaf = torch.randn(3, device=device, requires_grad=True)
        with pytest.raises(RuntimeError) as info:
            ForkingPickler.dumps(leaf * 2, pickle.HIGHEST_PROTOCOL)
        return str(info.value)

    assert refusal(DEVICE) == refusal("cpu")


def test_empty_tensor(child):
    device, shape, _, _, values = child("describe", torch.empty(0, 3, device=DEVICE))
    assert device == "metalx:0" and shape == (0, 3) and values.numel() == 0


def test_shared_storage_cannot_be_resized(child):
    x = torch.ones(16, device=DEVICE)
    child("describe", x)  # sharing moves it to shared memory
    with pytest.raises(RuntimeError, match="shared memory"):
        x.untyped_storage().resize_(1024)
    torch.testing.assert_close(x.cpu(), torch.ones(16), rtol=0, atol=0)  # nothing lost


def test_sharing_keeps_pending_work(child):
    # Work queued before the send must be in what the child sees.
    x = torch.zeros(1 << 16, device=DEVICE)
    for _ in range(20):
        x.add_(1)
    _, _, _, _, values = child("describe", x)
    torch.testing.assert_close(values, torch.full((1 << 16,), 20.0), rtol=0, atol=0)


def test_file_system_sharing_strategy(child):
    # macOS's default strategy (shared memory by file name, with reference counts).
    previous = mp.get_sharing_strategy()
    mp.set_sharing_strategy("file_system")
    try:
        cpu = torch.randn(300)
        x = cpu.to(DEVICE)
        assert child("add_one", x) == "done"
        torch.testing.assert_close(x.cpu(), cpu + 1, rtol=0, atol=0)
    finally:
        mp.set_sharing_strategy(previous)
