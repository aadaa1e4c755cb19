#!/usr/bin/env python3
"""Compile-time cost of the shape-checking macros.

Generates two versions of the same program into a scratch crate under target/:
  typed   - a 100-layer `#[model(sequential)]` MLP plus a 30-op `tensor_fn!`
  untyped - the same model and function written with runtime-shaped `DynTensor`s
and times `cargo check` after touching only that file (median of several runs).

Usage: python3 tests/compile_time/measure.py [--runs N]
"""
import argparse
import os
import pathlib
import shutil
import statistics
import subprocess
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRATCH = ROOT / "target" / "compile-time"
LAYERS, OPS, WIDTH = 100, 30, 64


def typed_source():
    fields = "\n".join(f"    l{i}: Linear<{WIDTH}, {WIDTH}>," for i in range(LAYERS))
    ops = ["let h0 = x @ w;"]
    for i in range(1, OPS):
        op = ["(h{p} + x).relu()", "h{p} * 0.5", "h{p} @ w", "h{p}.tanh()", "h{p} - x"][i % 5]
        ops.append(f"let h{i} = {op.format(p=i - 1)};")
    body = "\n        ".join(ops)
    return f"""use rumus::prelude::*;

#[model(sequential, activation = relu)]
struct Big {{
{fields}
}}

tensor_fn! {{
    fn chain(x: [B, {WIDTH}], w: [{WIDTH}, {WIDTH}]) -> [B, {WIDTH}] {{
        {body}
        h{OPS - 1}
    }}
}}

fn main() -> rumus::Result<()> {{
    let model = Big::new()?;
    let x = Tensor::<(Dyn, D<{WIDTH}>)>::zeros_with_dims(&[2, {WIDTH}])?;
    let y = model.forward(&x)?;
    let z = chain(&y, &Tensor::zeros())?;
    println!("{{:?}}", z.dims());
    Ok(())
}}
"""


def untyped_source():
    fields = "\n".join(f"    l{i}: (DynTensor, DynTensor)," for i in range(LAYERS))
    inits = "\n".join(
        f"            l{i}: (DynTensor::randn(&[{WIDTH}, {WIDTH}], DType::F32)?, DynTensor::zeros(&[{WIDTH}], DType::F32)?),"
        for i in range(LAYERS)
    )
    steps = []
    for i in range(LAYERS):
        act = ".relu()?" if i + 1 < LAYERS else ""
        steps.append(f"let h = h.matmul(&self.l{i}.0.transpose(0, 1)?)?.add(&self.l{i}.1)?{act};")
    forward = "\n        ".join(steps)
    ops = ["let h0 = x.matmul(w)?;"]
    for i in range(1, OPS):
        op = ["h{p}.add(x)?.relu()?", "h{p}.mul_scalar(0.5)?", "h{p}.matmul(w)?", "h{p}.tanh()?", "h{p}.sub(x)?"][i % 5]
        ops.append(f"let h{i} = {op.format(p=i - 1)};")
    body = "\n    ".join(ops)
    return f"""use rumus::prelude::*;

struct Big {{
{fields}
}}

impl Big {{
    fn new() -> rumus::Result<Self> {{
        Ok(Big {{
{inits}
        }})
    }}

    fn forward(&self, x: &DynTensor) -> rumus::Result<DynTensor> {{
        let h = x.clone();
        {forward}
        Ok(h)
    }}
}}

fn chain(x: &DynTensor, w: &DynTensor) -> rumus::Result<DynTensor> {{
    {body}
    Ok(h{OPS - 1})
}}

fn main() -> rumus::Result<()> {{
    let model = Big::new()?;
    let x = DynTensor::zeros(&[2, {WIDTH}], DType::F32)?;
    let y = model.forward(&x)?;
    let z = chain(&y, &DynTensor::zeros(&[{WIDTH}, {WIDTH}], DType::F32)?)?;
    println!("{{:?}}", z.dims());
    Ok(())
}}
"""


def check_times(name, source, runs):
    crate = SCRATCH / name
    (crate / "src").mkdir(parents=True, exist_ok=True)
    (crate / "Cargo.toml").write_text(
        f'[package]\nname = "ct-{name}"\nversion = "0.0.0"\nedition = "2024"\npublish = false\n\n'
        f'[dependencies]\nrumus = {{ path = "{ROOT / "rumus"}" }}\n\n[workspace]\n'
    )
    main = crate / "src" / "main.rs"
    main.write_text(source)
    env = dict(os.environ, CARGO_TARGET_DIR=str(SCRATCH / "target"))
    cmd = ["cargo", "check", "--quiet", "--manifest-path", str(crate / "Cargo.toml")]
    subprocess.run(cmd, env=env, check=True)  # warm: dependencies and a first build
    times = []
    for _ in range(runs):
        os.utime(main)
        start = time.perf_counter()
        subprocess.run(cmd, env=env, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    typed = check_times("typed", typed_source(), args.runs)
    untyped = check_times("untyped", untyped_source(), args.runs)
    print(f"cargo check after touching the file, median of {args.runs} runs")
    print(f"typed   (#[model] {LAYERS} layers + tensor_fn! {OPS} ops): {typed:.2f} s")
    print(f"untyped (same program on DynTensor):                  {untyped:.2f} s")
    print(f"ratio typed/untyped: {typed / untyped:.2f}")


if __name__ == "__main__":
    main()
