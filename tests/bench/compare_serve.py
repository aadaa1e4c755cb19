#!/usr/bin/env python3
"""Server throughput and latency of rumus-serve against llama.cpp's OpenAI server
(llama-cpp-python's `llama_cpp.server`) on the same GGUF model and thread count.

    python3 tests/bench/compare_serve.py target/release/rumus-serve MODEL.gguf [--threads 2]
        [--clients 8,32] [--tokens 128]

For each client count, that many clients each stream one completion of `--tokens` tokens
(the end-of-turn token banned with `logit_bias`, so every answer has its full length) from
distinct prompts, all at once. Reported per server: total generated tokens per second over
the wall time of the whole wave, and the p50/p99 time to first token and inter-token
latency (gaps between streamed chunks). Ratios are rumus / llama.cpp (tokens/s: higher is
better).

Needs `pip install 'llama-cpp-python[server]'` in the Python that runs this script.
"""

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

PROMPTS = [
    "Once upon a time, in a village by the sea,",
    "The history of the printing press begins",
    "Here is a recipe for a simple bread:",
    "In the year 2150, the first city on Mars",
    "The three laws of thermodynamics state that",
    "Dear diary, today something strange happened:",
    "A short guide to keeping houseplants alive:",
    "The old lighthouse keeper looked at the storm and",
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, process, what, timeout=300):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if process.poll() is not None:
            sys.exit(f"{what} exited with {process.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/v1/models")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit(f"{what} did not come up")


def one_client(port, prompt, tokens, eos, seed, out):
    body = json.dumps({
        "prompt": prompt, "max_tokens": tokens, "temperature": 0.8, "seed": seed,
        "stream": True, "logit_bias": {str(eos): -100},
    })
    start = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    response = conn.getresponse()
    stamps = []
    for raw in response:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        if chunk["choices"][0].get("text"):
            stamps.append(time.perf_counter())
    out.append((start, stamps))


def wave(port, clients, tokens, eos):
    results = []
    threads = [
        threading.Thread(target=one_client,
                         args=(port, PROMPTS[i % len(PROMPTS)], tokens, eos, i, results))
        for i in range(clients)
    ]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    chunks = sum(len(s) for _, s in results)
    first = [s[0] - t0 for t0, s in results if s]
    gaps = [b - a for _, s in results for a, b in zip(s, s[1:])]
    pct = lambda xs, q: statistics.quantiles(xs, n=100)[q - 1] if len(xs) > 1 else xs[0]
    return {
        "tokens_per_s": chunks / wall,
        "chunks": chunks,
        "ttft_p50": pct(first, 50), "ttft_p99": pct(first, 99),
        "itl_p50": pct(gaps, 50), "itl_p99": pct(gaps, 99),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("model")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--clients", default="8,32")
    parser.add_argument("--tokens", type=int, default=128)
    args = parser.parse_args()
    import llama_cpp  # noqa: F401  (fail early without it)
    from gguf import GGUFReader
    reader = GGUFReader(args.model)
    eos = int(reader.fields["tokenizer.ggml.eos_token_id"].parts[-1][0])
    clients = [int(c) for c in args.clients.split(",")]
    env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads))
    servers = {}
    rumus_port, llama_port = free_port(), free_port()
    servers["rumus"] = (rumus_port, subprocess.Popen(
        [args.binary, "--model", args.model, "--port", str(rumus_port),
         "--max-batch", str(max(clients)), "--context", "2048", "--max-tokens", "1024"],
        env=env, stdout=subprocess.DEVNULL))
    servers["llama.cpp"] = (llama_port, subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", args.model,
         "--port", str(llama_port), "--n_threads", str(args.threads),
         "--n_threads_batch", str(args.threads), "--n_ctx", "2048"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    try:
        for name, (port, process) in servers.items():
            wait_ready(port, process, name)
        print(f"threads={args.threads} tokens={args.tokens} model={os.path.basename(args.model)}")
        print("| clients | server | tokens/s | TTFT p50 s | TTFT p99 s | ITL p50 ms | ITL p99 ms |")
        print("|---|---|---|---|---|---|---|")
        ratios = []
        for n in clients:
            row = {}
            for name, (port, _) in servers.items():
                wave(port, 2, 8, eos)  # warm-up
                r = wave(port, n, args.tokens, eos)
                row[name] = r
                print(f"| {n} | {name} | {r['tokens_per_s']:.1f} | {r['ttft_p50']:.2f} | "
                      f"{r['ttft_p99']:.2f} | {1e3 * r['itl_p50']:.1f} | {1e3 * r['itl_p99']:.1f} |",
                      flush=True)
            ratios.append((n, row["rumus"]["tokens_per_s"] / row["llama.cpp"]["tokens_per_s"]))
        for n, ratio in ratios:
            print(f"clients={n}: tokens/s ratio rumus/llama.cpp = {ratio:.2f}")
    finally:
        for _, process in servers.values():
            process.terminate()
            process.wait(timeout=60)


if __name__ == "__main__":
    main()
