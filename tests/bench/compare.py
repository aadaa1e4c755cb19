#!/usr/bin/env python3
"""Side-by-side CPU benchmark: rumus (examples/bench_cpu.rs) and PyTorch on the same
workloads, same thread count, in one run. Prints a table of medians and ratios
(rumus / torch; below 1 means rumus is faster).

    python3 tests/bench/compare.py          # needs torch (pip install torch)
"""

import os
import subprocess
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def median_ms(warmup, reps, f):
    for _ in range(warmup):
        f()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        f()
        times.append((time.perf_counter() - start) * 1e3)
    return sorted(times)[reps // 2]


def torch_workloads():
    out = {}
    for n in (256, 512, 1024):
        a, b = torch.randn(n, n), torch.randn(n, n)
        out[f"sgemm_{n}"] = median_ms(3, 10 if n >= 1024 else 30, lambda: a @ b)
    for batch in (64, 256):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
        opt = torch.optim.Adam(model.parameters())
        x, y = torch.randn(batch, 784), torch.arange(batch) % 10

        def step():
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()

        out[f"mlp_step_b{batch}"] = median_ms(10, 50, step)
    x, ones = torch.randn(16), torch.ones(16)

    def chain(h):
        for _ in range(1000):
            h = h + ones
        return h

    with torch.no_grad():
        out["ops1000_untracked"] = median_ms(5, 30, lambda: chain(x))
    tracked = x.clone().requires_grad_()
    out["ops1000_tracked"] = median_ms(5, 30, lambda: chain(tracked))
    return out


def rumus_workloads(threads):
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
    text = subprocess.run(["cargo", "run", "--quiet", "--release", "--example", "bench_cpu"], cwd=ROOT, env=env,
                          check=True, capture_output=True, text=True).stdout
    return {name: float(value) for name, value in (line.split() for line in text.splitlines() if line.strip())}


def main():
    print(f"torch {torch.__version__}, {os.cpu_count()} logical CPUs")
    print(f"{'workload':<20} {'threads':>7} {'rumus_ms':>10} {'torch_ms':>10} {'ratio':>7}")
    for threads in (1, 2):
        torch.set_num_threads(threads)
        rumus = rumus_workloads(threads)
        ours = torch_workloads()
        for name, t in ours.items():
            print(f"{name:<20} {threads:>7} {rumus[name]:>10.3f} {t:>10.3f} {rumus[name] / t:>7.2f}")


if __name__ == "__main__":
    main()
