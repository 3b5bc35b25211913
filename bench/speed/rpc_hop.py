"""The cost of the RPC hop: `klspec generate --json` tokens/s with the target local, on one ggml-rpc-server
and split over two (loopback, 1 thread each), for the default pair (speculative and target-only) and
stories260K (with its Q4_0 draft, and target-only). Prints the medians as a markdown table, and fails when
a configuration's output differs from the local run's (offloading must not change a greedy token).

  python3 bench/speed/rpc_hop.py --rpc-server ~/.cache/klspec/llama.cpp-de3ff815ea7d-*/install/bin/ggml-rpc-server \
      [--repeats 7] [-n 128]
"""
import argparse
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: bench_common, llama_bench_lib
from bench_common import DEFAULT_DRAFT_Q4, DEFAULT_KLSPEC, DEFAULT_TARGET, ROOT, free_port, klspec_generate  # noqa: E402

WORD_PROMPT = "Q: Dan has 5 piles with 27 leaves in each and 73 more. How many leaves does Dan have now?\nA:"
CASES = [  # label, target, extra flags, prompt
    ("default pair, draft local", ROOT / "models/testbed-target.gguf",
     ["-md", ROOT / "models/testbed-draft.gguf", "--draft-max", "8"], WORD_PROMPT),
    ("default pair target only", ROOT / "models/testbed-target.gguf", [], WORD_PROMPT),
    ("stories260K + Q4_0 draft (local)", DEFAULT_TARGET, ["-md", DEFAULT_DRAFT_Q4], "Once upon a time"),
    ("stories260K target only", DEFAULT_TARGET, [], "Once upon a time"),
]


def start_server(binary):
    port = free_port()
    server = subprocess.Popen([binary, "-H", "127.0.0.1", "-p", str(port), "-t", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):  # until it accepts connections
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return server, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    server.kill()
    raise SystemExit(f"bench: {binary} did not listen on port {port}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rpc-server", required=True, help="llama.cpp's ggml RPC server binary")
    parser.add_argument("--klspec", default=DEFAULT_KLSPEC)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("-n", type=int, default=128, help="tokens to generate")
    args = parser.parse_args()
    servers = [start_server(args.rpc_server) for _ in range(2)]
    placements = [("local", []), ("1 server", ["--rpc", servers[0][1]]),
                  ("2 servers", ["--rpc", ",".join(address for _, address in servers)])]
    try:
        print("| run (`-t 1`, `-n %d`) | %s |" % (args.n, " | ".join(label for label, _ in placements)))
        print("|---|" + "---|" * len(placements))
        for label, target, flags, prompt in CASES:
            medians, texts = [], set()
            for _, rpc in placements:
                runs = [klspec_generate(args.klspec, target, prompt, ["-t", "1", "-n", str(args.n), *flags, *rpc])
                        for _ in range(args.repeats)]
                texts.update(run["text"] for run in runs)
                medians.append(statistics.median(run["stats"]["tokens_per_second"] for run in runs))
            if len(texts) != 1:
                raise SystemExit(f"bench: {label}: the outputs differ between runs or placements")
            print(f"| {label} | " + " | ".join(f"{m:.0f}" for m in medians) + " |", flush=True)
    finally:
        for server, _ in servers:
            server.kill()


if __name__ == "__main__":
    main()
