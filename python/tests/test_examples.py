# examples/: each runs as a user would run it, on a few problems.
import os
import subprocess
import sys

from conftest import SOURCE_DIR

RULES = ["vanilla", "kl 0.2", "kl 1.0", "topk 2", "topk 4"]


def test_judge_comparison_prints_every_rule_and_writes_the_plot(tmp_path):
    png = tmp_path / "judge_comparison.png"
    run = subprocess.run([sys.executable, str(SOURCE_DIR / "examples/judge_comparison.py"), "--limit", "3",
                          "--png", str(png)], capture_output=True, text=True, env=os.environ, timeout=300)
    assert run.returncode == 0, run.stderr
    rules = [line[:8].strip() for line in run.stdout.splitlines()[1:]]  # rows after the header: rule, MAT, ...
    assert rules == RULES, run.stdout
    assert png.read_bytes().startswith(b"\x89PNG")
