"""The reduced-vocabulary head writer (tools/real_model/reduced_vocab.py) on the tiny random-weight Gemma 3 of
test_early_exit.py (stories260K's 512-token vocabulary, head tied to the embedding), in a temporary directory:
the head keeps the ranking's first N rows in its order, the tokenizer's arrays the same tokens, and llama.cpp loads it.

  PYTHONPATH=<llama.cpp>/gguf-py /usr/bin/python3 -m pytest tests/real_model/test_reduced_vocab.py
  (KLSPEC_CLI=<build>/klspec also loads the reduced model with klspec; CTest sets both.)
"""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFReader

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_early_exit import write_tiny_gemma3  # noqa: E402

WRITER = Path(__file__).resolve().parents[2] / "tools" / "real_model" / "reduced_vocab.py"
N = 100


def write(folder, ranking, sizes):
    model, ranking_path = folder / "tiny-gemma3.gguf", folder / "ranking.json"
    if not model.exists():
        write_tiny_gemma3(model)
    ranking_path.write_text(json.dumps(ranking))
    return subprocess.run([sys.executable, str(WRITER), str(model), str(ranking_path), "--sizes", sizes,
                           "--out-dir", str(folder)], capture_output=True, text=True)


@pytest.fixture(scope="module")
def folder():
    with tempfile.TemporaryDirectory(prefix="klspec-reduced-vocab-") as name:
        yield Path(name)


@pytest.fixture(scope="module")
def reduced(folder):
    ranking = [int(t) for t in np.random.default_rng(1).permutation(512)]
    ranking.remove(1)
    ranking.insert(3, 1)  # the BOS (1) among the N, at position 3; the EOS (2) is placed by the permutation
    done = write(folder, ranking, str(N))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(folder / f"tiny-gemma3-vocab{N}.gguf")]
    return folder / "tiny-gemma3.gguf", Path(done.stdout.split()[0]), ranking


def test_the_head_and_the_vocabulary_keep_the_rankings_first_n_in_order(reduced):
    source, written, ranking = GGUFReader(str(reduced[0])), GGUFReader(str(reduced[1])), reduced[2]
    embd = {r: {t.name: t for t in r.tensors}["token_embd.weight"] for r in (source, written)}
    assert embd[written].data.shape == (N, embd[source].data.shape[1])
    np.testing.assert_array_equal(embd[written].data, embd[source].data[ranking[:N]])
    tokens = source.fields["tokenizer.ggml.tokens"].contents()
    assert written.fields["tokenizer.ggml.tokens"].contents() == [tokens[t] for t in ranking[:N]]
    assert len(written.fields["tokenizer.ggml.scores"].contents()) == N
    assert written.fields["tokenizer.ggml.bos_token_id"].contents() == 3
    eos = source.fields["tokenizer.ggml.eos_token_id"].contents()
    expected_eos = ranking.index(eos) if ranking.index(eos) < N else N - 1
    assert written.fields["tokenizer.ggml.eos_token_id"].contents() == expected_eos
    # Every other tensor is the source's, byte for byte.
    others = {t.name: bytes(t.data) for t in source.tensors if t.name != "token_embd.weight"}
    assert others == {t.name: bytes(t.data) for t in written.tensors if t.name != "token_embd.weight"}


@pytest.mark.skipif(not os.environ.get("KLSPEC_CLI"), reason="KLSPEC_CLI (the klspec binary) is not set")
def test_llama_cpp_loads_the_reduced_model(folder):
    # The ids in order, cut to 300: the special and byte tokens (0-258) stay, so stories260K's SentencePiece
    # tokenizer can still spell the prompt (a random 100 leave it pieces it cannot look up).
    loadable = folder / "in-order"
    loadable.mkdir(exist_ok=True)
    done = write(loadable, list(range(512)), "300")
    assert done.returncode == 0, done.stderr
    run = subprocess.run([os.environ["KLSPEC_CLI"], "generate", "-m", done.stdout.split()[0], "-p", "Once upon a time",
                          "-n", "4", "-t", "1", "-c", "128", "--json"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["stats"]["emitted"] >= 1


@pytest.mark.skipif(not os.environ.get("KLSPEC_CLI"), reason="KLSPEC_CLI (the klspec binary) is not set")
def test_a_vocabulary_that_cannot_spell_the_prompt_is_a_one_line_error(reduced):
    run = subprocess.run([os.environ["KLSPEC_CLI"], "generate", "-m", str(reduced[1]), "-p", "Once upon a time",
                          "-n", "4", "-t", "1", "-c", "128"], capture_output=True, text=True)
    assert run.returncode == 1
    assert "its vocabulary cannot spell the text" in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr


@pytest.mark.parametrize("ranking, sizes, message", [
    ([0, 1, 1], "2", "distinct token ids below 512"),
    ([0, 1, 600], "2", "distinct token ids below 512"),
    ([0, 1, 2], "4", "every N must be in 1..3"),
    ([0, 1, 2], "two", "is not a list of integers"),
    ({"not": "a list"}, "1", "distinct token ids below 512"),
])
def test_bad_rankings_and_sizes_are_one_line_errors(folder, ranking, sizes, message):
    done = write(folder, ranking, sizes)
    assert done.returncode != 0
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
