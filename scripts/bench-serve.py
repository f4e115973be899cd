#!/usr/bin/env python3
"""Load test of `demo-engine serve` against `llama-server` on loopback, side by side in one run.

For each number of clients (1, 4, 8, 16) both servers run side by side (llama-server with -np
equal to the client count, same model file, threads and per-slot context; the idle one sleeps),
and for each completion length (64, 256 tokens) the clients start together and each sends one
streamed /v1/completions request (its own prompt, temperature 0, ignore_eos so every completion
has exactly the requested length) per round; the rounds alternate between the servers (ours
first in odd rounds, llama-server first in even ones), so a slow spell of a shared machine hits
both. Reported per server over all its rounds: aggregate tok/s (completion tokens / wall time of
the rounds), time to first token and request latency (p50 and p99 over all requests); and the
ratio of the aggregates with each round's own ratio beside it.

Usage: scripts/bench-serve.py MODEL [THREADS] [ROUNDS]
       SOAK=SECONDS scripts/bench-serve.py MODEL [THREADS]   (our server only: 8 clients send a
       mix of streamed, plain, cancelled and malformed requests for SECONDS; reports error
       responses to valid requests, wrong answers to malformed ones, and the server's RSS over
       time)
Env:   DEMO (default target/release/demo-engine), LLAMA_BIN (default target/anchor/build/bin),
       CLIENTS (default "1 4 8 16"), LENGTHS (default "64 256"), CTX (llama-server's context per
       slot, default 4096), ONLY ("ours" or "llama": one server only).
Loopback only; every request has a deadline, and the servers are stopped at the end (or on
error). Python's standard library only.
"""
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROMPTS = [
    "def quicksort(arr):\n",
    "# Parse a CSV file and print the sum of the second column\nimport csv\n",
    "fn fibonacci(n: u64) -> u64 {\n",
    "class LRUCache:\n    def __init__(self, capacity):\n",
    "// Binary search in a sorted slice\npub fn search(v: &[i32], x: i32) -> Option<usize> {\n",
    "SELECT name, COUNT(*) FROM orders\n",
    "def is_prime(n):\n    \"\"\"Return True when n is prime.\"\"\"\n",
    "#include <stdio.h>\nint main(void) {\n",
    "async function fetchJson(url) {\n",
    "def merge_sorted(a, b):\n",
    "package main\n\nimport \"fmt\"\n\nfunc main() {\n",
    "def word_count(text):\n",
    "struct Stack<T> {\n",
    "import numpy as np\n\ndef normalize(v):\n",
    "def flatten(nested):\n",
    "public static int gcd(int a, int b) {\n",
]
REQUEST_DEADLINE_S = 600


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, proc, what, timeout=180):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            sys.exit(f"bench-serve: {what} exited with {proc.returncode} before it was ready")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/health")
            r = c.getresponse()
            r.read()
            if r.status == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    sys.exit(f"bench-serve: {what} not ready after {timeout}s")


def one_request(port, prompt, max_tokens):
    """A streamed completion: (seconds to the first text, total seconds, completion tokens)."""
    body = json.dumps({
        "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
        "ignore_eos": True, "stream_options": {"include_usage": True},
    })
    t0 = time.time()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_DEADLINE_S)
    c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"status {r.status}: {r.read()[:300]!r}")
    first, pieces, usage = None, 0, None
    for raw in r:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        ev = json.loads(line[6:])
        if ev.get("usage"):
            usage = ev["usage"].get("completion_tokens")
        for ch in ev.get("choices") or []:
            if ch.get("text"):
                pieces += 1
                if first is None:
                    first = time.time() - t0
    c.close()
    return (first if first is not None else time.time() - t0), time.time() - t0, (usage or pieces)


def scenario(port, clients, length, rnd):
    """One round: every client sends one request at once; (results, errors, wall seconds)."""
    results, errors = [], []
    lock = threading.Lock()

    def client(k):
        try:
            res = one_request(port, PROMPTS[(k + rnd * clients) % len(PROMPTS)], length)
            with lock:
                results.append(res)
        except Exception as e:  # noqa: BLE001 (reported below)
            with lock:
                errors.append(str(e))

    t0 = time.time()
    ts = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(REQUEST_DEADLINE_S)
    wall = time.time() - t0
    if errors:
        print(f"  errors ({len(errors)}): {errors[0]}", flush=True)
    return results, errors, wall


