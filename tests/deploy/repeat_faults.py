"""Repeats the deploy tests' fault scenario with a random delay before the signal, to find races one CTest run
misses (docs/deployment.md, "Retries").

    python3 tests/deploy/repeat_faults.py kill 6     # SIGKILL a busy replica, 6 fresh balanced services
    python3 tests/deploy/repeat_faults.py term 6     # SIGTERM (drain) instead

Each trial: 3 replicas behind HAProxy, 24 concurrent requests (half streamed), replica r1 signalled 0-2.5 s
after it holds two requests (SIGTERM: 12 more sent while it drains). After a SIGKILL only a stream that had
begun may fail (status 200, cut before `data: [DONE]`); after a SIGTERM nothing may. Any other failure is
printed with its HAProxy log line; exit status 1 if a trial had one.
"""
import json
import os
import random
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_balanced as deploy  # noqa: E402


def trial(number, sig):
    delay = random.uniform(0, 2.5)
    with deploy.Balanced() as service:
        victim = 1
        bodies = deploy.mixed_requests(24, seed=4801 + number, max_tokens=(96, 128, 160))
        streams = [i % 2 == 0 for i in range(24)]
        during = []

        def signal_when_busy():
            deploy.wait_until(lambda: deploy.replica_running(service.replica_port(victim)) >= 2, 60, "a busy replica")
            time.sleep(delay)
            os.kill(service.replica_pid(victim), sig)
            if sig == signal.SIGTERM:  # new requests while it drains: its 503s must be replayed elsewhere
                time.sleep(0.2)
                during.extend(deploy.run_concurrently(service.port, bodies[:12], streams[:12],
                                                      deploy.with_ids(bodies[:12], "during")))

        replies = deploy.run_concurrently(service.port, bodies, streams, deploy.with_ids(bodies, "x"),
                                          on_start=signal_when_busy) + during
        log = {line["request_id"]: line for line in service.haproxy_log()}
        failed = [r for r in replies if not r["ok"]]
        unexpected = [r for r in failed if not (sig == signal.SIGKILL and r["stream"] and r["status"] == 200)]
        print(f"trial {number}: delay {delay:.2f} s, failed {len(failed)}, unexpected {len(unexpected)}, "
              f"replayed {sum(line['retries'] > 0 for line in log.values())}", flush=True)
        for r in unexpected:
            fields = {k: r[k] for k in ("request_id", "stream", "status", "error", "seconds")}
            print(f"  {json.dumps(fields)[:240]}\n  haproxy: {log.get(r['request_id'])}", flush=True)
        return not unexpected


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("kill", "term") or not sys.argv[2].isdigit():
        sys.exit("usage: repeat_faults.py kill|term TRIALS")
    sig = signal.SIGKILL if sys.argv[1] == "kill" else signal.SIGTERM
    results = [trial(number, sig) for number in range(int(sys.argv[2]))]
    print(f"{sum(results)}/{len(results)} trials without an unexpected failure")
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
