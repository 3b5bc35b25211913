#!/usr/bin/env python3
"""Fault soak of `klspec serve` (loopback only, bounded in time): the script starts the server, warms it up,
then for --duration seconds runs --clients clients that mix well-behaved streaming requests with faulty
ones, and --busy-seconds of it with two CPU-bound processes beside the server. Afterwards it checks that
every slot is free, that the server's RSS is within 10 % of its value after warm-up, that its open file
descriptors are back to their count after warm-up, and that every completed well-behaved answer equals what
`klspec generate` prints for its prompt (greedy). It prints the count of each fault kind sent.

  /usr/bin/python3 bench/serving/serve_soak.py --duration 600 --busy-seconds 120

Fault kinds: drop (the client closes the stream after its first chunk), stall (the client stops reading for
a few seconds, then closes), cancel (the client closes right after sending), burst (16 requests at once,
beyond the slots), oversized (a body over the server's limit: 413), malformed (bad JSON: 400).
Standard library only."""
import argparse
import concurrent.futures
import http.client
import json
import os
import random
import shlex
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: bench_common, llama_bench_lib
from bench_common import free_port  # noqa: E402
from serve_load import PROMPTS, one_request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAULTS = ("good", "drop", "stall", "cancel", "burst", "oversized", "malformed")


def body(prompt, max_tokens):
    return json.dumps({"prompt": prompt, "max_tokens": max_tokens, "stream": True, "temperature": 0})