def summary(rounds):
    """Aggregate of a server's rounds [(results, errors, wall)]."""
    results = [r for rr in rounds for r in rr[0]]

    def pct(xs, p):
        xs = sorted(xs)
        return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else float("nan")

    return {
        "tok_s": sum(r[2] for r in results) / sum(rr[2] for rr in rounds),
        "round_tok_s": [sum(r[2] for r in rr[0]) / rr[2] for rr in rounds],
        "ttft50": pct([r[0] for r in results], 50), "ttft99": pct([r[0] for r in results], 99),
        "lat50": pct([r[1] for r in results], 50), "lat99": pct([r[1] for r in results], 99),
        "n": len(results), "errors": sum(len(rr[1]) for rr in rounds),
    }


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))


def soak(port, pid, seconds, clients=8):
    """Mixed traffic for `seconds`: returns (counts, problems, [(t, rss_kb)])."""
    counts, problems, rss = {}, [], []
    lock = threading.Lock()
    end = time.time() + seconds
    bad_bodies = ['{"prompt": ', '{"max_tokens": 4}', '{"prompt": "x", "max_tokens": -1}',
                  '{"prompt": "x", "max_tokens": 18446744073709551615}', '{"prompt": "x", "temperature": "hot"}',
                  '[1, 2, 3]', '{"prompt": "x", "n": 3}']

    def note(kind, ok, what=""):
        with lock:
            counts[kind] = counts.get(kind, 0) + 1
            if not ok:
                problems.append(f"{kind}: {what}")

    def client(k):
        i = 0
        while time.time() < end:
            i += 1
            kind = ["stream", "plain", "cancel", "malformed", "chat"][(k + i) % 5]
            prompt = PROMPTS[(k * 7 + i) % len(PROMPTS)]
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                if kind == "malformed":
                    c.request("POST", "/v1/completions", bad_bodies[i % len(bad_bodies)], {"Content-Type": "application/json"})
                    r = c.getresponse()
                    r.read()
                    note(kind, r.status == 400, f"status {r.status}")
                elif kind == "chat":
                    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": 8 + i % 40, "temperature": 0.7, "seed": i}
                    c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
                    r = c.getresponse()
                    data = r.read()
                    note(kind, r.status == 200 and b"choices" in data, f"status {r.status} {data[:200]!r}")
                else:
                    body = {"prompt": prompt, "max_tokens": 8 + i % 56, "temperature": 0, "stream": kind != "plain"}
                    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
                    r = c.getresponse()
                    if kind == "plain":
                        data = r.read()
                        note(kind, r.status == 200 and b"choices" in data, f"status {r.status} {data[:200]!r}")
                    else:
                        ok, n, bad = r.status == 200, 0, b""
                        for raw in r:
                            n += raw.startswith(b"data: ")
                            if kind == "cancel" and n >= 3:
                                break
                            if raw.startswith(b'data: {"error"'):
                                ok, bad = False, raw[:300]
                        note(kind, ok, f"status {r.status} {bad!r}")
                c.close()
            except Exception as e:  # noqa: BLE001 (counted as a problem)
                note(kind, False, repr(e))

    ts = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(clients)]
    for t in ts:
        t.start()
    t0 = time.time()
    while any(t.is_alive() for t in ts):
        rss.append((time.time() - t0, rss_kb(pid)))
        time.sleep(10)
    return counts, problems, rss


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if os.environ.get("SOAK"):
        return main_soak(int(os.environ["SOAK"]))
    model = sys.argv[1]
    threads = sys.argv[2] if len(sys.argv) > 2 else "2"
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    demo = os.environ.get("DEMO", os.path.join(REPO, "target/release/demo-engine"))
    llama_bin = os.environ.get("LLAMA_BIN", os.path.join(REPO, "target/anchor/build/bin"))
    clients = [int(c) for c in os.environ.get("CLIENTS", "1 4 8 16").split()]
    lengths = [int(n) for n in os.environ.get("LENGTHS", "64 256").split()]
    ctx = int(os.environ.get("CTX", "4096"))
    only = os.environ.get("ONLY", "")
    rows = []
    procs = []
    try:
        for c in clients:
            ports = {}
            for who in ["ours", "llama"]:
                if only and only != who:
                    continue
                port = free_port()
                if who == "ours":
                    cmd = [demo, "serve", "--model", model, "--engine", os.environ.get("ENGINE", "avx2"), "--threads", threads,
                           "--port", str(port), "--max-concurrent", str(max(4, 2 * c)), "--quiet"]
                    env = dict(os.environ)
                else:
                    cmd = [os.path.join(llama_bin, "llama-server"), "-m", model, "-t", threads, "-np", str(c),
                           "-c", str(ctx * c), "--port", str(port), "--host", "127.0.0.1", "-ngl", "0"]
                    env = dict(os.environ, LD_LIBRARY_PATH=llama_bin)
                p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
                procs.append(p)
                wait_ready(port, p, who)
                one_request(port, "warm up", 4)
                ports[who] = port
            for n in lengths:
                done = {who: [] for who in ports}
                for rnd in range(rounds):
                    for who in (list(ports) if rnd % 2 == 0 else list(reversed(ports))):
                        done[who].append(scenario(ports[who], c, n, rnd))
                for who in ports:
                    r = summary(done[who])
                    rows.append((c, n, who, r))
                    print(f"clients={c:2} tokens={n:3} {who:5}: {r['tok_s']:6.1f} tok/s  ttft p50 {r['ttft50']:.2f}s p99 {r['ttft99']:.2f}s"
                          f"  latency p50 {r['lat50']:.2f}s p99 {r['lat99']:.2f}s  ({r['n']} requests, {r['errors']} errors)", flush=True)
            for p in procs:
                if p.poll() is None:
                    p.terminate()
                    p.wait(timeout=30)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    print("\n| clients | tokens | ours tok/s | llama-server tok/s | ratio (each round's) | ours TTFT p50/p99 s | llama TTFT p50/p99 s | ours latency p50/p99 s | llama latency p50/p99 s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for c in clients:
        for n in lengths:
            o = next((r for (cc, nn, w, r) in rows if (cc, nn, w) == (c, n, "ours")), None)
            l = next((r for (cc, nn, w, r) in rows if (cc, nn, w) == (c, n, "llama")), None)
            f = lambda r, a, b: f"{r[a]:.2f} / {r[b]:.2f}" if r else "-"
            per = ", ".join(f"{a / b:.2f}" for a, b in zip(o["round_tok_s"], l["round_tok_s"])) if o and l else ""
            ratio = f"{o['tok_s'] / l['tok_s']:.2f}x ({per})" if o and l else "-"
            print(f"| {c} | {n} | {o['tok_s'] if o else float('nan'):.1f} | {l['tok_s'] if l else float('nan'):.1f} | {ratio} | "
                  f"{f(o, 'ttft50', 'ttft99')} | {f(l, 'ttft50', 'ttft99')} | {f(o, 'lat50', 'lat99')} | {f(l, 'lat50', 'lat99')} |")


def main_soak(seconds):
    model, threads = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "2"
    demo = os.environ.get("DEMO", os.path.join(REPO, "target/release/demo-engine"))
    port = free_port()
    p = subprocess.Popen([demo, "serve", "--model", model, "--engine", os.environ.get("ENGINE", "avx2"), "--threads", threads,
                          "--port", str(port), "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_ready(port, p, "ours")
        counts, problems, rss = soak(port, p.pid, seconds)
        alive = p.poll() is None
    finally:
        p.kill()
        err = p.stderr.read().decode("utf-8", "replace")
    print(f"soak {seconds}s at 8 clients: {sum(counts.values())} requests {counts}; server alive at the end: {alive}")
    print(f"problems: {len(problems)}" + "".join(f"\n  {x}" for x in problems[:10]))
    print("panics in the server's stderr: " + str(err.count("panicked")))
    print("RSS (MiB) over time: " + ", ".join(f"{t:.0f}s {kb / 1024:.0f}" for t, kb in rss))
    warm = [kb for t, kb in rss if t >= 60]
    if warm:
        print(f"RSS after the first minute: min {min(warm) / 1024:.0f} MiB, max {max(warm) / 1024:.0f} MiB")
    sys.exit(1 if problems or not alive or "panicked" in err else 0)


if __name__ == "__main__":
    main()
