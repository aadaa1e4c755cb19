#!/usr/bin/env python3
"""Side-by-side CPU benchmark: rumus (examples/bench_cpu.rs) and PyTorch on the same
workloads, same thread count, in one run (two alternating rounds, the faster median of each
side kept). Prints a table of medians and ratios
(rumus / torch; below 1 means rumus is faster), the peak RSS of the MLP training loop in
each, and with --build the cold and incremental build times of rumus.

    python3 tests/bench/compare.py            # needs torch: pip install torch
    python3 tests/bench/compare.py --build    # also time a cold build (a few minutes)
"""

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    sys.exit("PyTorch is needed for the comparison: pip install torch (the CPU wheel is enough)")

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


def mlp():
    return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))


class Cnn(nn.Module):
    """conv32-pool-conv64-pool-fc128-fc10, as in examples/bench_cpu.rs."""

    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 32, 3), nn.Conv2d(32, 64, 3)
        self.fc1, self.fc2 = nn.Linear(1600, 128), nn.Linear(128, 10)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv1(x)), 2)
        h = F.max_pool2d(F.relu(self.conv2(h)), 2)
        return self.fc2(F.relu(self.fc1(h.flatten(1))))


def train_step(model, opt, loss_of):
    def step():
        opt.zero_grad()
        loss_of(model).backward()
        opt.step()

    return step


def torch_workloads():
    out = {}
    for n in (256, 512, 1024, 2048):
        a, b = torch.randn(n, n), torch.randn(n, n)
        reps = {2048: 5, 1024: 10}.get(n, 30)
        out[f"sgemm_{n}"] = median_ms(2, reps, lambda: a @ b)

    with torch.no_grad():
        for n_in, n_out in ((512, 1000), (4096, 4096)):
            x, w, bias = torch.randn(16, n_in), torch.randn(n_out, n_in), torch.randn(n_out)
            reps = 10 if n_in == 4096 else 50
            out[f"linear_b16_{n_in}x{n_out}"] = median_ms(3, reps, lambda: F.linear(x, w, bias))

    x = torch.randn(64, 32, 28, 28, requires_grad=True)
    w = torch.randn(64, 32, 3, 3, requires_grad=True)
    bias = torch.randn(64, requires_grad=True)

    def conv():
        x.grad = w.grad = bias.grad = None
        F.conv2d(x, w, bias, padding=1).sum().backward()

    out["conv2d_fwd_bwd"] = median_ms(3, 20, conv)

    for batch in (64, 256):
        torch.manual_seed(0)
        model = mlp()
        x, y = torch.randn(batch, 784), torch.arange(batch) % 10
        step = train_step(model, torch.optim.Adam(model.parameters()), lambda m: F.cross_entropy(m(x), y))
        out[f"mlp_step_b{batch}"] = median_ms(10, 50, step)

    torch.manual_seed(0)
    model = Cnn()
    x, y = torch.randn(64, 1, 28, 28), torch.arange(64) % 10
    out["cnn_step_b64"] = median_ms(3, 20, train_step(model, torch.optim.Adam(model.parameters()),
                                                      lambda m: F.cross_entropy(m(x), y)))

    torch.manual_seed(0)
    layer = lambda: nn.TransformerEncoderLayer(128, 4, 512, dropout=0.1, batch_first=True, norm_first=True)
    model = nn.Sequential(layer(), layer()).train()
    x, target = torch.randn(16, 64, 128), torch.randn(16, 64, 128)
    out["transformer_step"] = median_ms(3, 20, train_step(model, torch.optim.Adam(model.parameters()),
                                                          lambda m: F.mse_loss(m(x), target)))

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


