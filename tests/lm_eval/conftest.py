# A `klspec serve` on the default pair for the harness and the openai client (label lm-eval); paths as CTest
# sets them (python/CMakeLists.txt), else a build in build/.
import os
import pathlib
import subprocess

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("KLSPEC_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
CLI = os.environ.get("KLSPEC_CLI", str(SOURCE_DIR / "build/klspec"))
TARGET = str(SOURCE_DIR / "models/testbed-target.gguf")
# One thread for the server, `klspec bench` and the module's Engine: the harness's own work leaves a second core idle
# half the time, so the test runs beside the others, not alone.
THREADS = 1
# The server's defaults, which `klspec bench` is given too: a fixed γ makes KL's output reproducible.
DECODING = ["-t", str(THREADS), "--draft-max", "4", "--draft-policy", "fixed"]


@pytest.fixture(scope="session")
def server():
    """The server's base URL (a free port)."""
    process = subprocess.Popen([CLI, "serve", "--port", "0", *DECODING], stdout=subprocess.PIPE, text=True)
    line = process.stdout.readline()
    assert "listening on http://" in line, line
    yield line.split("listening on ")[1].split(" ")[0]
    process.terminate()
    process.wait(timeout=30)
