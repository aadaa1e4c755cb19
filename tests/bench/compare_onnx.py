#!/usr/bin/env python3
"""ONNX inference on the CPU: rumus's importer (`OnnxModel::run`, examples/bench_onnx.rs)
against onnxruntime on the same files, same thread count, in one run. The models are
torchvision's and `transformers`' architectures, randomly initialised, in eval mode,
exported by `torch.onnx.export` (the TorchScript exporter, opset 17), plus single layers
that show where the time goes. Each side is timed in a process of its own (an idle
onnxruntime or PyTorch thread pool spins for a while after a run and would take a core from
the other side), on the same random input. Two alternating rounds; the faster median of each
side is kept. Ratio = rumus / onnxruntime time (below 1, rumus is faster).

    python3 tests/bench/compare_onnx.py [THREADS...] [--only NAME,NAME]
    # needs torch, torchvision, transformers, onnx and onnxruntime (pip install ...)
"""

import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import cpu_model, median_ms  # noqa: E402

if __name__ == "__main__" and sys.argv[1:2] == ["--onnxruntime"]:
    # The onnxruntime side, in a process of its own: PATH DIMS KIND THREADS REPS.
    path, dims, kind, threads, reps = sys.argv[2:7]
    dims = [int(d) for d in dims.split(",")]
    rng = np.random.default_rng(0)
    if kind == "f32":
        x = rng.standard_normal(dims, dtype=np.float32)
    else:
        x = rng.integers(0, int(kind.split(":")[1]), dims, dtype=np.int64)
    options = ort.SessionOptions()
    options.intra_op_num_threads = int(threads)
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    print(median_ms(3, int(reps), lambda: session.run(None, {name: x})))
    sys.exit(0)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torchvision.models as tv  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def bert_small():
    from transformers import BertConfig, BertModel
    config = BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                        intermediate_size=1024, vocab_size=8000)
    return BertModel(config).eval(), config.vocab_size


def gpt2_small():
    from transformers import GPT2Config, GPT2Model
    config = GPT2Config(n_embd=256, n_layer=4, n_head=4, vocab_size=8000, n_positions=256)
    return GPT2Model(config).eval(), config.vocab_size


class Tokens(nn.Module):
    """A `transformers` model as a function of token ids to its last hidden state."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(input_ids=ids).last_hidden_state


def image(model, size=224):
    return lambda: (model(weights=None).eval(), [1, 3, size, size], "f32")


def layer(module, dims):
    return lambda: (module.eval(), dims, "f32")


def tokens(make, length=128):
    def build():
        model, vocab = make()
        return Tokens(model), [1, length], f"i64:{vocab}"
    return build


WORKLOADS = {
    "resnet18": image(tv.resnet18),
    "mobilenet_v3_small": image(tv.mobilenet_v3_small),
    "efficientnet_b0": image(tv.efficientnet_b0),
    "shufflenet_v2_x0_5": image(tv.shufflenet_v2_x0_5),
    "squeezenet1_1": image(tv.squeezenet1_1),
    "regnet_y_400mf": image(tv.regnet_y_400mf),
    "bert_small": tokens(bert_small),
    "gpt2_small": tokens(gpt2_small),
    "depthwise3x3": layer(nn.Conv2d(96, 96, 3, padding=1, groups=96), [1, 96, 56, 56]),
    "depthwise5x5_s2": layer(nn.Conv2d(240, 240, 5, stride=2, padding=2, groups=240),
                             [1, 240, 28, 28]),
    "conv3x3": layer(nn.Conv2d(64, 64, 3, padding=1), [1, 64, 56, 56]),
    "conv1x1": layer(nn.Conv2d(64, 256, 1), [1, 64, 56, 56]),
    "sigmoid": layer(nn.Sigmoid(), [1, 96, 112, 112]),
    "silu": layer(nn.SiLU(), [1, 96, 112, 112]),
    "gelu": layer(nn.GELU(), [1, 96, 112, 112]),
    "tanh": layer(nn.Tanh(), [1, 96, 112, 112]),
}


def export(name, directory):
    torch.manual_seed(0)
    model, dims, kind = WORKLOADS[name]()
    if kind == "f32":
        example = torch.randn(*dims)
    else:
        example = torch.randint(0, int(kind.split(":")[1]), dims)
    path = os.path.join(directory, f"{name}.onnx")
    with torch.no_grad():
        torch.onnx.export(model, (example,), path, opset_version=17, dynamo=False,
                          input_names=["input"], output_names=["output"])
    return path, dims, kind, example.numpy()


def onnxruntime_ms(path, dims, kind, threads, reps):
    command = [sys.executable, os.path.abspath(__file__), "--onnxruntime", path,
               ",".join(map(str, dims)), kind, str(threads), str(reps)]
    return float(subprocess.run(command, check=True, capture_output=True, text=True).stdout)


def rumus_ms(binary, path, dims, kind, threads, reps):
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
    text = subprocess.run([binary, path, ",".join(map(str, dims)), kind, str(reps)],
                          env=env, check=True, capture_output=True, text=True).stdout
    return float(text.strip())


def main():
    # PyTorch only exports here; its own threads stay out of the timed processes' way.
    torch.set_num_threads(1)
    args = sys.argv[1:]
    only = None
    if "--only" in args:
        at = args.index("--only")
        only = args[at + 1].split(",")
        del args[at:at + 2]
    thread_counts = [int(a) for a in args] or [1, 2]
    names = [n for n in WORKLOADS if only is None or n in only]
    subprocess.run(["cargo", "build", "--quiet", "--release", "--example", "bench_onnx"],
                   cwd=ROOT, check=True)
    binary = os.path.join(ROOT, "target", "release", "examples", "bench_onnx")
    print(f"{time.strftime('%Y-%m-%d')}; {cpu_model()}, {os.cpu_count()} logical CPUs; "
          f"torch {torch.__version__}, onnxruntime {ort.__version__}")
    print("| model | threads | rumus ms | onnxruntime ms | ratio |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as directory:
        for name in names:
            path, dims, kind, _ = export(name, directory)
            for threads in thread_counts:
                reps = 20
                best_rumus, best_ort = float("inf"), float("inf")
                for _ in range(2):
                    best_ort = min(best_ort, onnxruntime_ms(path, dims, kind, threads, reps))
                    best_rumus = min(best_rumus, rumus_ms(binary, path, dims, kind, threads, reps))
                print(f"| {name} | {threads} | {best_rumus:.3f} | {best_ort:.3f} | "
                      f"{best_rumus / best_ort:.2f} |", flush=True)


if __name__ == "__main__":
    main()
