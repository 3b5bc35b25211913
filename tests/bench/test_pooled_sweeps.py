"""bench/model_pairs/pooled_sweeps.py on two hand-made sweep summaries whose pooled values are worked out by hand.

  /usr/bin/python3 -m pytest tests/bench/test_pooled_sweeps.py
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "model_pairs" / "pooled_sweeps.py"
sys.path.insert(0, str(SCRIPT.parent))
import pooled_sweeps  # noqa: E402


def point(name, examples, correct, emitted, calls, change=0.0, half_width=0.0):
    return {"point": name, "examples": examples, "correct": correct, "emitted": emitted, "target_calls": calls,
            "accuracy_change": change, "accuracy_change_low": change - half_width,
            "accuracy_change_high": change + half_width}


# Benchmark A: 10 problems, KL loses 1 (-0.1 ± 0.2); B: 30 problems, KL gains 3 (+0.1 ± 0.1). Only A has topk:2.
A = {"points": [point("vanilla", 10, 6, 100, 10), point("kl:1", 10, 5, 150, 10, -0.1, 0.2),
                point("topk:2", 10, 6, 120, 10)]}
B = {"points": [point("vanilla", 30, 15, 300, 50), point("kl:1", 30, 18, 330, 40, 0.1, 0.1)]}


def test_pools_changes_by_problems_and_adds_standard_errors_as_strata():
    rows = {r["point"]: r for r in pooled_sweeps.pool([A, B])}
    assert list(rows) == ["vanilla", "kl:1"]  # topk:2 is in one summary only
    kl = rows["kl:1"]
    assert kl["problems"] == 40 and kl["correct"] == 23
    assert kl["change"] == pytest.approx((10 * -0.1 + 30 * 0.1) / 40)  # +0.05
    # se = sqrt((10 * 0.2/1.96)^2 + (30 * 0.1/1.96)^2) / 40, so 1.96 se = sqrt(2^2 + 3^2) / 40
    assert kl["change_low"] == pytest.approx(0.05 - 13 ** 0.5 / 40)
    assert kl["change_high"] == pytest.approx(0.05 + 13 ** 0.5 / 40)
    assert rows["vanilla"]["mat"] == pytest.approx(400 / 60)
    assert kl["mat"] == pytest.approx(480 / 50)
    assert kl["mat_ratio"] == pytest.approx(9.6 / (400 / 60))  # 1.44


def test_the_bar_needs_the_lower_end_too():
    kl = {r["point"]: r for r in pooled_sweeps.pool([A, B])}["kl:1"]
    assert not pooled_sweeps.meets_bar(kl, 1.15, 1, -3)  # lower end -4.0
    assert pooled_sweeps.meets_bar(kl, 1.15, 1, -5)
    assert not pooled_sweeps.meets_bar(kl, 1.5, 1, -5)  # MAT 1.44x


def test_refuses_points_over_other_problems_than_vanilla():
    partial = {"points": [point("vanilla", 30, 15, 300, 50), point("kl:1", 20, 12, 220, 25, 0.1, 0.1)]}
    with pytest.raises(ValueError, match="same problems"):
        pooled_sweeps.pool([A, partial])


def test_command_prints_the_table_and_fails_in_one_line_on_a_missing_file():
    # A directory of its own, removed afterwards (pytest's tmp_path keeps its last runs under /tmp).
    with tempfile.TemporaryDirectory(prefix="klspec-pooled-") as tmp:
        paths = []
        for name, summary in (("a", A), ("b", B)):
            paths.append(Path(tmp) / f"{name}.json")
            paths[-1].write_text(json.dumps(summary))
        out = subprocess.run([sys.executable, SCRIPT, *map(str, paths)], capture_output=True, text=True,
                             check=True).stdout
        assert "| kl:1 | 40 | 23 (57.5 %) | +5.0 [-4.0, +14.0] | 9.60 | 1.44× | not met |" in out
        bad = subprocess.run([sys.executable, SCRIPT, str(Path(tmp) / "none.json")], capture_output=True, text=True)
    assert bad.returncode != 0
    assert bad.stderr.startswith("pooled_sweeps.py: ") and bad.stderr.count("\n") == 1
