"""What the benchmark scripts share: where things are, the prompts, and running klspec."""
import json
import re
import socket
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


def free_port():
    """A loopback TCP port free right now, for a server the script starts."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run(cmd, env=None):
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"bench: command failed ({done.returncode}): {' '.join(map(str, cmd))}\n{done.stderr[-2000:]}")
    return done


def klspec_generate(klspec, target, prompt, extra_args):
    """One `klspec generate --json` run; returns its parsed JSON object."""
    return json.loads(run([klspec, "generate", "-m", target, "-p", prompt, "--json", *extra_args]).stdout)


LLAMA_DECODED = re.compile(r"decoded\s+(\d+)\s+tokens in\s+([\d.]+)\s+seconds")
LLAMA_ACCEPT = re.compile(r"accept\s*=\s*([\d.]+)%")


def llama_speculative_simple(llama_bin, target, draft, prompt, gamma, threads, n_predict, extra_args=()):
    """One greedy `llama-speculative-simple --spec-type draft-simple` run: (tokens, seconds, acceptance) as it
    reports them. Its asynchronous logger sometimes exits before printing the final statistics; such a run is
    repeated (its report, not its speed, was lost)."""
    cmd = [Path(llama_bin) / "llama-speculative-simple", "-m", target, "-md", draft, "-p", prompt, "-n", n_predict,
           "-t", threads, "--temp", "0", "--spec-type", "draft-simple", "--spec-draft-n-max", gamma,
           "--spec-draft-n-min", "0", *extra_args]
    for _ in range(20):
        done = run(cmd)
        log = done.stdout + done.stderr
        decoded, accept = LLAMA_DECODED.search(log), LLAMA_ACCEPT.search(log)
        if decoded and accept:
            return int(decoded.group(1)), float(decoded.group(2)), float(accept.group(1)) / 100
    sys.exit("bench: llama-speculative-simple never printed its statistics")


def judge_args(setting, head=None):
    """klspec flags of a sweep setting, with its rule and value: vanilla, kl:TAU (confidence mask 0.9),
    kl-nomask:TAU, autojudge:TAU or autojudge:qQ (the head's threshold candidate at quantile Q), topk:K,
    topn-delta:N/DELTA, or RULE:THRESHOLD (target-entropy, prob-threshold, typical, fly, ...)."""
    rule, _, value = setting.partition(":")
    if rule == "vanilla":
        return ["--judge", "vanilla"], "vanilla", ""
    if rule in ("kl", "kl-nomask"):
        mask = "0.9" if rule == "kl" else "1"
        return ["--judge", "kl", "--judge-threshold", value, "--confidence-mask", mask], rule, value
    if rule == "autojudge":
        if value.startswith("q"):
            q = float(value[1:])
            cands = json.loads(Path(head).read_text())["threshold_candidates"]
            value = f'{min(cands, key=lambda c: abs(c["quantile"] - q))["threshold"]:.4f}'
        return ["--judge", "autojudge", "--judge-head", str(head), "--judge-threshold", value], rule, value
    if rule == "topk":
        return ["--judge", "topk", "--judge-topk", value], rule, value
    if rule == "topn-delta":  # topn-delta:N/DELTA
        n, _, delta = value.partition("/")
        return ["--judge", rule, "--judge-topk", n, "--judge-threshold", delta], rule, value
    return ["--judge", rule, "--judge-threshold", value], rule, value  # target-entropy, prob-threshold, typical, ...
