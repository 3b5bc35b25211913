# Paths the tests use: set by CTest (python/CMakeLists.txt); by hand, the defaults below fit a build in build/.
import os
import pathlib

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("KLSPEC_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
BUILD_DIR = SOURCE_DIR / "build"
CLI = os.environ.get("KLSPEC_CLI", str(BUILD_DIR / "klspec"))
STORIES = os.environ.get("KLSPEC_STORIES_GGUF", str(SOURCE_DIR / "tests/data/stories260K.gguf"))
STORIES_Q4 = os.path.join(os.environ.get("KLSPEC_MODEL_DIR", str(BUILD_DIR / "models")), "stories260K-q4_0.gguf")
DEFAULT_TARGET = str(SOURCE_DIR / "models/testbed-target.gguf")
DEFAULT_DRAFT = str(SOURCE_DIR / "models/testbed-draft.gguf")
THREADS = 2


@pytest.fixture(scope="session")
def stories():
    import klspec
    return klspec.Engine(STORIES, STORIES_Q4, threads=THREADS, parallel=3, hidden_states=True)


@pytest.fixture(scope="session")
def testbed():
    import klspec
    return klspec.Engine(DEFAULT_TARGET, DEFAULT_DRAFT, threads=THREADS)
