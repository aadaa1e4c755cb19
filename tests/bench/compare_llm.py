"""rumus against llama.cpp decoding the same GGUF model on the CPU, same threads, same run.

    cargo build --release --example chat
    python3 tests/bench/compare_llm.py target/release/examples/chat MODEL.gguf

Both read the ChatML prompt of `examples/chat.rs`'s default question (a story about a
lighthouse) and then generate 128 tokens greedily, with 1 and with 2 threads (rumus:
`RAYON_NUM_THREADS`; llama.cpp through `llama-cpp-python`: `n_threads`, `n_threads_batch`).
Prints prompt and generation tokens per second and their ratio (rumus / llama.cpp: higher is
better). Each side runs twice per thread count and keeps its faster run.
"""

import re
import subprocess
import sys
import time

PROMPT = ("<|im_start|>user\nTell me a short story about a lighthouse.<|im_end|>\n"
          "<|im_start|>assistant\n")
NEW_TOKENS = 128


def rumus_rates(binary, model, threads):
    out = subprocess.run(
        [binary, "--model", model, "--max-tokens", str(NEW_TOKENS)],
        capture_output=True, text=True, check=True,
        env={"RAYON_NUM_THREADS": str(threads), "PATH": "/usr/bin:/bin"})
    found = re.search(r"prompt: ([0-9.]+) tokens/s; generation: ([0-9.]+) tokens/s", out.stderr)
    return float(found.group(1)), float(found.group(2))


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


def main():
    binary, model = sys.argv[1], sys.argv[2]
    import llama_cpp

    print(f"llama-cpp-python {llama_cpp.__version__}")
    print("| threads | rumus prompt tok/s | llama.cpp prompt tok/s | ratio | rumus generation tok/s | llama.cpp generation tok/s | ratio |")
    print("|---|---|---|---|---|---|---|")
    for threads in (1, 2):
        ours = [rumus_rates(binary, model, threads) for _ in range(2)]
        theirs = [llama_cpp_rates(model, threads) for _ in range(2)]
        (p, g), (lp, lg) = [tuple(max(r[i] for r in runs) for i in range(2)) for runs in (ours, theirs)]
        print(f"| {threads} | {p:.1f} | {lp:.1f} | {p / lp:.2f} | {g:.1f} | {lg:.1f} | {g / lg:.2f} |")


if __name__ == "__main__":
    main()
