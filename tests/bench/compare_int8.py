#!/usr/bin/env python3
"""Int8 against f32 inference on the CPU: rumus (examples/bench_int8.rs) and PyTorch (f32
layers, and `torch.ao.quantization.quantize_dynamic` int8 linear layers, the form of int8 a
PyTorch user reaches for without calibration) on the same workloads, same thread count, in
one run (two alternating rounds, the faster median of each side kept). Ratios below 1 mean
the first named is faster.

    python3 tests/bench/compare_int8.py     # needs torch: pip install torch
"""

import os
import subprocess
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    sys.exit("PyTorch is needed for the comparison: pip install torch")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import Cnn, cpu_model, median_ms  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def torch_workloads():
    out = {}
    torch.manual_seed(0)
    layer = nn.Linear(1024, 1024).eval()
    int8 = torch.ao.quantization.quantize_dynamic(nn.Sequential(layer), {nn.Linear}, dtype=torch.qint8)
    with torch.no_grad():
        for batch in (1, 64):
            x = torch.randn(batch, 1024)
            reps = 2000 if batch == 1 else 200
            out[f"linear1024_b{batch}_f32"] = median_ms(20, reps, lambda: layer(x))
            out[f"linear1024_b{batch}_int8"] = median_ms(20, reps, lambda: int8(x))
        model = Cnn().eval()
        x = torch.randn(64, 1, 28, 28)
        out["cnn_fwd_b64_f32"] = median_ms(3, 30, lambda: model(x))
        # Dynamic quantization covers the linear layers only (convolutions need calibrated
        # static quantization in PyTorch).
        dynamic = torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
        out["cnn_fwd_b64_int8"] = median_ms(3, 30, lambda: dynamic(x))
    return out


def rumus_workloads(threads):
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
    text = subprocess.run(["cargo", "run", "--quiet", "--release", "--example", "bench_int8"],
                          cwd=ROOT, env=env, check=True, capture_output=True, text=True).stdout
    return {name: float(value) for name, value in (line.split() for line in text.splitlines() if line.strip())}


def main():
    print(f"{time.strftime('%Y-%m-%d')}; {cpu_model()}, {os.cpu_count()} logical CPUs; torch {torch.__version__}")
    print("| workload | threads | rumus f32 ms | rumus int8 ms | rumus int8/f32 | torch f32 ms | torch int8 ms | rumus int8 / torch int8 |")
    print("|---|---|---|---|---|---|---|---|")
    sizes = {}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        rumus, theirs = {}, {}
        for _ in range(2):
            for mine, run in ((rumus, lambda: rumus_workloads(threads)), (theirs, torch_workloads)):
                for name, value in run().items():
                    mine[name] = min(value, mine.get(name, float("inf")))
        for base in ("linear1024_b1", "linear1024_b64", "cnn_fwd_b64"):
            rf, ri = rumus[f"{base}_f32"], rumus[f"{base}_int8"]
            tf, ti = theirs[f"{base}_f32"], theirs[f"{base}_int8"]
            print(f"| {base} | {threads} | {rf:.3f} | {ri:.3f} | {ri / rf:.2f} | {tf:.3f} | {ti:.3f} | {ri / ti:.2f} |", flush=True)
        sizes = {k: v for k, v in rumus.items() if k.startswith("cnn_weight_bytes")}
    print(f"\nMNIST CNN weights: f32 {sizes['cnn_weight_bytes_f32']:.0f} bytes, int8 "
          f"{sizes['cnn_weight_bytes_int8']:.0f} bytes ({sizes['cnn_weight_bytes_int8'] / sizes['cnn_weight_bytes_f32']:.2f}x)")


if __name__ == "__main__":
    main()
