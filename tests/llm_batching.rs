//! Many sequences at once over one pool of cache blocks (`KvPool`, `Llama::forward_paged`):
//! a batch gives each sequence the logits it gets alone with its own `KvCache`, sequences
//! join and leave between steps, and the pool's blocks all come back. On the small random
//! `transformers` Llama of tests/hf_llama.rs, and greedy continuations of the real SmolLM2.

mod common;

use std::path::PathBuf;

use rumus::io::GgufFile;
use rumus::llm::{BatchEntry, KvPool, Llama, PagedCache, WeightFormat};

fn tiny_llama() -> Llama {
    Llama::from_hf(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny_llama"))
        .unwrap()
}

/// The last row of `model.forward(tokens, cache)`, as f64.
fn last_logits(model: &Llama, tokens: &[i64], cache: &mut rumus::llm::KvCache) -> Vec<f64> {
    let logits = model.forward(tokens, cache).unwrap();
    let rows = logits.dims()[0];
    logits.narrow(0, rows - 1, 1).unwrap().to_f64_vec()
}

#[test]
fn a_batch_of_sequences_gets_the_logits_each_gets_alone() {
    let model = tiny_llama();
    let vocab = model.config().vocab;
    // Blocks of 4 tokens: the prompts end inside blocks and cross their ends as they grow.
    let mut pool = KvPool::new(model.config(), 64, 4).unwrap();
    let prompts: [&[i64]; 3] = [&[1, 17, 200, 3, 5, 6, 7], &[42], &[9, 8, 7, 6, 5]];
    let mut paged: Vec<PagedCache> = prompts.iter().map(|_| PagedCache::new()).collect();
    let mut alone: Vec<_> = prompts.iter().map(|_| model.new_cache()).collect();
    // Step 0: the three prompts together; then one token each, the third sequence leaving
    // after step 2 and a fourth joining with its prompt at step 3.
    let mut inputs: Vec<Vec<i64>> = prompts.iter().map(|p| p.to_vec()).collect();
    for step in 0..6 {
        if step == 3 {
            let mut gone = paged.remove(2);
            pool.release(&mut gone);
            alone.remove(2);
            inputs.remove(2);
            paged.push(PagedCache::new());
            alone.push(model.new_cache());
            inputs.push(vec![3, 1, 4, 1, 5, 9, 2, 6, 5]);
        }
        let mut batch: Vec<BatchEntry<'_>> = paged
            .iter_mut()
            .zip(&inputs)
            .map(|(cache, tokens)| BatchEntry { cache, tokens })
            .collect();
        let logits = model.forward_paged(&mut pool, &mut batch).unwrap();
        assert_eq!(logits.dims(), [inputs.len(), vocab]);
        let logits = logits.to_f64_vec();
        for (i, tokens) in inputs.iter().enumerate() {
            let want = last_logits(&model, tokens, &mut alone[i]);
            let got = &logits[i * vocab..(i + 1) * vocab];
            let worst = common::max_abs_diff(got, &want);
            assert!(worst < 1e-5, "step {step}, sequence {i}: {worst}");
            assert_eq!(paged[i].len(), alone[i].len());
        }
        // Each sequence goes on with a token of its own.
        inputs = (0..inputs.len())
            .map(|i| vec![((step * 31 + i * 7) % vocab) as i64])
            .collect();
    }
    let held: usize = paged.iter().map(PagedCache::blocks).sum();
    assert_eq!(pool.free_blocks() + held, pool.total_blocks());
    for cache in &mut paged {
        pool.release(cache);
        assert!(cache.is_empty());
    }
    assert_eq!(pool.free_blocks(), pool.total_blocks());
}

#[test]
fn a_full_pool_and_foreign_caches_are_errors_that_take_nothing() {
    let model = tiny_llama();
    let mut pool = KvPool::new(model.config(), 8, 4).unwrap();
    let (mut a, mut b) = (PagedCache::new(), PagedCache::new());
    let tokens = [1i64, 2, 3, 4, 5, 6];
    let mut batch = [
        BatchEntry {
            cache: &mut a,
            tokens: &tokens,
        },
        BatchEntry {
            cache: &mut b,
            tokens: &tokens,
        },
    ];
    // 2 + 2 blocks wanted, 2 free: refused, and neither sequence took any.
    let full = model
        .forward_paged(&mut pool, &mut batch)
        .unwrap_err()
        .to_string();
    assert!(
        full.contains("2 free blocks") && full.contains("needs 4"),
        "{full}"
    );
    assert_eq!((a.blocks(), b.blocks(), pool.free_blocks()), (0, 0, 2));
    // One fits.
    model
        .forward_paged(
            &mut pool,
            &mut [BatchEntry {
                cache: &mut a,
                tokens: &tokens,
            }],
        )
        .unwrap();
    assert_eq!((a.len(), pool.free_blocks()), (6, 0));
    // Its cache in another pool: refused; released there: untouched.
    let mut other = KvPool::new(model.config(), 8, 4).unwrap();
    let foreign = model
        .forward_paged(
            &mut other,
            &mut [BatchEntry {
                cache: &mut a,
                tokens: &[1],
            }],
        )
        .unwrap_err()
        .to_string();
    assert!(foreign.contains("another key/value pool"), "{foreign}");
    other.release(&mut a);
    assert_eq!((a.len(), other.free_blocks()), (6, 2));
    // Bad tokens and empty steps.
    let bad = model
        .forward_paged(
            &mut pool,
            &mut [BatchEntry {
                cache: &mut b,
                tokens: &[256],
            }],
        )
        .unwrap_err()
        .to_string();
    assert!(bad.contains("outside the vocabulary"), "{bad}");
    assert!(model.forward_paged(&mut pool, &mut []).is_err());
    pool.release(&mut a);
    assert_eq!(pool.free_blocks(), 2);
    assert!(KvPool::new(model.config(), 8, 0).is_err());
}

/// KL(p || q) of the softmax distributions of logits `p` and `q`.
fn kl_divergence(p: &[f64], q: &[f64]) -> f64 {
    let log_softmax = |x: &[f64]| {
        let top = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let log_total = x.iter().map(|v| (v - top).exp()).sum::<f64>().ln() + top;
        x.iter().map(|v| v - log_total).collect::<Vec<f64>>()
    };
    let (lp, lq) = (log_softmax(p), log_softmax(q));
    lp.iter().zip(&lq).map(|(a, b)| a.exp() * (a - b)).sum()
}

#[test]
fn smollm2_continues_prompts_in_a_batch_as_it_does_one_at_a_time() {
    let Some(path) = common::smollm2::smollm2("batched SmolLM2 generation") else {
        return;
    };
    let file = GgufFile::open(&path).unwrap();
    let model = Llama::load(&file, WeightFormat::F32).unwrap();
    let prompts: [&[i64]; 3] = [
        &[1, 9690, 198, 2683, 314, 260, 3575, 282, 4649, 47, 2, 198],
        &[504, 3575, 282, 8847, 314],
        &[28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41],
    ];
    let new_tokens = 12;
    // Each prompt's greedy continuation alone, which the batch is then fed token by token.
    let alone: Vec<Vec<i64>> = prompts
        .iter()
        .map(|p| model.generate_greedy(p, new_tokens, None).unwrap())
        .collect();
    let mut caches: Vec<_> = prompts.iter().map(|_| model.new_cache()).collect();
    let mut pool = KvPool::new(model.config(), 256, 16).unwrap();
    let mut paged: Vec<PagedCache> = prompts.iter().map(|_| PagedCache::new()).collect();
    let mut inputs: Vec<Vec<i64>> = prompts.iter().map(|p| p.to_vec()).collect();
    let vocab = model.config().vocab;
    let (mut worst, mut agree, mut steps) = (0.0f64, 0, 0);
    // The tokens each step feeds, one per sequence.
    let fed: Vec<Vec<i64>> = (0..new_tokens)
        .map(|step| alone.iter().map(|a| a[step]).collect())
        .collect();
    for next in &fed {
        let mut batch: Vec<BatchEntry<'_>> = paged
            .iter_mut()
            .zip(&inputs)
            .map(|(cache, tokens)| BatchEntry { cache, tokens })
            .collect();
        let logits = model
            .forward_paged(&mut pool, &mut batch)
            .unwrap()
            .to_f64_vec();
        for (i, row) in logits.chunks_exact(vocab).enumerate() {
            let want = last_logits(&model, &inputs[i], &mut caches[i]);
            worst = worst.max(kl_divergence(&want, row));
            let best = (0..vocab)
                .max_by(|&a, &b| row[a].total_cmp(&row[b]))
                .unwrap();
            agree += usize::from(best as i64 == next[i]);
            steps += 1;
            inputs[i] = vec![next[i]];
        }
    }
    // Blocks round each activation row to int8 on its own, so a batch multiplies the same
    // integers; attention sums in another order, which moves a rounding now and then (as
    // chunked decoding does, tests/gguf.rs): the distributions stay within a small KL.
    // In f32 only the order of attention's sums differs. (In the file's blocks, each
    // activation row is rounded to int8 on its own, batched or not, but a last-bit change
    // in attention moves a rounding now and then, as chunked decoding does: the KL then
    // reaches about 0.015, and a near tie may flip.)
    assert!(worst < 1e-6, "KL divergence up to {worst}");
    assert_eq!(agree, steps, "greedy tokens that agree");
}
