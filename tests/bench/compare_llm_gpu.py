"""rumus against PyTorch decoding the same GGUF Llama model on one GPU in f16, same run.

    cargo build --release --example chat
    python3 tests/bench/compare_llm_gpu.py target/release/examples/chat MODEL.gguf [cuda|gpu]

rumus: the `chat` example with `--device cuda` (or `gpu`, wgpu) and its default `--dtype f16`:
the chat prompt of `examples/chat.rs`, then 128 greedy tokens, each drawn on the host from the
last logits (`Llama::to_device`, products under f16 autocast, activations and the key/value
cache in f32).

PyTorch: the same file read by this script (numpy: the header, the metadata and the f32, f16,
q4_0, q4_1 and q8_0 tensors, dequantized), the Llama architecture in plain torch (RMSNorm,
rotary positions on neighbouring pairs as GGUF orders the query and key rows, grouped
key/value heads through `scaled_dot_product_attention`, SwiGLU, the tied output matrix),
every weight in f16, a preallocated f16 key/value cache, greedy decoding with the argmax on
the GPU. Its prompt has rumus's length (token ids do not change the speed), then 128 tokens;
tokens/s over the 127 decoding steps, both sides. The faster of two runs each. Then both at
batch 32: 32 copies of the prompt decoded together (rumus: `chat --batch 32`,
`Llama::forward_batch`), tokens/s in all.

    python3 tests/bench/compare_llm_gpu.py skeleton MODEL.gguf SKELETON
    python3 tests/bench/compare_llm_gpu.py random-weights SKELETON RANDOM.gguf

cut a model file down to its header, metadata (the tokenizer) and tensor infos, and fill
those tensors with random values of the same types: a model of the same shapes and block
formats, to time where the model file itself cannot be copied.
"""

import re
import struct
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

NEW_TOKENS = 128


BLOCK_BYTES = {2: 18, 3: 20, 8: 34}  # q4_0, q4_1, q8_0: bytes per block of 32


def gguf_layout(path):
    """(the file's bytes, metadata, [(name, dims, GGML type, offset)], where tensor data starts)."""
    data = np.memmap(path, dtype=np.uint8, mode="r")
    at = 0

    def take(fmt):
        nonlocal at
        values = struct.unpack_from("<" + fmt, data, at)
        at += struct.calcsize("<" + fmt)
        return values[0] if len(values) == 1 else values

    def string():
        nonlocal at
        n = take("Q")
        text = bytes(data[at:at + n]).decode("utf-8", "replace")
        at += n
        return text

    scalars = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(kind):
        if kind == 8:
            return string()
        if kind == 9:
            inner, n = take("I"), take("Q")
            return [value(inner) for _ in range(n)]
        return take(scalars[kind])

    assert bytes(data[:4]) == b"GGUF", "not a GGUF file"
    at = 4
    _version, tensors, entries = take("I"), take("Q"), take("Q")
    meta = {}
    for _ in range(entries):
        key = string()
        meta[key] = value(take("I"))
    infos = []
    for _ in range(tensors):
        name = string()
        dims = [take("Q") for _ in range(take("I"))]
        infos.append((name, dims, take("I"), take("Q")))
    alignment = meta.get("general.alignment", 32)
    return data, meta, infos, (at + alignment - 1) // alignment * alignment


def tensor_bytes(dims, kind):
    count = int(np.prod(dims))
    return {0: 4 * count, 1: 2 * count}.get(kind) or count // 32 * BLOCK_BYTES[kind]


