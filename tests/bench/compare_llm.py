"""rumus against llama.cpp decoding the same GGUF model on the CPU, same threads, same run.

    cargo build --release --example chat
    python3 tests/bench/compare_llm.py target/release/examples/chat MODEL.gguf

Both read the ChatML prompt of `examples/chat.rs`'s default question (a story about a
lighthouse) and then generate 128 tokens greedily, with 1 and with 2 threads (rumus:
`RAYON_NUM_THREADS`; llama.cpp through `llama-cpp-python`: `n_threads`, `n_threads_batch`).
Prints prompt and generation tokens per second and their ratio (rumus / llama.cpp: higher is
better). Then the prefill of a long prompt: the start of `examples/data/lighthouse.txt` cut
at a word to 512 tokens (llama.cpp's count; rumus prints its own, which must agree), given
raw, one token generated. Each side runs twice per case and thread count and keeps its
faster run.

    python3 tests/bench/compare_llm.py target/release/examples/chat MODEL.gguf --q8_0

does the same with the model converted to `q8_0` by llama.cpp's own quantizer
(`llama_model_quantize`, written next to the script's temporary files), for the 8-bit rows.
"""

import tempfile

import os

import re
import subprocess
import sys
import time

PROMPT = ("<|im_start|>user\nTell me a short story about a lighthouse.<|im_end|>\n"
          "<|im_start|>assistant\n")
NEW_TOKENS = 128


LONG_PROMPT_TOKENS = 512


def rumus_rates(binary, model, threads, extra=(), new_tokens=NEW_TOKENS):
    out = subprocess.run(
        [binary, "--model", model, "--max-tokens", str(new_tokens), *extra],
        capture_output=True, text=True, check=True,
        env={"RAYON_NUM_THREADS": str(threads), "PATH": "/usr/bin:/bin"})
    found = re.search(r"prompt: ([0-9.]+) tokens/s; generation: ([0-9.]+) tokens/s", out.stderr)
    count = re.search(r"a prompt of ([0-9]+) tokens", out.stderr)
    return float(found.group(1)), float(found.group(2)), int(count.group(1))


def llama_cpp_rates(model, threads):
    from llama_cpp import Llama

    llm = Llama(model_path=model, n_threads=threads, n_threads_batch=threads, n_ctx=1024,
                verbose=False)
    tokens = llm.tokenize(PROMPT.encode(), special=True)
    llm.reset()
    start = time.perf_counter()
    llm.eval(tokens)
    prefilled = time.perf_counter()
    for _ in range(NEW_TOKENS - 1):
        llm.eval([int(llm.scores[llm.n_tokens - 1].argmax())])
    done = time.perf_counter()
    return len(tokens) / (prefilled - start), (NEW_TOKENS - 1) / (done - prefilled)


def long_prompt(model):
    """The longest run of whole words from the start of the story within 512 tokens."""
    from llama_cpp import Llama

    llm = Llama(model_path=model, vocab_only=True, verbose=False)
    story = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "data", "lighthouse.txt")
    words = open(story, encoding="utf-8").read().split(" ")
    text = ""
    for word in words:
        longer = f"{text} {word}" if text else word
        if len(llm.tokenize(longer.encode(), add_bos=False)) > LONG_PROMPT_TOKENS:
            break
        text = longer
    return text


def llama_cpp_prefill(model, threads, text):
    from llama_cpp import Llama

    llm = Llama(model_path=model, n_threads=threads, n_threads_batch=threads, n_ctx=1024,
                n_batch=LONG_PROMPT_TOKENS, verbose=False)
    tokens = llm.tokenize(text.encode(), add_bos=False)
    llm.reset()
    start = time.perf_counter()
    llm.eval(tokens)
    return len(tokens) / (time.perf_counter() - start), len(tokens)


def as_q8_0(model):
    """`model` requantized to q8_0 by llama.cpp (a file in the temporary folder)."""
    import llama_cpp

    out = os.path.join(tempfile.gettempdir(), os.path.basename(model).replace(".gguf", ".q8_0.gguf"))
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0
    params.allow_requantize = True
    if llama_cpp.llama_model_quantize(model.encode(), out.encode(), params) != 0:
        sys.exit(f"llama.cpp could not quantize {model} to q8_0")
    return out


def main():
    binary, model = sys.argv[1], sys.argv[2]
    import llama_cpp

    if "--q8_0" in sys.argv[3:]:
        model = as_q8_0(model)
    print(f"llama-cpp-python {llama_cpp.__version__}, {os.path.basename(model)}")
    print("| threads | rumus prompt tok/s | llama.cpp prompt tok/s | ratio | rumus generation tok/s | llama.cpp generation tok/s | ratio |")
    print("|---|---|---|---|---|---|---|")
    for threads in (1, 2):
        ours = [rumus_rates(binary, model, threads)[:2] for _ in range(2)]
        theirs = [llama_cpp_rates(model, threads) for _ in range(2)]
        (p, g), (lp, lg) = [tuple(max(r[i] for r in runs) for i in range(2)) for runs in (ours, theirs)]
        print(f"| {threads} | {p:.1f} | {lp:.1f} | {p / lp:.2f} | {g:.1f} | {lg:.1f} | {g / lg:.2f} |")
    text = long_prompt(model)
    print()
    print("| threads | prompt tokens (rumus / llama.cpp) | rumus prefill tok/s | llama.cpp prefill tok/s | ratio |")
    print("|---|---|---|---|---|")
    for threads in (1, 2):
        ours = [rumus_rates(binary, model, threads, ("--raw", "--prompt", text), 1) for _ in range(2)]
        theirs = [llama_cpp_prefill(model, threads, text) for _ in range(2)]
        p, lp = max(r[0] for r in ours), max(r[0] for r in theirs)
        print(f"| {threads} | {ours[0][2]} / {theirs[0][1]} | {p:.1f} | {lp:.1f} | {p / lp:.2f} |")


if __name__ == "__main__":
    main()
