"""The fallback report: which ops ran on the CPU, and METALX_FALLBACK's modes."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch


def test_counts_each_fallen_back_op_by_name():
    a = torch.ones(4, device="metalx")
    torch.metalx.reset_fallback_stats()
    torch.add(a, a)
    torch.add(a, a)
    torch.mul(a, 3)
    stats = torch.metalx.fallback_stats()
    # Counted under the overload that reached the fallback (add.Tensor's structured
    # kernel reaches it as add.out).
    def family(op):
        return sum(n for name, n in stats.items() if name.split(".")[0] == op)
    assert family("aten::add") == 2
    assert family("aten::mul") == 1
    assert all(name.startswith("aten::") for name in stats)
    torch.metalx.reset_fallback_stats()
    assert torch.metalx.fallback_stats() == {}


def test_native_ops_are_not_counted():
    torch.metalx.reset_fallback_stats()
    x = torch.empty(8, device="metalx")
    x.view(2, 4).as_strided((2, 2), (1, 2))
    assert torch.metalx.fallback_stats() == {}


def _run(code, mode):
    env = dict(os.environ, METALX_FALLBACK=mode)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=env, timeout=120)


def test_error_mode_raises_naming_the_op_and_the_process_goes_on():
    result = _run(
        """
        import torch
        a = torch.ones(3, device="metalx")
        try:
            torch.add(a, a)
        except RuntimeError as e:
            print("raised:", e)
        print("views still work:", a.view(3, 1).shape)
        """,
        "error",
    )
    assert result.returncode == 0, result.stderr
    assert "metalx has no kernel for aten::add" in result.stdout
    assert "METALX_FALLBACK=error" in result.stdout
    assert "views still work: torch.Size([3, 1])" in result.stdout


def test_warn_mode_warns_once_per_op():
    result = _run(
        """
        import warnings, torch
        a = torch.ones(3, device="metalx")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                torch.add(a, a)
            torch.mul(a, a)
        print(sorted(str(w.message).split(";")[0].split(".")[0] for w in caught))
        """,
        "warn",
    )
    assert result.returncode == 0, result.stderr
    assert ("['metalx has no kernel for aten::add', "
            "'metalx has no kernel for aten::mul']") in result.stdout


def test_unknown_mode_is_rejected():
    with pytest.raises(RuntimeError, match="not a fallback mode; use allow, warn or error"):
        torch.metalx.set_fallback_mode("sometimes")
    assert torch.metalx.fallback_mode() == "allow"