def read_gguf(path):
    """(metadata, {name: float32 array in torch's [rows, cols] order})."""
    data, meta, infos, start = gguf_layout(path)
    weights = {}
    for name, dims, kind, offset in infos:
        count = int(np.prod(dims))
        base = start + offset
        if kind == 0:
            values = np.frombuffer(data, np.float32, count, base)
        elif kind == 1:
            values = np.frombuffer(data, np.float16, count, base).astype(np.float32)
        elif kind in BLOCK_BYTES:
            size = BLOCK_BYTES[kind]
            blocks = np.frombuffer(data, np.uint8, count // 32 * size, base).reshape(-1, size)
            d = blocks[:, :2].copy().view(np.float16).astype(np.float32)
            if kind == 8:
                values = blocks[:, 2:].copy().view(np.int8).astype(np.float32) * d
            else:
                header = 4 if kind == 3 else 2
                packed = blocks[:, header:]
                levels = np.concatenate([packed & 0x0F, packed >> 4], axis=1).astype(np.float32)
                if kind == 3:
                    m = blocks[:, 2:4].copy().view(np.float16).astype(np.float32)
                    values = levels * d + m
                else:
                    values = (levels - 8.0) * d
        else:
            raise SystemExit(f"{name}: GGML type {kind} is not read here")
        weights[name] = np.asarray(values, np.float32).reshape(list(reversed(dims)))
    return meta, weights


def write_skeleton(path, out):
    """The file up to its tensor data (header, metadata with the tokenizer, tensor infos)."""
    data, _, _, start = gguf_layout(path)
    with open(out, "wb") as f:
        f.write(bytes(data[:start]))


def write_random_weights(skeleton, out, seed=0):
    """The skeleton's tensors filled with random values of their types: norms near 1, matrix
    blocks with scales of a trained model's size, so every logit is finite. Decoding speed
    depends on the shapes and formats only."""
    data, _, infos, start = gguf_layout(skeleton)
    rng = np.random.default_rng(seed)
    end = max(offset + tensor_bytes(dims, kind) for _, dims, kind, offset in infos)
    body = np.zeros(end, np.uint8)
    for name, dims, kind, offset in infos:
        count = int(np.prod(dims))
        if kind == 0:
            values = (1.0 + 0.1 * rng.standard_normal(count)).astype(np.float32).view(np.uint8)
        elif kind == 1:
            values = (0.02 * rng.standard_normal(count)).astype(np.float16).view(np.uint8)
        else:
            size, blocks = BLOCK_BYTES[kind], count // 32
            block = rng.integers(0, 256, (blocks, size), dtype=np.uint8)
            block[:, :2] = np.full(blocks, 0.004, np.float16).view(np.uint8).reshape(-1, 2)
            if kind == 3:
                block[:, 2:4] = np.full(blocks, -0.03, np.float16).view(np.uint8).reshape(-1, 2)
            values = block.reshape(-1)
        body[offset:offset + values.size] = values
    with open(out, "wb") as f:
        f.write(bytes(data[:start]))
        f.write(body.tobytes())


class Llama:
    def __init__(self, path, device):
        meta, w = read_gguf(path)
        arch = meta["general.architecture"]
        self.blocks = meta[f"{arch}.block_count"]
        self.heads = meta[f"{arch}.attention.head_count"]
        self.kv_heads = meta[f"{arch}.attention.head_count_kv"]
        self.eps = meta[f"{arch}.attention.layer_norm_rms_epsilon"]
        self.base = meta.get(f"{arch}.rope.freq_base", 10000.0)
        self.width = meta[f"{arch}.embedding_length"]
        self.head_width = self.width // self.heads
        t = lambda name, dtype=torch.float16: torch.tensor(w[name], dtype=dtype, device=device)
        self.embedding = t("token_embd.weight")
        self.output = t("output.weight") if "output.weight" in w else self.embedding
        self.norm = t("output_norm.weight", torch.float32)
        self.layers = []
        for i in range(self.blocks):
            b = lambda part, dtype=torch.float16: t(f"blk.{i}.{part}.weight", dtype)
            self.layers.append({
                "attn_norm": b("attn_norm", torch.float32), "q": b("attn_q"), "k": b("attn_k"),
                "v": b("attn_v"), "o": b("attn_output"), "ffn_norm": b("ffn_norm", torch.float32),
                "gate": b("ffn_gate"), "up": b("ffn_up"), "down": b("ffn_down")})
        self.device = device

    def rms_norm(self, x, weight):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps) * weight).half()

    def rotate(self, x, positions):
        pairs = self.head_width // 2
        freqs = self.base ** (-2.0 * torch.arange(pairs, device=self.device, dtype=torch.float32) / self.head_width)
        angles = positions.float()[:, None] * freqs[None, :]
        cos, sin = angles.cos()[None, :, None, :], angles.sin()[None, :, None, :]
        x = x.float().unflatten(-1, (pairs, 2))
        even, odd = x[..., 0], x[..., 1]
        turned = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1)
        return turned.flatten(-2).half()

    def new_cache(self, batch, tokens):
        shape = (batch, self.kv_heads, tokens, self.head_width)
        return [(torch.zeros(shape, dtype=torch.float16, device=self.device),
                 torch.zeros(shape, dtype=torch.float16, device=self.device)) for _ in range(self.blocks)]

    @torch.inference_mode()
    def forward(self, tokens, start, cache):
        batch, t = tokens.shape
        positions = torch.arange(start, start + t, device=self.device)
        x = self.embedding[tokens]
        for layer, (keys, values) in zip(self.layers, cache):
            h = self.rms_norm(x, layer["attn_norm"])
            q = self.rotate((h @ layer["q"].T).view(batch, t, self.heads, self.head_width), positions)
            k = self.rotate((h @ layer["k"].T).view(batch, t, self.kv_heads, self.head_width), positions)
            v = (h @ layer["v"].T).view(batch, t, self.kv_heads, self.head_width)
            keys[:, :, start:start + t] = k.transpose(1, 2)
            values[:, :, start:start + t] = v.transpose(1, 2)
            attended = F.scaled_dot_product_attention(
                q.transpose(1, 2), keys[:, :, :start + t], values[:, :, :start + t],
                is_causal=t > 1, enable_gqa=True)
            x = x + attended.transpose(1, 2).reshape(batch, t, self.width) @ layer["o"].T
            h = self.rms_norm(x, layer["ffn_norm"])
            x = x + (F.silu(h @ layer["gate"].T) * (h @ layer["up"].T)) @ layer["down"].T
        return self.rms_norm(x[:, -1], self.norm) @ self.output.T


