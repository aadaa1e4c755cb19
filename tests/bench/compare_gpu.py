"""rumus on wgpu against PyTorch on CUDA, same GPU, same run.

    python3 tests/bench/compare_gpu.py target/release/examples/bench_gpu [ARGS..]

Runs the rumus binary (its output: `name value unit` lines), then the same workloads in
PyTorch, and prints a markdown table with both values and their ratio. SGEMM ratios are
rumus GFLOP/s over PyTorch's (higher is better; `hgemm` is the f16 product, accumulated in f32
on both sides; `hgemm_4096_at_b` and the like have the operands after `t` transposed
views, `hgemm_gpt2_...` are GPT-2 small's products (`bench_gpu layouts`), and on lines
ending `_copied` rumus copies transposed operands to row-major first); step ratios are rumus time over PyTorch's
(lower is better). `transformer_step_autocast` is the step under f16 autocast with dynamic
loss scaling on both sides (`torch.autocast` + `torch.amp.GradScaler`). `attention_t4096` is
causal attention forward and backward on [4, 8, 4096, 64] f32 (rumus's fused kernels against
PyTorch's `scaled_dot_product_attention`), `attention_t4096_memory` how far one such call
raised each allocator's peak, `attention_t4096_autocast` the same under f16 autocast. `gpt2_small_autocast` is tokens per second (higher is better)
of GPT-2 small (12 pre-norm blocks of width 768, 12 heads, GELU, no dropout, the output tied
to the token embedding, vocabulary 50,304) training on batches of 8 x 1,024 random tokens with
AdamW: rumus under f16 autocast with loss scaling, PyTorch under bf16 autocast;
`gpt2_small_memory` is each side's allocator peak over building the model and the steps.
"""

import math
import subprocess
import sys
import time

import torch


def per_call(fn, warmup, reps):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / reps


def per_call_settled(fn, warm_calls=1):
    """Seconds per call over at least a second of calls, after at least `warm_calls` of them
    and a quarter of a second (as bench_gpu times them: long enough for the GPU's clocks to
    settle and for a train step's first calls to have built what they build)."""
    start = time.perf_counter()
    calls = 0
    while calls < warm_calls or time.perf_counter() - start < 0.25:
        fn()
        torch.cuda.synchronize()
        calls += 1
    probe = per_call(fn, 0, 1)
    reps = max(3, math.ceil(1.0 / probe))
    return per_call(fn, 0, reps)


def matmul_rate(mkn, dtype=torch.float32, transposed=(False, False)):
    """GFLOP/s of an `m x k x n` product, either operand a transposed view if `transposed`
    says so."""
    torch.backends.cuda.matmul.allow_tf32 = False
    m, k, n = mkn

    def operand(rows, cols, t):
        if t:
            return torch.randn(cols, rows, device="cuda", dtype=dtype).t()
        return torch.randn(rows, cols, device="cuda", dtype=dtype)
    a, b = operand(m, k, transposed[0]), operand(k, n, transposed[1])
    return 2 * m * k * n / per_call_settled(lambda: a @ b) / 1e9


# GPT-2 small's linear layers (inputs, outputs) as `bench_gpu layouts` names them, and each
# one's three products at 8 x 1,024 tokens: (m, k, n) and which operand is transposed.
GPT2_LAYERS = {"qkv": (768, 2304), "proj": (768, 768), "fc": (768, 3072),
               "fc_proj": (3072, 768), "logits": (768, 50304)}
GPT2_PRODUCTS = {
    "forward": lambda t, i, o: ((t, i, o), (False, True)),
    "input_grad": lambda t, i, o: ((t, o, i), (False, False)),
    "weight_grad": lambda t, i, o: ((o, t, i), (True, False)),
}


def hgemm_case(name):
    """The product of a `bench_gpu` `hgemm_...` line: `hgemm_N`, `hgemm_N_ab_t` (`at_b`,
    `at_b_t`: transposed views) or `hgemm_gpt2_LAYER_PRODUCT`, each maybe ending `_copied`
    (rumus copies the transposed operands to row-major first; PyTorch multiplies them as
    they are). Returns ((m, k, n), transposed)."""
    rest = name.removeprefix("hgemm_").removesuffix("_copied")
    if rest.startswith("gpt2_"):
        rest = rest.removeprefix("gpt2_")
        for product, shape in GPT2_PRODUCTS.items():
            if rest.endswith("_" + product):
                inputs, outputs = GPT2_LAYERS[rest.removesuffix("_" + product)]
                return shape(8 * 1024, inputs, outputs)
        raise ValueError(f"no GPT-2 product in {name}")
    size, _, layouts = rest.partition("_")
    n = int(size)
    return (n, n, n), (layouts.startswith("at"), layouts.endswith("b_t"))