def torch_mlp_loop_rss():
    """Peak RSS (MB) of a fresh Python process running 200 MLP steps at batch 64."""
    code = """
import resource, torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
m = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.Adam(m.parameters())
x, y = torch.randn(64, 784), torch.arange(64) % 10
for _ in range(200):
    opt.zero_grad(); F.cross_entropy(m(x), y).backward(); opt.step()
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""
    return float(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                text=True).stdout.split()[-1])


def cargo(*args, env=None):
    return subprocess.run(["cargo", *args], cwd=ROOT, env=env, check=True, capture_output=True, text=True).stdout


def steal_seconds():
    """Seconds of CPU time stolen by the hypervisor so far, all CPUs (the `steal` column of
    /proc/stat, in USER_HZ ticks); 0 where it cannot be read."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def rumus_workloads(threads):
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
    text = cargo("run", "--quiet", "--release", "--example", "bench_cpu", env=env)
    return {name: float(value) for name, value in (line.split() for line in text.splitlines() if line.strip())}


def build_times():
    """Seconds for a cold release build of the library alone, and for rebuilding an example
    after touching it (incremental)."""
    with tempfile.TemporaryDirectory() as target:
        env = dict(os.environ, CARGO_TARGET_DIR=target)
        cargo("fetch", env=env)
        start = time.perf_counter()
        cargo("build", "--release", "-p", "rumus", env=env)
        cold = time.perf_counter() - start
        cargo("build", "--release", "--example", "digits", env=env)
        # The median of three rebuilds after a touch (the first one after a cold build also
        # reads the incremental cache from disk).
        rebuilds = []
        for _ in range(3):
            os.utime(os.path.join(ROOT, "examples", "digits", "main.rs"))
            start = time.perf_counter()
            cargo("build", "--release", "--example", "digits", env=env)
            rebuilds.append(time.perf_counter() - start)
        return cold, sorted(rebuilds)[1]


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", action="store_true", help="also time cold and incremental builds")
    args = parser.parse_args()
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    print(f"{time.strftime('%Y-%m-%d')}; {cpu_model()}, {os.cpu_count()} logical CPUs; {rustc}; torch {torch.__version__}")
    print(f"| {'workload':<18} | threads | rumus_ms | torch_ms | ratio |")
    print("|---|---|---|---|---|")
    steal_notes = []
    for threads in (1, 2):
        torch.set_num_threads(threads)
        # Two rounds, alternating: a shared machine has slow phases (another tenant on the
        # host), and one side measured through one of them would skew its ratios. Each side
        # keeps the faster of its two medians per workload.
        rumus, ours = {}, {}
        stolen = {"rumus": 0.0, "torch": 0.0}
        for _ in range(2):
            for side, mine, run in (("rumus", rumus, lambda: rumus_workloads(threads)), ("torch", ours, torch_workloads)):
                before = steal_seconds()
                result = run()
                stolen[side] += steal_seconds() - before
                for name, ms in result.items():
                    mine[name] = min(ms, mine.get(name, float("inf")))
        steal_notes.append(f"{threads} thread(s): rumus {stolen['rumus']:.1f} s, torch {stolen['torch']:.1f} s")
        for name, t in ours.items():
            print(f"| {name:<18} | {threads} | {rumus[name]:.3f} | {t:.3f} | {rumus[name] / t:.2f} |", flush=True)
    # CPU time the hypervisor gave other guests while each side ran (a slow phase of a shared
    # machine shows here, not in the medians).
    print(f"\nsteal time during the rounds: {'; '.join(steal_notes)}")
    ours = float(cargo("run", "--quiet", "--release", "--example", "bench_cpu", "--", "rss").split()[-1])
    theirs = torch_mlp_loop_rss()
    print(f"\npeak RSS of 200 MLP steps (batch 64): rumus {ours:.1f} MB, torch {theirs:.1f} MB, "
          f"ratio {ours / theirs:.2f}")
    if args.build:
        cold, incremental = build_times()
        print(f"cold release build of the library: {cold:.1f} s; example rebuild after a touch (median of 3): {incremental:.2f} s")


if __name__ == "__main__":
    main()
