"""What the benchmark scripts share: where things are, the prompts, and running klspec."""
import json
import math
import os
import re
import shlex
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_KLSPEC = ROOT / "build" / "klspec"
DEFAULT_TARGET = ROOT / "tests/data/stories260K.gguf"
DEFAULT_DRAFT_Q8 = ROOT / "build/models/stories260K-q8_0.gguf"
DEFAULT_DRAFT_Q4 = ROOT / "build/models/stories260K-q4_0.gguf"
TESTBED_TARGET = ROOT / "models/testbed-target.gguf"  # the default pair of klspec's commands
TESTBED_DRAFT = ROOT / "models/testbed-draft.gguf"

STORY_PROMPTS = [
    "Once upon a time",
    "Tom and his dog went to the park.",
    "Lily saw a butterfly in the sky.",
    "The little bird could not fly",
    "Sara wanted to bake a cake for her mom.",
    "Ben found a shiny stone",
]


def wilson(successes, n, z=1.96):
    """Wilson score 95 % interval of a proportion (0, 0 for no trials)."""
    if n == 0:
        return 0.0, 0.0
    p = successes / n
    centre, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n)


def free_port():
    """A loopback TCP port free right now, for a server the script starts."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def checkout_commit():
    """The repository's HEAD, short: the build a report measured unless the caller names another."""
    return run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]).stdout.strip()


def cpu_header():
    """The CPU as lscpu names it: Markdown list lines of the model name, CPU counts, cache sizes and SIMD."""
    out = run(["lscpu"]).stdout
    keep = ("Model name", "CPU(s)", "Thread(s) per core", "L1d cache", "L2 cache", "L3 cache", "Flags")
    lines = []
    for line in out.splitlines():
        key = line.split(":")[0].strip()
        if key in keep and key != "Flags":
            lines.append(f"- {key}: {line.split(':', 1)[1].strip()}")
        if key == "Flags":
            flags = set(line.split(":", 1)[1].split())
            simd = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_tile") if f in flags]
            lines.append(f"- SIMD: {', '.join(simd)}")
    return lines


def fmt(value, spec):
    """value formatted by spec, '-' for None (a figure a server did not report)."""
    return "-" if value is None else format(value, spec)


def print_cpu_and_commands(cpu_lines, commands):
    """The head of a report: the CPU (cpu_header()'s lines), then each server's command line by name."""
    print("CPU:")
    print("\n".join(cpu_lines))
    for name, command in commands.items():
        print(f"{name}: {command}")


# llama-server's flags in llama.cpp de3ff815: -md loads the draft but only --spec-type draft-simple makes it
# speculate (without it the server decodes target-only), --spec-draft-n-max its gamma (the old --draft-max is
# removed), -td the draft's threads, -np the slots; its -c is the whole context, split among the slots (klspec
# serve's -c is per slot). Greedy requests (temperature 0) make its speculation lossless like klspec's vanilla judge.
def llama_server_args(target=TESTBED_TARGET, draft=TESTBED_DRAFT, parallel=1, ctx_per_slot=2048, threads=1,
                      gamma=16, extra=""):
    """llama-server's command-line flags (a string) for speculative decoding of the pair, as klspec serve does."""
    args = (f"-m {shlex.quote(str(target))} -md {shlex.quote(str(draft))} --spec-type draft-simple "
            f"--spec-draft-n-max {gamma} -np {parallel} -c {ctx_per_slot * parallel} -t {threads} -td {threads} "
            "--no-webui")
    return f"{args} {extra}".strip()


class Server:
    """A server (klspec serve, llama-server: any that takes --host and --port and answers GET /health) on a free
    loopback port, for as long as the `with` block runs. `command` is its binary and flags, less those two."""

    def __init__(self, command, name=None, timeout=120):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.name = name or Path(str(command[0])).name
        self.timeout = timeout
        self.command = [str(c) for c in command] + ["--host", "127.0.0.1", "--port", str(self.port)]

    def log_tail(self, lines=3):
        self.log.flush()
        self.log.seek(0)
        return self.log.read().strip().splitlines()[-lines:]

    def cpu_seconds(self):
        """User plus system CPU time the server has used so far (/proc/PID/stat), its threads' spinning included."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def __enter__(self):
        # Its log goes to a file: an undrained pipe fills within a minute of speculative requests (llama-server
        # logs each one's timings) and then blocks the server mid-stream.
        self.log = tempfile.TemporaryFile("w+")
        self.process = subprocess.Popen(self.command, stdout=subprocess.DEVNULL, stderr=self.log, text=True)
        deadline = time.time() + self.timeout
        while time.time() < deadline:
            if self.process.poll() is not None:
                sys.exit(f"bench: {self.name} exited ({self.process.returncode}): {self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as health:
                    if health.status == 200:
                        return self
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.2)
        self.process.kill()
        self.process.wait()
        sys.exit(f"bench: {self.name} did not become healthy within {self.timeout} s")

    def __exit__(self, *_):
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def fetch_real_model(name):
    """The path scripts/fetch-real-model.sh prints for NAME (it installs the model into the cache first)."""
    return Path(run(["bash", ROOT / "scripts" / "fetch-real-model.sh", name]).stdout.strip().splitlines()[-1])


def pinned_llama_server():
    """$KLSPEC_LLAMA_SERVER, else the llama-server of the pinned build llama-bench comes from (KLSPEC_LLAMA_INSTALL, or
    the one build in the cache: with several, the first by name was taken, which after a change of build flags was
    the old build's), else ''."""
    if os.environ.get("KLSPEC_LLAMA_SERVER"):
        return os.environ["KLSPEC_LLAMA_SERVER"]
    from llama_bench_lib import default_llama_install  # bench/lib, as this module
    server = default_llama_install() / "bin" / "llama-server"
    return str(server) if server.exists() else ""


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
