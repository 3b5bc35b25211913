"""The early-exit draft writer (tools/real_model/early_exit.py) on a tiny random-weight Gemma 3 written here, in
a temporary directory: the real model's writer runs only when the cache lacks its draft, so a warm cache
would hide a broken writer (issue 62: one that dropped output_norm.weight passed the suite, and `klspec
generate` refused the draft). The tiny model has the real one's tensors (tied output head, the extra norms) and
a per-layer sliding-window array; its vocabulary is stories260K's.

  PYTHONPATH=<llama.cpp>/gguf-py /usr/bin/python3 -m pytest tests/real_model/test_early_exit.py
  (KLSPEC_CLI=<build>/klspec also loads every draft with klspec; CTest sets both.)
"""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFReader, GGUFWriter

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "model_families"))
from make_family_model import read_tokenizer  # noqa: E402

WRITER = ROOT / "tools" / "real_model" / "early_exit.py"
LAYERS, DIM, HEADS, HEAD_DIM, FF = 4, 64, 2, 32, 128
LAYER_TENSORS = {  # name: numpy shape (ggml's reversed)
    "attn_norm": (DIM,), "attn_q": (HEADS * HEAD_DIM, DIM), "attn_k": (HEAD_DIM, DIM), "attn_v": (HEAD_DIM, DIM),
    "attn_output": (DIM, HEADS * HEAD_DIM), "attn_q_norm": (HEAD_DIM,), "attn_k_norm": (HEAD_DIM,),
    "post_attention_norm": (DIM,), "ffn_norm": (DIM,), "ffn_gate": (FF, DIM), "ffn_up": (FF, DIM),
    "ffn_down": (DIM, FF), "post_ffw_norm": (DIM,)}


def write_tiny_gemma3(path):
    """Gemma 3's layout at toy size: one KV head, the output head tied to the embedding (no output.weight)."""
    rng = np.random.default_rng(0)
    w = GGUFWriter(str(path), "gemma3")
    w.add_name("klspec-tiny-gemma3")
    w.add_context_length(256)
    w.add_embedding_length(DIM)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(FF)
    w.add_head_count(HEADS)
    w.add_head_count_kv(1)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_sliding_window(16)
    w.add_array("gemma3.attention.sliding_window_pattern", [i % 2 == 0 for i in range(LAYERS)])
    vocab = read_tokenizer(ROOT / "tests" / "data" / "stories260K.gguf")
    for key, (value, vtype, sub) in vocab.items():
        w.add_key_value(key, value, vtype, sub)
    n_vocab = len(vocab["tokenizer.ggml.tokens"][0])
    w.add_tensor("token_embd.weight", rng.standard_normal((n_vocab, DIM), dtype=np.float32))
    w.add_tensor("output_norm.weight", 1 + 0.1 * rng.standard_normal(DIM, dtype=np.float32))
    for i in range(LAYERS):
        for name, shape in LAYER_TENSORS.items():
            w.add_tensor(f"blk.{i}.{name}.weight", 0.1 * rng.standard_normal(shape, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture(scope="module")
def drafts():
    """The tiny target and its early exits at 1 and 3 layers: {k: path}, plus the target under 0. In a directory
    of its own, removed afterwards whatever the outcome (pytest's tmp_path keeps its last runs under /tmp)."""
    with tempfile.TemporaryDirectory(prefix="klspec-early-exit-") as name:
        yield written_drafts(Path(name))


def written_drafts(folder):
    target = folder / "tiny-gemma3.gguf"
    write_tiny_gemma3(target)
    written = subprocess.run([sys.executable, str(WRITER), str(target), "--layers", "3,1", "--out-dir", str(folder)],
                             capture_output=True, text=True, check=True).stdout.split()
    assert written == [str(folder / "tiny-gemma3-exit1.gguf"), str(folder / "tiny-gemma3-exit3.gguf")]
    return {0: target, 1: Path(written[0]), 3: Path(written[1])}


def tensors(path):
    return {t.name: t for t in GGUFReader(str(path)).tensors}


@pytest.mark.parametrize("k", [1, 3])
def test_draft_keeps_the_first_k_layers_and_every_shared_tensor_byte_for_byte(drafts, k):
    source, draft = tensors(drafts[0]), tensors(drafts[k])
    expected = {name for name in source if not name.startswith("blk.") or int(name.split(".")[1]) < k}
    assert "output_norm.weight" in expected
    assert set(draft) == expected
    for name in expected:
        assert draft[name].tensor_type == source[name].tensor_type, name
        assert bytes(draft[name].data) == bytes(source[name].data), name


@pytest.mark.parametrize("k", [1, 3])
def test_draft_metadata_says_k_layers(drafts, k):
    fields = GGUFReader(str(drafts[k])).fields
    assert fields["gemma3.block_count"].contents() == k
    assert fields["gemma3.attention.sliding_window_pattern"].contents() == [i % 2 == 0 for i in range(k)]
    assert fields["tokenizer.ggml.tokens"].contents() == GGUFReader(str(drafts[0])).fields["tokenizer.ggml.tokens"].contents()


@pytest.mark.skipif(not os.environ.get("KLSPEC_CLI"), reason="KLSPEC_CLI (the klspec binary) is not set")
@pytest.mark.parametrize("k", [1, 3])
def test_klspec_decodes_with_the_draft(drafts, k):
    run = subprocess.run([os.environ["KLSPEC_CLI"], "generate", "-m", str(drafts[0]), "-md", str(drafts[k]),
                          "-p", "Once upon a time", "-n", "4", "-t", "1", "-c", "128"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
