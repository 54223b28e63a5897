#!/usr/bin/env python3
"""Load test of `tritium serve` on loopback with hostile clients held open throughout.

usage: load_test.py TRITIUM_BINARY MODEL_DIR [--requests 1000] [--concurrency 64]

1. Starts the server (ephemeral port) and opens 50 slow-header connections (one header byte per second, never
   finished) and 20 idle keep-alive connections (one /health each, then silent); a probe thread times /health on a
   fresh connection every 50 ms for the whole run.
2. Runs each of 100 distinct requests alone (completions and chat, streaming and not, greedy and seeded sampling,
   logprobs) and keeps its answer.
3. Sends `--requests` of them (each distinct request repeated, shuffled) at `--concurrency`; 10% of the clients
   abort (a stream after its first event, a plain request 20 ms after sending). Every completed answer must be
   byte-identical to the answer alone, except for the response id and the creation time.
4. Checks that the aborted requests freed their KV blocks (kv_cache_usage_perc 0, nothing running), then sends
   SIGTERM with the slow and idle connections still open: the process must exit 0 within the shutdown timeout.
Fails (exit 1) on any violation; prints one line of figures.
"""
import argparse
import json
import random
import re
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

HEALTH = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
ID_RE = re.compile(rb'"id":"(cmpl|chatcmpl)-[0-9a-f]+"')
CREATED_RE = re.compile(rb'"created":[0-9]+')


def http_request(port, method, path, body=None, timeout=120):
    """One request on a fresh connection (Connection: close); returns (status, raw body bytes)."""
    data = json.dumps(body).encode() if body is not None else b""
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    if body is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(head.encode() + b"\r\n" + data)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    finally:
        s.close()
    head, _, rest = out.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1]) if head else 0
    if b"transfer-encoding: chunked" in head.lower():
        rest = dechunk(rest)
    return status, rest


def dechunk(b):
    out, i = b"", 0
    while True:
        j = b.index(b"\r\n", i)
        n = int(b[i:j], 16)
        if n == 0:
            return out
        out += b[j + 2:j + 2 + n]
        i = j + 2 + n + 2


def normalise(body):
    return CREATED_RE.sub(b'"created":0', ID_RE.sub(b'"id":"x"', body))


def make_requests():
    reqs = []
    for i in range(100):
        chat = i % 4 == 3
        body = {"max_tokens": 4 + i % 21, "stream": i % 3 == 0}
        if i % 2:
            body.update(temperature=0.8, seed=1000 + i, top_p=0.95)
        else:
            body.update(temperature=0)
        if chat:
            body["messages"] = [{"role": "user", "content": f"Tell me story number {i}."}]
            if i % 8 == 7:
                body.update(logprobs=True, top_logprobs=2)
        else:
            body["prompt"] = f"Story {i}: once upon a time" if i % 5 else "Once upon a time"
            if i % 6 == 1:
                body["logprobs"] = 2
        reqs.append(("/v1/chat/completions" if chat else "/v1/completions", body))
    return reqs