def torch_decode_rate(model, batch, prompt_tokens):
    prompt = torch.arange(1, prompt_tokens + 1, device=model.device).repeat(batch, 1)
    cache = model.new_cache(batch, prompt_tokens + NEW_TOKENS)
    logits = model.forward(prompt, 0, cache)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for step in range(NEW_TOKENS - 1):
        following = logits.argmax(-1, keepdim=True)
        logits = model.forward(following, prompt_tokens + step, cache)
    torch.cuda.synchronize()
    return batch * (NEW_TOKENS - 1) / (time.perf_counter() - start)


def rumus_rate(binary, model, device, batch=1):
    out = subprocess.run(
        [binary, "--model", model, "--max-tokens", str(NEW_TOKENS), "--device", device,
         "--batch", str(batch)],
        capture_output=True, text=True, check=True)
    rate = re.search(r"generation: ([0-9.]+) tokens/s \(([0-9]+) tokens", out.stderr)
    prompt = re.search(r"a prompt of ([0-9]+) tokens", out.stderr)
    return float(rate.group(1)), int(prompt.group(1)), int(rate.group(2))


def main():
    if sys.argv[1] == "skeleton":
        return write_skeleton(sys.argv[2], sys.argv[3])
    if sys.argv[1] == "random-weights":
        return write_random_weights(sys.argv[2], sys.argv[3])
    binary, path = sys.argv[1], sys.argv[2]
    device = sys.argv[3] if len(sys.argv) > 3 else "cuda"
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    ours = [rumus_rate(binary, path, device) for _ in range(2)]
    rate, prompt_tokens, decoded = max(ours)
    model = Llama(path, "cuda")
    torch_decode_rate(model, 1, prompt_tokens)  # warm-up
    theirs = max(torch_decode_rate(model, 1, prompt_tokens) for _ in range(2))
    print("| workload | rumus tok/s | torch tok/s | ratio |")
    print("|---|---|---|---|")
    print(f"| decode batch 1, f16 ({prompt_tokens}-token prompt, {decoded} steps) | {rate:.1f} | {theirs:.1f} | {rate / theirs:.2f} |")
    ours_wide = max(rumus_rate(binary, path, device, 32)[0] for _ in range(2))
    wide = max(torch_decode_rate(model, 32, prompt_tokens) for _ in range(2))
    print(f"| decode batch 32, f16 (tokens/s in all) | {ours_wide:.1f} | {wide:.1f} | {ours_wide / wide:.2f} |")


if __name__ == "__main__":
    main()
