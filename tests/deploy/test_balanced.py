"""`klspec serve` replicas behind HAProxy (deploy/serve-balanced.sh, docs/deployment.md), on loopback.

CTest label `deploy`. Each test starts the balanced service on free ports, on the default pair
(models/testbed-*), and checks one promise of issue 48:
- 3 replicas, 24 concurrent clients of mixed lengths, plain and streamed: every answer equals what one replica
  alone gives for the same greedy request;
- SIGKILL of a replica mid-run: requests not yet started go to the others, the ones it was decoding are retried
  (unstreamed) or end with a clear error (a stream cut before its `data: [DONE]`), counted; none hangs;
- SIGTERM of a replica: it drains, the balancer stops sending to it, no request is lost;
- multi-turn chats with X-Session-Id: the second turn's cached_tokens >= 90 % of the first turn's prompt for
  >= 90 % of the conversations.
Counts go to stdout (`ctest -L deploy -V`) and, with KLSPEC_DEPLOY_REPORT=FILE, to a JSON file.
"""
import concurrent.futures
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import pytest

ROOT = os.environ.get("KLSPEC_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
KLSPEC = os.environ.get("KLSPEC_CLI", os.path.join(ROOT, "build", "klspec"))
SCRIPT = os.path.join(ROOT, "deploy", "serve-balanced.sh")
REPLICAS = 3
SLOTS = 8
CONTEXT = 8 * 512  # -c: 512 tokens per slot
CLIENT_TIMEOUT = 120  # seconds: a request that takes longer counts as hung
REPORT = {}

pytestmark = pytest.mark.skipif(subprocess.run(["bash", "-c", "command -v haproxy"], capture_output=True).returncode != 0,
                                reason="no haproxy (bash scripts/setup-deps.sh)")


def load_problems():
    problems = []
    for family in ("word", "trace", "choice"):
        with open(os.path.join(ROOT, "data", f"testbed_{family}_test.jsonl")) as f:
            problems += [json.loads(line)["question"] for _, line in zip(range(40), f)]
    return problems


PROBLEMS = load_problems()


def mixed_requests(count, seed, max_tokens=(16, 32, 64, 96, 128)):
    """`count` greedy completion requests of mixed prompt lengths (three task families) and answer lengths."""
    rng = random.Random(seed)
    return [{"prompt": rng.choice(PROBLEMS), "max_tokens": rng.choice(max_tokens), "temperature": 0} for _ in range(count)]


def free_port_block(count):
    """A first port P with P..P+count-1 all free on loopback."""
    rng = random.Random()
    for _ in range(200):
        first = rng.randrange(20000, 60000)
        sockets = []
        try:
            for port in range(first, first + count):
                s = socket.socket()
                sockets.append(s)
                s.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise RuntimeError("no free ports")


class Balanced:
    """deploy/serve-balanced.sh with REPLICAS replicas; stopped (SIGTERM to the script) on exit."""

    def __init__(self, replicas=REPLICAS, slots=SLOTS):
        self.replicas = replicas
        self.run_dir = tempfile.mkdtemp(prefix="klspec-deploy-test.")
        self.port = free_port_block(1)
        self.first_replica_port = free_port_block(replicas)
        self.script_log = open(os.path.join(self.run_dir, "script.log"), "w")
        self.proc = subprocess.Popen(
            ["bash", SCRIPT, "-n", str(replicas), "--port", str(self.port), "--replica-port",
             str(self.first_replica_port), "--run-dir", self.run_dir, "--klspec", KLSPEC, "--check-inter", "300",
             "--", "-np", str(slots), "-c", str(slots * 512), "-t", "1"],
            stdout=subprocess.PIPE, stderr=self.script_log, text=True, start_new_session=True)
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            script_log = self.log("script.log")[-2000:]
            self.stop()
            raise RuntimeError(f"serve-balanced did not start: {line!r}; {script_log}")
        self.started = time.monotonic()

    def log(self, name):
        with open(os.path.join(self.run_dir, name)) as f:
            return f.read()

    def replica_port(self, i):
        return self.first_replica_port + i

    def replica_pid(self, i):
        with open(os.path.join(self.run_dir, f"replica-{i}.pid")) as f:
            return int(f.read())

    def haproxy_log(self):
        """Parsed log lines: request_id, session, backend, server, status, retries, redispatched, termination."""
        lines = []
        for text in self.log("haproxy.log").splitlines():
            fields = dict(re.findall(r"(\w+)=(\S*)", text))
            if "request_id" not in fields:
                continue
            retries = fields.get("retries", "0")
            fields["redispatched"] = retries.startswith("+")
            fields["retries"] = int(retries.lstrip("+") or 0)
            lines.append(fields)
        return lines

    def server_states(self):
        """`show stat` over the stats socket: {server name: status} of the leastconn backend."""
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(os.path.join(self.run_dir, "haproxy.sock"))
            s.sendall(b"show stat\n")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        rows = [line.split(",") for line in data.decode().splitlines() if line and not line.startswith("#")]
        return {row[1]: row[17] for row in rows if row[0] == "replicas" and row[1] not in ("FRONTEND", "BACKEND")}

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # the script's clean shutdown
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        # Nothing of ours may outlive the test: replicas and haproxy are in the script's session.
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.script_log.close()
        shutil.rmtree(self.run_dir, ignore_errors=True)  # the logs and sockets of this run: nothing left in /tmp
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def request(port, body, stream=False, path="/v1/completions", headers=None, timeout=CLIENT_TIMEOUT):
    """One request; returns {"status", "text", "finish_reason", "done" (a stream's [DONE] seen), "error",
    "served_by", "usage", "seconds"}. A stream cut short is an error, not an exception."""
    started = time.monotonic()
    out = {"status": None, "text": "", "finish_reason": None, "done": False, "error": None, "served_by": None,
           "usage": None, "stream": stream, "request_id": (headers or {}).get("X-Request-Id")}
    body = dict(body, stream=stream)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("POST", path, json.dumps(body), {"Content-Type": "application/json", **(headers or {})})
        response = connection.getresponse()
        out["status"] = response.status
        out["served_by"] = response.getheader("X-Served-By")
        if not stream or response.status != 200:
            raw = response.read()
            try:
                payload = json.loads(raw)
            except ValueError:  # HAProxy's own error pages are HTML
                payload = {"error": raw.decode(errors="replace")[:200]}
            if response.status == 200:
                choice = payload["choices"][0]
                out["text"] = choice["message"]["content"] if "message" in choice else choice["text"]
                out["finish_reason"] = choice["finish_reason"]
                out["usage"] = payload["usage"]
            else:
                out["error"] = payload.get("error", payload)
        else:
            for raw in response:
                line = raw.decode().strip()
                if not line.startswith("data: "):
                    continue
                data = line[len("data: "):]
                if data == "[DONE]":
                    out["done"] = True
                    break
                chunk = json.loads(data)
                if "error" in chunk:
                    out["error"] = chunk["error"]
                    continue
                for choice in chunk.get("choices", []):
                    out["text"] += choice.get("text") or choice.get("delta", {}).get("content") or ""
                    out["finish_reason"] = choice.get("finish_reason") or out["finish_reason"]
                out["usage"] = chunk.get("usage") or out["usage"]
            if not out["done"] and out["error"] is None:
                out["error"] = "stream ended before data: [DONE]"
    except (OSError, http.client.HTTPException, ValueError) as e:
        out["error"] = f"{type(e).__name__}: {e}"
    finally:
        connection.close()
    out["seconds"] = time.monotonic() - started
    out["ok"] = out["status"] == 200 and out["error"] is None and (out["done"] or not stream)
    return out


def run_concurrently(port, bodies, streams, headers=None, on_start=None):
    with concurrent.futures.ThreadPoolExecutor(len(bodies)) as pool:
        futures = [pool.submit(request, port, body, stream, headers=(headers[i] if headers else None))
                   for i, (body, stream) in enumerate(zip(bodies, streams))]
        if on_start:
            on_start()
        done, not_done = concurrent.futures.wait(futures, timeout=CLIENT_TIMEOUT + 30)
        assert not not_done, f"{len(not_done)} requests hung past {CLIENT_TIMEOUT + 30} s"
        return [f.result() for f in futures]


def references(port, bodies):
    """Each request alone on one replica, straight to it, one at a time (unstreamed)."""
    out = []
    for body in bodies:
        reply = request(port, body)
        assert reply["ok"], reply
        out.append(reply["text"])
    return out


def report(name, **counts):
    REPORT[name] = counts
    print(f"\n[deploy] {name}: {json.dumps(counts)}")
    path = os.environ.get("KLSPEC_DEPLOY_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump(REPORT, f, indent=1)


def wait_until(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def replica_running(port):
    """klspec:num_requests_running of the replica on `port` (0 when it does not answer)."""
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        connection.request("GET", "/metrics")
        text = connection.getresponse().read().decode()
        return float(re.search(r"^klspec:num_requests_running (\S+)$", text, re.M).group(1))
    except (OSError, AttributeError, http.client.HTTPException):
        return 0


def with_ids(bodies, prefix):
    return [{"X-Request-Id": f"{prefix}-{i}"} for i in range(len(bodies))]


def test_24_clients_equal_one_replica_alone_and_sessions_keep_their_cache():
    with Balanced() as service:
        bodies = mixed_requests(24, seed=48)
        # Plain and streamed, each request both ways (two rounds of 24 concurrent clients, half of each streamed).
        first = run_concurrently(service.port, bodies, [i % 2 == 0 for i in range(24)], with_ids(bodies, "a"))
        second = run_concurrently(service.port, bodies, [i % 2 == 1 for i in range(24)], with_ids(bodies, "b"))
        alone = references(service.replica_port(0), bodies)
        replies = first + second
        failed = [r for r in replies if not r["ok"]]
        assert not failed, failed[:3]
        differ = [(i, r["text"], alone[i % 24]) for i, r in enumerate(replies) if r["text"] != alone[i % 24]]
        served = {name: sum(r["served_by"] == name for r in replies) for name in sorted({r["served_by"] for r in replies})}
        report("equality", requests=len(replies), streamed=sum(r["stream"] for r in replies),
               equal_to_one_replica=len(replies) - len(differ), differ=len(differ), served_by=served,
               max_tokens=sorted({b["max_tokens"] for b in bodies}))
        assert not differ, differ[:3]
        assert len(served) == REPLICAS, served

        # Multi-turn chats: each conversation names itself (X-Session-Id), turn 2 repeats turn 1 and its answer.
        conversations = 12
        rng = random.Random(4848)
        questions = rng.sample(PROBLEMS, conversations)

        def converse(c):
            headers = {"X-Session-Id": f"conversation-{c}", "X-Request-Id": f"chat-{c}"}
            messages = [{"role": "user", "content": questions[c]}]
            one = request(service.port, {"messages": messages, "max_tokens": 48, "temperature": 0},
                          path="/v1/chat/completions", headers=headers)
            assert one["ok"], one
            time.sleep(rng.random() * 0.5)
            messages += [{"role": "assistant", "content": one["text"]}, {"role": "user", "content": "Say the answer again."}]
            two = request(service.port, {"messages": messages, "max_tokens": 16, "temperature": 0},
                          path="/v1/chat/completions", headers=headers)
            assert two["ok"], two
            return one, two

        with concurrent.futures.ThreadPoolExecutor(conversations) as pool:
            turns = list(pool.map(converse, range(conversations)))
        fractions = [two["usage"]["prompt_tokens_details"]["cached_tokens"] / one["usage"]["prompt_tokens"]
                     for one, two in turns]
        kept = sum(f >= 0.9 for f in fractions)
        same_replica = sum(one["served_by"] == two["served_by"] for one, two in turns)
        report("multi_turn", conversations=conversations, second_turn_cached_90pct=kept, same_replica=same_replica,
               cached_fraction_min=round(min(fractions), 3),
               replicas={name: sum(one["served_by"] == name for one, _ in turns) for name in sorted({t[0]["served_by"] for t in turns})})
        assert same_replica == conversations
        assert kept >= 0.9 * conversations, fractions


def test_sigkill_mid_run_retries_or_fails_clearly_and_nothing_hangs():
    with Balanced() as service:
        victim = 1
        bodies = mixed_requests(24, seed=4801, max_tokens=(96, 128, 160))
        streams = [i % 2 == 0 for i in range(24)]
        killed_at = []

        def kill_when_busy():
            # Once the victim decodes a full set of slots (and others wait in HAProxy's queue), SIGKILL it.
            wait_until(lambda: replica_running(service.replica_port(victim)) >= 2, 60, "a busy replica")
            time.sleep(0.3)
            os.kill(service.replica_pid(victim), signal.SIGKILL)
            killed_at.append(time.monotonic())

        replies = run_concurrently(service.port, bodies, streams, with_ids(bodies, "kill"), on_start=kill_when_busy)
        # Requests after the kill: the others take them all.
        after = run_concurrently(service.port, bodies[:12], [i % 2 == 0 for i in range(12)], with_ids(bodies[:12], "after"))
        alone = references(service.replica_port(0), bodies)
        log = {line["request_id"]: line for line in service.haproxy_log()}
        victim_name = f"r{victim}"
        retried = [r for i, r in enumerate(replies) if r["ok"] and log.get(f"kill-{i}", {}).get("retries", 0) > 0]
        failed = [r for r in replies if not r["ok"]]
        wrong = [(i, r["text"], alone[i]) for i, r in enumerate(replies) if r["ok"] and r["text"] != alone[i]]
        report("sigkill", requests=len(replies), ok=sum(r["ok"] for r in replies), retried_and_ok=len(retried),
               failed=len(failed), failed_streamed=sum(r["stream"] for r in failed),
               failed_errors=sorted({str(r["error"])[:60] for r in failed}),
               ok_but_differ=len(wrong), after_kill_ok=sum(r["ok"] for r in after), after_kill=len(after),
               after_kill_on_victim=sum(r["served_by"] == victim_name for r in after),
               slowest_s=round(max(r["seconds"] for r in replies + after), 1),
               states_after=service.server_states())
        assert killed_at, "the victim was never busy"
        assert all(r["seconds"] < CLIENT_TIMEOUT for r in replies + after), "a request hung"
        # Only streams the victim had begun may fail, each visibly (cut before data: [DONE]); nothing else.
        assert all(r["stream"] and r["served_by"] == victim_name and r["status"] == 200 and not r["done"] for r in failed), \
            [(r, log.get(r["request_id"])) for r in failed]
        assert not wrong, wrong[:3]
        assert all(r["ok"] and r["served_by"] != victim_name for r in after), after
        assert service.server_states()[victim_name].startswith("DOWN")


def test_sigterm_drains_a_replica_without_losing_a_request():
    with Balanced() as service:
        victim = 2
        bodies = mixed_requests(24, seed=4802, max_tokens=(96, 128, 160))
        streams = [i % 2 == 1 for i in range(24)]
        terminated = []
        during = []

        def terminate_when_busy():
            wait_until(lambda: replica_running(service.replica_port(victim)) >= 2, 60, "a busy replica")
            os.kill(service.replica_pid(victim), signal.SIGTERM)
            terminated.append(time.monotonic())
            # New requests while it drains (it polls for the signal every 100 ms; the health check marks it down
            # within 2 x 300 ms): its 503s are replayed elsewhere.
            time.sleep(0.2)
            during.extend(run_concurrently(service.port, bodies[:12], [i % 2 == 0 for i in range(12)],
                                           with_ids(bodies[:12], "during")))

        replies = run_concurrently(service.port, bodies, streams, with_ids(bodies, "term"), on_start=terminate_when_busy)
        replies += during
        # The drained replica exits on its own (0, no "cancelled" line) once its requests are done.
        wait_until(lambda: not os.path.exists(f"/proc/{service.replica_pid(victim)}") or
                   open(f"/proc/{service.replica_pid(victim)}/stat").read().split()[2] == "Z", 40, "the drained replica's exit")
        after = run_concurrently(service.port, bodies[:12], [i % 2 == 0 for i in range(12)], with_ids(bodies[:12], "after"))
        alone = references(service.replica_port(0), bodies)
        log = {line["request_id"]: line for line in service.haproxy_log()}
        victim_name = f"r{victim}"
        lost = [r for r in replies + after if not r["ok"]]
        wrong = [(i, r["text"], alone[i % 24]) for i, r in enumerate(replies) if r["ok"] and r["text"] != alone[i % 24]]
        replica_log = service.log(f"replica-{victim}.log")
        report("sigterm", requests=len(replies) + len(after), ok=len(replies) + len(after) - len(lost),
               finished_by_draining_replica=sum(r["served_by"] == victim_name for r in replies),
               sent_while_draining=len(during),
               retried_after_503=sum(line["retries"] > 0 for line in log.values() if line["request_id"].startswith(("term-", "during-"))),
               after_on_victim=sum(r["served_by"] == victim_name for r in after), differ=len(wrong),
               states_after=service.server_states())
        assert not lost, [(r, log.get(r["request_id"])) for r in lost[:3]]
        assert not wrong, wrong[:3]
        assert terminated
        assert "were cancelled" not in replica_log
        assert "klspec serve: drain started" in replica_log and "klspec serve: drain ended: every request finished" in replica_log
        assert all(r["served_by"] != victim_name for r in after)
        assert service.server_states()[victim_name].startswith("DOWN")
