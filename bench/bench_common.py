"""What the benchmark scripts share: where things are, the prompts, and running klspec."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_KLSPEC = ROOT / "build" / "klspec"
DEFAULT_TARGET = ROOT / "tests/data/stories260K.gguf"
DEFAULT_DRAFT_Q8 = ROOT / "build/models/stories260K-q8_0.gguf"
DEFAULT_DRAFT_Q4 = ROOT / "build/models/stories260K-q4_0.gguf"

STORY_PROMPTS = [
    "Once upon a time",
    "Tom and his dog went to the park.",
    "Lily saw a butterfly in the sky.",
    "The little bird could not fly",
    "Sara wanted to bake a cake for her mom.",
    "Ben found a shiny stone",
]


def run(cmd):
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"bench: command failed ({done.returncode}): {' '.join(map(str, cmd))}\n{done.stderr[-2000:]}")
    return done


def klspec_generate(klspec, target, prompt, extra_args):
    """One `klspec generate --json` run; returns its parsed JSON object."""
    return json.loads(run([klspec, "generate", "-m", target, "-p", prompt, "--json", *extra_args]).stdout)
