"""examples/char_transformer.py, run as a user would (a short run): it trains on metalx
with no CPU fallback in its training steps, its loss goes down, it writes a loss plot
with one point per step, and it samples text."""

import pathlib
import re
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_char_transformer_trains_without_fallback_and_plots_its_loss(tmp_path):
    plot = tmp_path / "loss.svg"
    steps = 40
    result = subprocess.run(
        [sys.executable, str(REPO / "examples" / "char_transformer.py"), "--steps", str(steps), "--batch", "8",
         "--block", "32", "--width", "64", "--layers", "1", "--lr", "1e-2", "--plot", str(plot), "--sample", "30"],
        capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "device metalx" in out
    assert "fallback calls in training: 0" in out, out
    m = re.search(r"first loss ([\d.]+) \(uniform guess: ([\d.]+)\), last loss ([\d.]+), validation loss ([\d.]+)", out)
    assert m, out
    first, uniform, last, val = map(float, m.groups())
    assert abs(first - uniform) < 0.5, out  # an untrained model guesses about uniformly
    assert last < first - 0.7 and val < first - 0.7, out
    svg = plot.read_text()
    points = re.search(r'<polyline[^>]*points="([^"]+)"', svg).group(1).split()
    assert len(points) == steps
    assert re.search(r"sample:\nmetalx .{30}", out, re.S), out