def mlp_step(batch):
    model = torch.nn.Sequential(
        torch.nn.Linear(784, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 10),
    ).cuda()
    opt = torch.optim.Adam(model.parameters())
    x = torch.randn(batch, 784, device="cuda")
    y = (torch.arange(batch, device="cuda") % 10)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    return per_call_settled(step, 3) * 1e3


def cnn_step(batch):
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 32, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(1600, 128), torch.nn.ReLU(),
        torch.nn.Linear(128, 10),
    ).cuda()
    opt = torch.optim.Adam(model.parameters())
    x = torch.randn(batch, 1, 28, 28, device="cuda")
    y = torch.arange(batch, device="cuda") % 10

    def step():
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    return per_call_settled(step, 3) * 1e3


def transformer(forward_only, autocast=None):
    """The encoder's step (ms) in f32, or under autocast in `autocast` ("f16" with loss
    scaling, "bf16" without), or its forward pass alone."""
    layers = [
        torch.nn.TransformerEncoderLayer(512, 8, 2048, norm_first=True, batch_first=True)
        for _ in range(6)
    ]
    model = torch.nn.Sequential(*layers).cuda().train()
    opt = torch.optim.Adam(model.parameters())
    x = torch.randn(32, 256, 512, device="cuda")
    target = torch.randn(32, 256, 512, device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.mse_loss(model(x), target).backward()
        opt.step()

    scaler = torch.amp.GradScaler("cuda")

    def step_autocast():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.mse_loss(model(x), target)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    def step_bf16():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        opt.step()

    def forward():
        with torch.no_grad():
            model(x)

    if forward_only:
        return per_call_settled(forward, 3) * 1e3
    if autocast == "f16":
        return per_call_settled(step_autocast, 5) * 1e3
    if autocast == "bf16":
        return per_call_settled(step_bf16, 5) * 1e3
    return per_call_settled(step, 5) * 1e3


def attention(autocast=None):
    """Causal attention forward and backward on [4, 8, 4096, 64] in f32, or under autocast in
    `autocast` (torch.float16 or torch.bfloat16; PyTorch picks its flash kernel): (ms per
    call, MiB the allocator's peak grew by)."""
    q, k, v = (torch.randn(4, 8, 4096, 64, device="cuda", requires_grad=True) for _ in range(3))

    def step():
        with torch.autocast("cuda", dtype=autocast or torch.float32, enabled=autocast is not None):
            out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        out.float().sum().backward()

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    step()
    torch.cuda.synchronize()
    grown = (torch.cuda.max_memory_allocated() - before) / 2**20
    return per_call_settled(step, 3) * 1e3, grown


class Gpt2Block(torch.nn.Module):
    """A GPT-2 block as GPT-2 (and the `gpt` example) writes it: pre-norm causal self-attention
    through one fused qkv projection and PyTorch's fused SDPA, then a GELU MLP of 4x width."""

    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = torch.nn.LayerNorm(width)
        self.c_attn = torch.nn.Linear(width, 3 * width)
        self.attn_proj = torch.nn.Linear(width, width)
        self.ln_2 = torch.nn.LayerNorm(width)
        self.c_fc = torch.nn.Linear(width, 4 * width)
        self.mlp_proj = torch.nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        heads = lambda y: y.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        y = torch.nn.functional.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        x = x + self.attn_proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp_proj(torch.nn.functional.gelu(self.c_fc(self.ln_2(x))))


def gpt2_small(blocks="encoder", compiled=False):
    """GPT-2 small under bf16 autocast with AdamW: (tokens per second, peak MiB). `blocks`:
    "encoder" (`TransformerEncoderLayer`s with a causal mask) or "gpt2" (`Gpt2Block`s, like
    for like with rumus's decoder); `compiled`: the model through `torch.compile`."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    vocab, context, width, batch = 50304, 1024, 768, 8

    class Gpt(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.token = torch.nn.Embedding(vocab, width)
            self.position = torch.nn.Embedding(context, width)
            torch.nn.init.normal_(self.token.weight, std=0.02)
            torch.nn.init.normal_(self.position.weight, std=0.02)
            self.blocks = torch.nn.ModuleList(
                Gpt2Block(width, 12) if blocks == "gpt2" else torch.nn.TransformerEncoderLayer(
                    width, 12, 4 * width, dropout=0.0, activation="gelu",
                    norm_first=True, batch_first=True)
                for _ in range(12))
            self.norm = torch.nn.LayerNorm(width)
            self.register_buffer(
                "mask", torch.nn.Transformer.generate_square_subsequent_mask(context))

        def forward(self, ids):
            h = self.token(ids) + self.position(torch.arange(ids.shape[1], device=ids.device))
            for block in self.blocks:
                h = block(h) if blocks == "gpt2" else block(h, src_mask=self.mask, is_causal=True)
            return self.norm(h) @ self.token.weight.t()

    model = Gpt().cuda().train()
    forward = torch.compile(model) if compiled else model
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    tokens = torch.randint(0, 50257, (1 << 16,), device="cuda")

    def step():
        starts = torch.randint(0, tokens.numel() - context - 1, (batch, 1), device="cuda")
        at = starts + torch.arange(context + 1, device="cuda")
        window = tokens[at]
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = forward(window[:, :-1])
            loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, vocab).float(), window[:, 1:].reshape(-1))
        loss.backward()
        opt.step()

    seconds = per_call_settled(step, 3)
    return batch * context / seconds, torch.cuda.max_memory_allocated() / 2**20


def main():
    binary = sys.argv[1]
    out = subprocess.run([binary] + sys.argv[2:], capture_output=True, text=True)
    sys.stderr.write(out.stderr)
    if out.returncode != 0:
        sys.exit(f"{binary} failed with exit status {out.returncode}")
    rumus = {}
    for line in out.stdout.splitlines():
        name, value, unit = line.split()
        rumus[name] = (float(value), unit)
    torch_values = {}
    for name in list(rumus):
        if name.startswith("sgemm_"):
            n = int(name.split("_")[1])
            torch_values[name] = matmul_rate((n, n, n))
        elif name.startswith("hgemm_"):
            mkn, transposed = hgemm_case(name)
            torch_values[name] = matmul_rate(mkn, torch.float16, transposed)
        elif name == "mlp_step_b256":
            torch_values[name] = mlp_step(256)
        elif name == "cnn_step_b256":
            torch_values[name] = cnn_step(256)
        elif name == "transformer_step":
            torch_values[name] = transformer(forward_only=False)
        elif name == "transformer_step_autocast":
            torch_values[name] = transformer(forward_only=False, autocast="f16")
        elif name == "transformer_step_bf16":
            torch_values[name] = transformer(forward_only=False, autocast="bf16")
        elif name == "attention_t4096":
            torch_values[name], torch_values["attention_t4096_memory"] = attention()
        elif name == "attention_t4096_autocast":
            torch_values[name] = attention(autocast=torch.float16)[0]
        elif name == "attention_t4096_bf16":
            torch_values[name] = attention(autocast=torch.bfloat16)[0]
        elif name == "gpt2_small_autocast":
            # PyTorch's encoder layers in bf16; rumus in f16 with loss scaling.
            torch_values[name], torch_values["gpt2_small_memory"] = gpt2_small()
        elif name == "gpt2_small_bf16":
            # Like for like: GPT-2 blocks in bf16 on both sides, then PyTorch compiled.
            torch_values[name], torch_values["gpt2_small_bf16_memory"] = gpt2_small("gpt2")
            compiled_rate, _ = gpt2_small("gpt2", compiled=True)
            rumus["gpt2_small_bf16_vs_compiled"] = rumus[name]
            torch_values["gpt2_small_bf16_vs_compiled"] = compiled_rate
        elif name == "transformer_forward":
            torch_values[name] = transformer(forward_only=True)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    print("| workload | unit | rumus | torch | ratio |")
    print("|---|---|---|---|---|")
    for name, (value, unit) in rumus.items():
        t = torch_values.get(name)
        if t is None:
            continue
        print(f"| {name} | {unit} | {value:.3f} | {t:.3f} | {value / t:.2f} |")


if __name__ == "__main__":
    main()
