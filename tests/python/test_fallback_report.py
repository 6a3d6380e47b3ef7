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
    # Ops with no metalx kernel (special functions).
    torch.special.i0(a)
    torch.special.i0(a)
    torch.special.bessel_j0(a)
    stats = torch.metalx.fallback_stats()
    # Counted under the overload that reached the fallback (i0's structured kernel
    # reaches it as i0.out).
    def family(op):
        return sum(n for name, n in stats.items() if name.split(".")[0] == op)
    assert family("aten::i0") == 2
    assert family("aten::special_bessel_j0") == 1
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
            torch.special.i0(a)  # no metalx kernel
        except RuntimeError as e:
            print("raised:", e)
        print("views still work:", a.view(3, 1).shape)
        """,
        "error",
    )
    assert result.returncode == 0, result.stderr
    assert "metalx has no kernel for aten::i0" in result.stdout
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
                torch.special.i0(a)
            torch.special.bessel_j0(a)
        print(sorted(str(w.message).split(";")[0].split(".")[0] for w in caught))
        """,
        "warn",
    )
    assert result.returncode == 0, result.stderr
    assert ("['metalx has no kernel for aten::i0', "
            "'metalx has no kernel for aten::special_bessel_j0']") in result.stdout


def test_unknown_mode_is_rejected():
    with pytest.raises(RuntimeError, match="not a fallback mode; use allow, warn or error"):
        torch.metalx.set_fallback_mode("sometimes")
    assert torch.metalx.fallback_mode() == "allow"