def raw_post(port, payload, timeout=30):
    """Sends a POST by hand and returns the socket (the caller decides how badly to behave)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    head = (f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n").encode()
    sock.sendall(head + payload)
    return sock


def status_of(port, payload):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("POST", "/v1/completions", payload, {"Content-Type": "application/json"})
        response = connection.getresponse()
        response.read()
        return response.status
    except (ConnectionError, http.client.HTTPException):
        return None  # the server may close on a body it refuses to read
    finally:
        connection.close()


def metrics(port):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    return {line.split()[0]: float(line.split()[1]) for line in text.splitlines() if line and not line.startswith("#")}


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


class Soak:
    def __init__(self, args, port, expected):
        self.args, self.port, self.expected = args, port, expected
        self.url = f"http://127.0.0.1:{port}"
        self.counts = {kind: 0 for kind in FAULTS}
        self.failures, self.answers = [], 0
        self.lock = threading.Lock()

    def good(self, rng):
        prompt = rng.choice(PROMPTS)
        try:
            text = one_request(self.url, json.loads(body(prompt, self.args.max_tokens)))[3]
        except (OSError, RuntimeError, ValueError) as error:
            return f"{prompt!r}: {error}"
        with self.lock:
            self.answers += 1
        return None if text == self.expected[prompt] else f"{prompt!r}: got {text!r}, the CLI printed {self.expected[prompt]!r}"

    def one(self, kind, rng):
        """Sends one request of this kind; returns a failure or None."""
        payload = body(rng.choice(PROMPTS), self.args.max_tokens).encode()
        if kind == "good":
            return self.good(rng)
        if kind in ("drop", "stall", "cancel"):
            sock = raw_post(self.port, payload)
            try:
                if kind == "drop":
                    sock.recv(256)
                elif kind == "stall":
                    time.sleep(rng.uniform(1, 4))
            except OSError:
                pass
            sock.close()
            return None
        if kind == "burst":
            with concurrent.futures.ThreadPoolExecutor(16) as pool:
                failures = [f for f in pool.map(lambda _: self.good(random.Random()), range(16)) if f]
            return failures[0] if failures else None
        if kind == "oversized":
            status = status_of(self.port, b'{"prompt": "' + b"x" * (self.args.max_body_bytes + 1) + b'"}')
            return None if status in (413, None) else f"oversized body: HTTP {status}, expected 413"
        status = status_of(self.port, b'{"prompt": "x", "max_tokens": ')
        return None if status == 400 else f"malformed body: HTTP {status}, expected 400"

    def client(self, seed, deadline):
        rng = random.Random(seed)
        while time.monotonic() < deadline:
            kind = rng.choices(FAULTS, weights=(8, 2, 1, 2, 1, 1, 2))[0]
            failure = self.one(kind, rng)
            with self.lock:
                self.counts[kind] += 1
                if failure:
                    self.failures.append(f"{kind}: {failure}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--klspec", default=f"{REPO}/build/klspec", help="the klspec binary (default %(default)s)")
    parser.add_argument("--server-args", default="-np 8", help="klspec serve's flags (default %(default)s)")
    parser.add_argument("--duration", type=float, default=600, help="seconds of mixed load (default %(default)s)")
    parser.add_argument("--busy-seconds", type=float, default=120,
                        help="of which the last seconds with two CPU-bound processes beside the server (default %(default)s)")
    parser.add_argument("--clients", type=int, default=12, help="concurrent clients (default %(default)s)")
    parser.add_argument("--max-tokens", type=int, default=48, help="max_tokens of each request (default %(default)s)")
    parser.add_argument("--max-body-bytes", type=int, default=1 << 20,
                        help="the server's --max-body (default %(default)s)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    expected = {}
    for prompt in PROMPTS:
        done = subprocess.run([args.klspec, "generate", "-p", prompt, "-n", str(args.max_tokens), "--json"],
                              capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"serve_soak: klspec generate failed: {done.stderr.strip().splitlines()[-1:]}")
        expected[prompt] = json.loads(done.stdout)["text"]

    port = free_port()
    command = [args.klspec, "serve", "--port", str(port), "--max-body", str(args.max_body_bytes)] + \
        shlex.split(args.server_args)
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    spinners = []
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.2)
        soak = Soak(args, port, expected)
        with concurrent.futures.ThreadPoolExecutor(8) as pool:  # warm-up: every slot used a few times
            list(pool.map(lambda i: soak.good(random.Random(i)), range(32)))
        time.sleep(1)  # the warm-up's connections close
        rss_warm, fds_at_start = rss_kib(server.pid), open_fds(server.pid)

        start = time.monotonic()
        deadline = start + args.duration

        def busy_phase():
            time.sleep(max(0.0, args.duration - args.busy_seconds))
            if time.monotonic() < deadline:
                spinners.extend(subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(2))
        threading.Thread(target=busy_phase, daemon=True).start()
        with concurrent.futures.ThreadPoolExecutor(args.clients) as pool:
            list(pool.map(lambda seed: soak.client(seed, deadline), range(args.clients)))
        for spinner in spinners:
            spinner.kill()

        # Idle: cancelled streams finish their step, slots free up.
        settle = time.monotonic() + 60
        while time.monotonic() < settle:
            m = metrics(port)
            if m["klspec:num_requests_running"] == 0 and m["klspec:num_requests_waiting"] == 0:
                break
            time.sleep(0.5)
        m = metrics(port)
        # Idle keep-alive connections close after cpp-httplib's keep-alive timeout (5 s).
        fds_deadline = time.monotonic() + 15
        while open_fds(server.pid) != fds_at_start and time.monotonic() < fds_deadline:
            time.sleep(0.5)
        rss_after, fds_after = rss_kib(server.pid), open_fds(server.pid)
        fd_targets = sorted(os.readlink(f"/proc/{server.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{server.pid}/fd"))
    finally:
        for spinner in spinners:
            spinner.kill()
        server.terminate()
        server.wait(timeout=30)

    checks = {
        "slots free": m["klspec:num_requests_running"] == 0 and m["klspec:num_requests_waiting"] == 0,
        "RSS within 10 % of warm-up": abs(rss_after - rss_warm) <= 0.1 * rss_warm,
        "file descriptors back": fds_after == fds_at_start,
        "every answer equal to the CLI's": not soak.failures,
    }
    summary = {"seconds": round(time.monotonic() - start, 1), "faults_sent": soak.counts,
               "good_answers_checked": soak.answers, "rss_kib_warm": rss_warm, "rss_kib_after": rss_after,
               "fds_at_start": fds_at_start, "fds_after": fds_after, "fd_targets_after": fd_targets, "checks": checks,
               "failures": soak.failures[:10], "server": shlex.join(command)}
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"soak: {summary['seconds']} s, {soak.answers} well-behaved answers checked; sent: " +
              ", ".join(f"{kind} {n}" for kind, n in soak.counts.items()))
        print(f"RSS {rss_warm} KiB after warm-up, {rss_after} KiB after; fds {fds_at_start} after warm-up, {fds_after} after")
        for name, ok in checks.items():
            print(f"  {'ok  ' if ok else 'FAIL'} {name}")
        if not checks["file descriptors back"]:
            print(f"  open after: {fd_targets}")
        for failure in soak.failures[:5]:
            print(f"  {failure}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
