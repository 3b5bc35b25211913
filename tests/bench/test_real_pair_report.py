"""The real pair's report (`KLSPEC_REPORT=1 bench/model_pairs/real_pair_paper.sh`) regenerates every sweep's table
from the results committed under results/real-pair, decoding nothing, in under two minutes; the committed tables are
what their answers give with today's scorers, and docs/real-pair.md shows them as they are (each inside a
`<!-- report: NAME -->` ... `<!-- /report -->` block). So a doc cannot drift from its data (issue 83).

  KLSPEC_CLI=build/klspec /usr/bin/python3 -m pytest tests/bench/test_real_pair_report.py
"""
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results" / "real-pair"
DOC = ROOT / "docs" / "real-pair.md"
DATASETS = Path(os.environ.get("KLSPEC_DATA_DIR", ROOT.parent / "shared" / "datasets"))
SWEEPS = sorted(p.parent.name for p in RESULTS.glob("*/sweep.json"))


def table_rows(text):
    return [line for line in text.splitlines() if line.startswith("|")]


def doc_blocks():
    """{sweep: its table's rows} of every report block in docs/real-pair.md."""
    blocks = re.findall(r"<!-- report: (\S+) -->\n(.*?)<!-- /report -->", DOC.read_text(), flags=re.S)
    return {name: table_rows(body) for name, body in blocks}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """The report run over a copy of the committed results: (its folder, its seconds)."""
    if not DATASETS.is_dir():
        pytest.skip(f"{DATASETS} is absent (docs/datasets.md)")
    out = tmp_path_factory.mktemp("real-pair")
    shutil.copytree(RESULTS, out, dirs_exist_ok=True)
    env = dict(os.environ, KLSPEC_REPORT="1", KLSPEC=os.environ.get("KLSPEC_CLI", str(ROOT / "build" / "klspec")),
               KLSPEC_DATA_DIR=str(DATASETS))
    start = time.monotonic()
    run = subprocess.run(["bash", str(ROOT / "bench" / "model_pairs" / "real_pair_paper.sh"), str(out)],
                         capture_output=True, text=True, env=env, timeout=600)
    seconds = time.monotonic() - start
    assert run.returncode == 0, run.stderr[-3000:]
    return out, seconds


def test_there_are_sweeps_to_report():
    assert SWEEPS, f"no sweep under {RESULTS}"


@pytest.mark.parametrize("sweep", SWEEPS)
def test_a_committed_table_is_what_its_answers_give(report, sweep):
    regenerated = table_rows((report[0] / sweep / "table.md").read_text())
    assert regenerated, f"the report wrote no table for {sweep}"
    assert regenerated == table_rows((RESULTS / sweep / "table.md").read_text()), (
        f"results/real-pair/{sweep}/table.md is not what its answers give now: run the report on the folder itself "
        "(KLSPEC_REPORT=1 bench/model_pairs/real_pair_paper.sh) and commit it, with the doc")


@pytest.mark.parametrize("sweep", SWEEPS)
def test_the_doc_shows_each_committed_table(sweep):
    blocks = doc_blocks()
    assert sweep in blocks, f"docs/real-pair.md has no <!-- report: {sweep} --> block"
    assert blocks[sweep] == table_rows((RESULTS / sweep / "table.md").read_text()), (
        f"docs/real-pair.md's {sweep} table is not results/real-pair/{sweep}/table.md")


def test_the_report_takes_under_two_minutes(report):
    assert report[1] < 120, f"the report took {report[1]:.0f} s"
