# A `klspec serve` on the default pair for the harness and the openai client (label lm-eval); paths as CTest
# sets them (python/CMakeLists.txt), else a build in build/.
import os
import pathlib
import subprocess

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("KLSPEC_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
CLI = os.environ.get("KLSPEC_CLI", str(SOURCE_DIR / "build/klspec"))
TARGET = str(SOURCE_DIR / "models/testbed-target.gguf")
# The server's defaults, which `klspec bench` is given too: a fixed γ makes KL's output reproducible. One thread:
# the harness's own work leaves a second core idle half the time, so the test runs beside the others, not alone.
DECODING = ["-t", "1", "--draft-max", "4", "--draft-policy", "fixed"]
THREADS = 1  # the module's Engine, for the same reason


@pytest.fixture(scope="session")
def server():
    """The server's base URL (a free port)."""
    process = subprocess.Popen([CLI, "serve", "--port", "0", *DECODING], stdout=subprocess.PIPE, text=True)
    line = process.stdout.readline()
    assert "listening on http://" in line, line
    yield line.split("listening on ")[1].split(" ")[0]
    process.terminate()
    process.wait(timeout=30)
