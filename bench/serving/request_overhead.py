#!/usr/bin/python3
"""What one short request costs on a kept-alive connection, klspec serve against llama-server on the same target:
lm-evaluation-harness's loglikelihood runs send thousands of such requests one at a time (a /tokenize and a
one-token completion each), so per-request overhead, not decoding speed, sets their time.

  /usr/bin/python3 bench/serving/request_overhead.py [--klspec build/klspec] [-m models/testbed-target.gguf]
      [--requests 40] [--rounds 2] [--also-klspec OTHER/klspec] [--json]

Each server in turn (--rounds interleaved rounds, the second in reverse order), started alike with `-t 2`, one
client (Python's http.client: one connection, kept alive, each request in one write) sends --requests of each:
  * /tokenize of a short text;
  * a one-token greedy completion of a short prompt, and an eight-token one.
Both servers decode the target alone (klspec serve with -m and no -md), so they do the same work. The table gives each
request kind's mean milliseconds per server and klspec's ratio to llama-server in the same round. --also-klspec
adds another klspec build (e.g. a frozen older commit) to compare.
"""
import argparse
import http.client
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "lib"))  # bench/lib: bench_common
from bench_common import DEFAULT_KLSPEC, TESTBED_TARGET, Server, cpu_header, pinned_llama_server  # noqa: E402

KINDS = {
    "/tokenize": ("/tokenize", {"content": "Q: Ella has 38 big cookies and 50 small cookies."}),
    "1-token completion": ("/v1/completions", {"prompt": "Q: 2 plus 3?\nA:", "max_tokens": 1, "temperature": 0}),
    "8-token completion": ("/v1/completions", {"prompt": "Q: 2 plus 3?\nA:", "max_tokens": 8, "temperature": 0}),
}


def mean_milliseconds(port, path, body, requests):
    """Mean ms per request of `requests` POSTs on one kept-alive connection, after one untimed warm-up request."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    payload = json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}

    def one():
        connection.request("POST", path, payload, headers)
        response = connection.getresponse()
        response.read()
        if response.status != 200:
            sys.exit(f"request_overhead: {path} answered {response.status}")

    one()
    start = time.perf_counter()
    for _ in range(requests):
        one()
    connection.close()
    return (time.perf_counter() - start) / requests * 1000


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--klspec", default=str(DEFAULT_KLSPEC))
    parser.add_argument("-m", "--model", default=str(TESTBED_TARGET))
    parser.add_argument("--requests", type=int, default=40, help="timed requests of each kind per server and round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--also-klspec", help="another klspec binary, measured alike")
    parser.add_argument("--json", action="store_true", help="print the results as one JSON object")
    args = parser.parse_args()
    llama_server = pinned_llama_server()
    if not llama_server:
        sys.exit("request_overhead: no llama-server (run scripts/build.sh, or set KLSPEC_LLAMA_SERVER)")
    common = ["-m", args.model, "-t", "2"]
    servers = {"klspec serve": [args.klspec, "serve", *common],
               "llama-server": [llama_server, *common, "--no-webui"]}
    if args.also_klspec:
        servers[f"klspec serve ({Path(args.also_klspec).parent.name})"] = [args.also_klspec, "serve", *common]
    results = {name: {kind: [] for kind in KINDS} for name in servers}
    for r in range(args.rounds):
        for name in (list(servers) if r % 2 == 0 else list(reversed(servers))):
            with Server(servers[name], name=name) as server:
                for kind, (path, body) in KINDS.items():
                    ms = mean_milliseconds(server.port, path, body, args.requests)
                    results[name][kind].append(ms)
                    print(f"round {r}: {name}, {kind}: {ms:.1f} ms", file=sys.stderr)
    if args.json:
        print(json.dumps({"cpu": cpu_header(), "requests": args.requests, "results": results}, indent=1))
        return
    print("\n".join(cpu_header()))
    print(f"\n{args.requests} requests of each kind per server and round on one kept-alive connection, -t 2, "
          f"{Path(args.model).name}\n")
    print("| server | " + " | ".join(f"{kind} ms" for kind in KINDS) + " |")
    print("|---|" + "---:|" * len(KINDS))
    reference = results["llama-server"]
    for name, kinds in results.items():
        cells = []
        for kind, values in kinds.items():
            ratio = "" if name == "llama-server" else " (" + " / ".join(
                f"{v / ref:.2f}x" for v, ref in zip(values, reference[kind])) + ")"
            cells.append(" / ".join(f"{v:.1f}" for v in values) + ratio)
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
