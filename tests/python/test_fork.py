"""A fork()ed child of a process that used metalx gets a clear error at once (it has the
device memory but none of the device threads, so it would hang), as CUDA does; a child
that never touches metalx, and processes started with 'spawn', work."""

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import os, sys, torch
    x = torch.ones(4, device="metalx") + 1  # the parent initialises metalx
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        results = []
        for name, use in [("op", lambda: x + 1),
                          ("factory", lambda: torch.ones(2, device="metalx")),
                          ("copy", lambda: x.cpu()),
                          ("synchronize", lambda: torch.metalx.synchronize())]:
            try:
                use()
                results.append(name + ":ok")
            except RuntimeError as e:
                results.append(name + ":" + ("forked" if "forked subprocess" in str(e) and "spawn" in str(e) else repr(e)))
        results.append("cpu:" + str(int((torch.arange(4) * 2).sum())))
        os.write(w, ";".join(results).encode())
        os._exit(0)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    child = os.read(r, 4096).decode()
    print("CHILD", child)
    print("STATUS", status)
    print("PARENT", (x * 2).cpu().tolist())  # the parent is unaffected
    """
)


def test_forked_child_gets_a_clear_error_and_parent_continues():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
    assert lines["CHILD"] == "op:forked;factory:forked;copy:forked;synchronize:forked;cpu:12", lines
    assert lines["STATUS"] == "0"
    assert lines["PARENT"] == "[4.0, 4.0, 4.0, 4.0]"


def test_child_forked_before_metalx_is_used_can_use_it():
    script = textwrap.dedent(
        """
        import os, torch
        pid = os.fork()  # nothing of metalx has run yet
        if pid == 0:
            ok = (torch.ones(3, device="metalx") * 3).sum().item() == 9
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        print("STATUS", status)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "STATUS 0" in out.stdout


def _spawned_worker(queue):
    import torch

    queue.put((torch.arange(5, device="metalx") * 2).sum().item())


def test_spawn_start_method_works_after_parent_used_metalx():
    import multiprocessing

    import torch

    (torch.ones(2, device="metalx") + 1).cpu()
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    p = ctx.Process(target=_spawned_worker, args=(queue,))
    p.start()
    value = queue.get(timeout=120)
    p.join(timeout=60)
    assert p.exitcode == 0 and value == 20