def aborting_client(port, path, body):
    data = json.dumps(body).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(data)}"
              f"\r\n\r\n".encode() + data)
    if body.get("stream"):
        got = b""
        while b"data: " not in got:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
    else:
        time.sleep(0.02)
    s.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("model")
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--shutdown-timeout", type=float, default=10)
    ap.add_argument("--health-budget-ms", type=float, default=100)
    a = ap.parse_args()
    errors = []

    srv = subprocess.Popen([a.binary, "serve", "-m", a.model, "--port", "0", "-t", "1", "--max-num-seqs", "64",
                            "--kv-cache-memory", "64MiB", "--keep-alive-timeout", "600", "--header-timeout", "600",
                            "--shutdown-timeout", str(a.shutdown_timeout)],
                           stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    port = None
    for line in srv.stderr:
        m = re.search(r"on http://[^:]+:(\d+)", line)
        if m:
            port = int(m.group(1))
            break
    if port is None:
        print("load_test: the server did not start", file=sys.stderr)
        return 1
    threading.Thread(target=lambda: [None for _ in srv.stderr], daemon=True).start()

    stop = threading.Event()
    health = []

    def probe():
        while not stop.is_set():
            t0 = time.perf_counter()
            st, _ = http_request(port, "GET", "/health", timeout=30)
            health.append(((time.perf_counter() - t0) * 1000, st))
            time.sleep(0.05)

    slow = [socket.create_connection(("127.0.0.1", port)) for _ in range(50)]
    for s in slow:
        s.sendall(b"GET /health HTTP/1.1\r\nX-Slow: ")

    def trickle():
        while not stop.is_set():
            for s in slow:
                try:
                    s.sendall(b"a")
                except OSError:
                    errors.append("a slow-header connection was closed during the run")
                    return
            stop.wait(1.0)

    idle = []
    for _ in range(20):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(HEALTH)
        if not s.recv(4096).startswith(b"HTTP/1.1 200"):
            errors.append("an idle connection's /health failed")
        idle.append(s)
    threads = [threading.Thread(target=probe, daemon=True), threading.Thread(target=trickle, daemon=True)]
    for t in threads:
        t.start()

    reqs = make_requests()
    alone = []
    for path, body in reqs:
        st, out = http_request(port, "POST", path, body)
        if st != 200:
            errors.append(f"alone: {path} answered {st}: {out[:200]!r}")
        alone.append(normalise(out))

    rng = random.Random(7)
    order = [i % len(reqs) for i in range(a.requests)]
    rng.shuffle(order)
    aborts = set(rng.sample(range(a.requests), a.requests // 10))
    mismatches, completed = [], 0
    t0 = time.perf_counter()

    def one(k):
        i = order[k]
        path, body = reqs[i]
        if k in aborts:
            aborting_client(port, path, body)
            return None
        st, out = http_request(port, "POST", path, body)
        return (i, st, normalise(out))

    with ThreadPoolExecutor(a.concurrency) as ex:
        for r in ex.map(one, range(a.requests)):
            if r is None:
                continue
            i, st, out = r
            completed += 1
            if st != 200 or out != alone[i]:
                mismatches.append((i, st, out[:300], alone[i][:300]))
    load_s = time.perf_counter() - t0
    if mismatches:
        i, st, got, want = mismatches[0]
        errors.append(f"{len(mismatches)} answers differ from the request alone; first: request {i} status {st}\n"
                      f"  got  {got!r}\n  want {want!r}")

    usage = running = None
    for _ in range(200):
        _, met = http_request(port, "GET", "/metrics")
        usage = re.search(rb"tritium:kv_cache_usage_perc\{[^}]*\} (\S+)", met)
        running = re.search(rb"tritium:num_requests_running\{[^}]*\} (\S+)", met)
        if usage and running and float(usage.group(1)) == 0 and float(running.group(1)) == 0:
            break
        time.sleep(0.05)
    if not usage or float(usage.group(1)) != 0 or not running or float(running.group(1)) != 0:
        errors.append(f"after the load: kv_cache_usage_perc {usage and usage.group(1)}, "
                      f"num_requests_running {running and running.group(1)}")

    stop.set()
    for t in threads:
        t.join()
    worst = max(h[0] for h in health)
    bad = [h for h in health if h[1] != 200]
    if worst > a.health_budget_ms or bad:
        errors.append(f"/health: slowest {worst:.1f} ms (budget {a.health_budget_ms} ms), {len(bad)} not 200")

    t_term = time.perf_counter()
    srv.terminate()
    try:
        rc = srv.wait(timeout=a.shutdown_timeout + 5)
    except subprocess.TimeoutExpired:
        srv.kill()
        rc = None
    exit_s = time.perf_counter() - t_term
    if rc != 0:
        errors.append(f"after SIGTERM the server exited with {rc} ({exit_s:.1f} s; idle and slow connections open)")
    for s in slow + idle:
        s.close()

    print(f"load_test: {a.requests} requests at concurrency {a.concurrency} in {load_s:.1f} s, {completed} completed, "
          f"{len(aborts)} aborted, {len(mismatches)} differing from alone; /health p50 "
          f"{sorted(h[0] for h in health)[len(health) // 2]:.1f} ms, max {worst:.1f} ms over {len(health)} probes; "
          f"SIGTERM -> exit {rc} in {exit_s:.2f} s")
    for e in errors:
        print("FAIL:", e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
