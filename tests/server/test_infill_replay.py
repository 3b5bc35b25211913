"""bench/serving/infill_replay.py, the editing-session replay (issue 61), on the random-weight Qwen2-vocabulary
FIM models of server.infill (its fixture writes them): two small Python files typed one after the other, four
requests, the last carrying the first file's chunk as input_extra. klspec serve at vanilla, kl and the two
alternating, llama-server with the draft at the same fixed γ: the same prompts everywhere, greedy answers
token for token klspec vanilla's, each mixed-run answer that of its judge's own run, the second request
evaluating less than the first (its prefix reused).

The plug-in's background requests (n_predict 0) are left out (--no-ring-requests): klspec serve keeps no KV
cells after an /infill with n_predict 0 where llama-server keeps the prompt's, so the next prompts would come
from caches filled in other batches, and on a random-weight model that alone moves greedy answers across near
ties.

Environment: KLSPEC_CLI, KLSPEC_LLAMA_SERVER, KLSPEC_INFILL_TARGET, KLSPEC_INFILL_DRAFT.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench/serving/infill_replay.py"
FIRST = '''def rectangle_area(width, height):
    area = width * height
    return area
'''
SECOND = '''class Stack:
    def __init__(self):
        self.items = []
'''


@pytest.fixture(scope="module")
def sources():
    folder = tempfile.mkdtemp(prefix="klspec-infill-replay-")
    try:
        paths = [os.path.join(folder, name) for name in ("geometry.py", "stack.py")]
        for path, text in zip(paths, (FIRST, SECOND)):
            Path(path).write_text(text)
        yield paths
    finally:
        shutil.rmtree(folder)


def replay(sources, *flags):
    command = [sys.executable, str(SCRIPT), "--klspec", os.environ["KLSPEC_CLI"],
               "--llama-server", os.environ["KLSPEC_LLAMA_SERVER"], "-m", os.environ["KLSPEC_INFILL_TARGET"],
               "-md", os.environ["KLSPEC_INFILL_DRAFT"], "-c", "2048", "-b", "512", "-t", "1", "--n-predict", "12",
               "--t-max-predict-ms", "0", "--limit", "4", "--source", sources[0], "--source", sources[1], *flags]
    return subprocess.run(command, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})


def test_the_session_is_llama_vims(sources):
    done = replay(sources, "--requests-only")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    fims = [e for e in events if e["kind"] == "fim"]
    assert [e["where"].rsplit(":", 1)[1] for e in fims] == ["1", "2", "3", "1"]
    first, last = fims[0]["body"], fims[-1]["body"]
    # The current line is the prompt, the lines above the prefix; the indentation is n_indent.
    assert first["prompt"] == "def rectangle_area(width, height):" and first["input_prefix"] == "\n"
    assert fims[1]["body"]["input_prefix"] == "def rectangle_area(width, height):\n" and fims[1]["body"]["n_indent"] == 4
    assert first["input_extra"] == [] and first["cache_prompt"] and first["n_predict"] == 12
    # The first file, saved and left, is the ring's chunk in the second file's request.
    assert [c["filename"] for c in last["input_extra"]] == [os.path.basename(sources[0])]
    assert last["input_extra"][0]["text"] == FIRST
    assert [e["kind"] for e in events].count("ring") == 1  # the chunk's background request


def test_servers_give_the_same_greedy_answers_and_reuse_the_prompt(sources):
    # --interleave: the four servers run at once, each request going to each in turn; every server must still
    # keep its own cache and answers (test_table_and_errors runs one server alone, the other path).
    done = replay(sources, "--json", "--check", "--interleave", "--no-ring-requests", "--judges", "vanilla,kl:0.3",
                  "--llama-gammas", "4", "--no-llama-target-only",
                  "--klspec-args", "--draft-policy fixed --draft-max 4")
    assert done.stdout.startswith("{"), done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["check_failures"] == [] and done.returncode == 0, (report["check_failures"], done.stderr[-2000:])
    names = [s["server"] for s in report["servers"]]
    assert names == ["klspec vanilla", "klspec kl:0.3", "klspec mixed", "llama-server γ4"]
    assert report["n_fim"] == 4 and report["n_ring"] == 0
    fims = {name: [r for r in records if r["kind"] == "fim"] for name, records in report["records"].items()}
    # Greedy answers: llama-server's with the draft token for token klspec vanilla's, prompts of the same length.
    llama = next(s for s in report["servers"] if s["server"] == "llama-server γ4")
    assert llama["vs_reference"]["equal"] == 4 and llama["vs_reference"]["prompt_length_differs"] == 0
    for a, b in zip(fims["klspec vanilla"], fims["llama-server γ4"]):
        assert a["tokens"] == b["tokens"] and len(a["tokens"]) > 0
        assert a["tokens_evaluated"] == b["tokens_evaluated"]
        assert a["timings/prompt_n"] == b["timings/prompt_n"]  # the same reuse as llama-server's --cache-reuse
    # The mixed run alternates the judges, and each answer is that of its judge's own run (γ fixed).
    assert [r["judge"] for r in fims["klspec mixed"]] == ["vanilla", "kl", "vanilla", "kl"]
    assert report["independence"]["vanilla"]["equal"] == 2 and report["independence"]["kl:0.3"]["equal"] == 2
    for name, records in fims.items():
        # The first request finds nothing cached (the warm-up shares no prefix); the third, typed a line below
        # the second, reuses all but the prompt's end: it evaluates less of its longer prompt.
        assert records[0]["timings/cache_n"] == 0 and records[0]["timings/prompt_n"] == records[0]["tokens_evaluated"]
        assert records[2]["tokens_evaluated"] > records[1]["tokens_evaluated"]
        assert records[2]["timings/prompt_n"] < records[1]["timings/prompt_n"], name
        assert records[2]["timings/cache_n"] > records[2]["timings/prompt_n"], name
    # The fourth request carries the first file as extra context: the longest prompt.
    assert fims["klspec vanilla"][3]["tokens_evaluated"] > max(r["tokens_evaluated"] for r in fims["klspec vanilla"][:3])
    for summary in report["servers"]:
        assert summary["requests"] == 4 and summary["latency_ms_p50"] > 0 and summary["ttft_ms_p50"] > 0
        assert summary["drafted"] > 0 and 0 <= summary["acceptance"] <= 1
        if summary["server"].startswith("klspec"):
            assert summary["mat"] >= 1
    assert report["cpu"] and any("Model name" in line for line in report["cpu"])


def test_table_and_errors(sources):
    done = replay(sources, "--judges", "vanilla", "--llama-server", "", "--limit", "2",
                  "--klspec-variant=--draft-policy off")
    assert done.returncode == 0, done.stderr
    assert "Model name" in done.stdout and "latency p50" in done.stdout
    lines = done.stdout.splitlines()
    assert any(line.startswith("klspec vanilla ") and "--draft-policy" not in line for line in lines)
    # The variant: the same server with the flags added, its answers compared with vanilla's ("N/2").
    variant = [line for line in lines if line.startswith("klspec vanilla --draft-policy off ")]
    assert len(variant) == 1 and re.search(r" [0-2]/2", variant[0]), lines
    assert "serve -m" in done.stdout and "--draft-policy off" in done.stdout  # its command line, printed above
    not_gguf = os.path.join(os.path.dirname(sources[0]), "not.gguf")
    Path(not_gguf).write_text("not a model\n")
    for flags, message in ((["--source", "/nonexistent.py"], "no such file"), (["--judges", "kl"], "bad setting"),
                           (["-m", "/nonexistent.gguf"], "no such model file"),
                           (["-m", not_gguf], "klspec vanilla exited (1)")):
        done = replay(sources, *flags)
        assert done.returncode == 1 and done.stderr.startswith("infill_replay: error: ") and message in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and not done.stdout
