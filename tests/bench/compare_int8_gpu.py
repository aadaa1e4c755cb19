#!/usr/bin/env python3
"""Int8 against f32 on the GPU: rumus (`examples/bench_int8.rs gpu`: a 4096 x 4096 layer,
f32 product and the int8 kernel, each call timed to completion) and PyTorch's f32, TF32 and
f16 linear layers of the same size on CUDA, in one run. Prints `name milliseconds` lines.

    python3 tests/bench/compare_int8_gpu.py              # builds and runs the example
    python3 tests/bench/compare_int8_gpu.py BINARY       # a prebuilt bench_int8
"""

import os
import subprocess
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def median_ms(f, reps=50):
    for _ in range(5):
        f()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        f()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return sorted(times)[reps // 2]


def main():
    command = [sys.argv[1], "gpu"] if len(sys.argv) > 1 else [
        "cargo", "run", "--quiet", "--release", "--example", "bench_int8", "--", "gpu"]
    rumus = subprocess.run(command, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    print("\n".join(line for line in rumus.splitlines() if line.startswith("gpu_")))
    layer = torch.nn.Linear(4096, 4096).cuda().eval()
    with torch.no_grad():
        for batch in (1, 64, 1024):
            x = torch.randn(batch, 4096, device="cuda")
            print(f"torch_linear4096_b{batch}_f32 {median_ms(lambda: layer(x)):.4f}")
            torch.backends.cuda.matmul.allow_tf32 = True
            print(f"torch_linear4096_b{batch}_tf32 {median_ms(lambda: layer(x)):.4f}")
            torch.backends.cuda.matmul.allow_tf32 = False
            half, xh = layer.half(), x.half()
            print(f"torch_linear4096_b{batch}_f16 {median_ms(lambda: half(xh)):.4f}")
            layer.float()


if __name__ == "__main__":
    main()
