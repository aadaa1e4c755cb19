//! Attention of queries over keys and values held in fixed-size blocks of a shared pool
//! (`llm::KvPool`): each sequence's tokens lie in the blocks its table lists, in order, so
//! sequences of any length share one bounded buffer without copying their keys into a
//! contiguous tensor first (vLLM's paged attention, on the CPU).
//!
//! A pool buffer is `[blocks, block_tokens, kv_heads, head_width]`; token `t` of a sequence
//! is row `t % block_tokens` of block `table[t / block_tokens]`. Query heads are grouped:
//! key/value head `j` serves query heads `j * group .. (j + 1) * group`.

use rayon::prelude::*;

use super::parallel::worth_splitting;
use super::reduce::dot;

/// How a pool's blocks and the model's heads are laid out.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PagedLayout {
    pub block_tokens: usize,
    pub kv_heads: usize,
    pub head_width: usize,
    /// Query heads per key/value head.
    pub group: usize,
}

impl PagedLayout {
    /// Floats one token's keys (or values) take: all its key/value heads.
    pub fn token_width(&self) -> usize {
        self.kv_heads * self.head_width
    }

    /// Where head `head` of token `token` of a sequence with block table `table` starts.
    fn at(&self, table: &[usize], token: usize, head: usize) -> usize {
        let block = table[token / self.block_tokens];
        ((block * self.block_tokens + token % self.block_tokens) * self.kv_heads + head)
            * self.head_width
    }
}

/// One query row: the block table of its sequence, and how many of the sequence's tokens it
/// sees (its own position plus one: the causal rule).
pub(crate) struct PagedQuery<'a> {
    pub table: &'a [usize],
    pub visible: usize,
}

/// `out[r]` (`[heads * head_width]`) = softmax over the `visible` tokens of
/// `scale * q_h . k_t`, times their values, for each query row `r` of `queries` (`[rows,
/// heads * head_width]`) and each head `h`. Sums in f32, after subtracting each row's
/// largest score.
pub(crate) fn paged_attention(
    layout: PagedLayout,
    keys: &[f32],
    values: &[f32],
    queries: &[f32],
    rows: &[PagedQuery<'_>],
    scale: f32,
    out: &mut [f32],
) {
    let hw = layout.head_width;
    let heads = layout.kv_heads * layout.group;
    debug_assert_eq!(queries.len(), rows.len() * heads * hw);
    debug_assert_eq!(out.len(), queries.len());
    let one_head = |(index, out): (usize, &mut [f32])| {
        let (row, head) = (index / heads, index % heads);
        let query = &rows[row];
        let q = &queries[index * hw..][..hw];
        let kv_head = head / layout.group;
        let mut scores: Vec<f32> = (0..query.visible)
            .map(|t| scale * dot(q, &keys[layout.at(query.table, t, kv_head)..][..hw]))
            .collect();
        let top = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut total = 0.0;
        for s in &mut scores {
            *s = (*s - top).exp();
            total += *s;
        }
        out.fill(0.0);
        for (t, &weight) in scores.iter().enumerate() {
            let v = &values[layout.at(query.table, t, kv_head)..][..hw];
            // Indexed rather than zipped (a `Zip` per key is a call without LTO).
            for (i, o) in out.iter_mut().enumerate() {
                *o += weight * v[i];
            }
        }
        for o in out.iter_mut() {
            *o /= total;
        }
    };
    let visits: usize = rows.iter().map(|r| r.visible).sum::<usize>() * heads * hw;
    if worth_splitting(visits) {
        out.par_chunks_mut(hw).enumerate().for_each(one_head);
    } else {
        out.chunks_mut(hw).enumerate().for_each(one_head);
    }
}

/// Copies `rows` tokens' keys or values (`[rows, token_width]`) into the pool buffer
/// `buffer` at tokens `first..first + rows` of the sequence with block table `table`.
pub(crate) fn write_tokens(
    layout: PagedLayout,
    buffer: &mut [f32],
    table: &[usize],
    first: usize,
    tokens: &[f32],
) {
    let width = layout.token_width();
    for (i, token) in tokens.chunks_exact(width).enumerate() {
        let at = layout.at(table, first + i, 0);
        buffer[at..at + width].copy_from_slice(token);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attention over keys and values stored contiguously, by the textbook formula in f64.
    fn reference(q: &[f32], k: &[Vec<f32>], v: &[Vec<f32>], scale: f64) -> Vec<f64> {
        let scores: Vec<f64> = k
            .iter()
            .map(|k| scale * q.iter().zip(k).map(|(a, b)| f64::from(a * b)).sum::<f64>())
            .collect();
        let top = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let weights: Vec<f64> = scores.iter().map(|s| (s - top).exp()).collect();
        let total: f64 = weights.iter().sum();
        (0..q.len())
            .map(|d| {
                weights
                    .iter()
                    .zip(v)
                    .map(|(w, v)| w * f64::from(v[d]))
                    .sum::<f64>()
                    / total
            })
            .collect()
    }

    #[test]
    fn attention_through_scattered_blocks_equals_contiguous_attention() {
        let layout = PagedLayout {
            block_tokens: 4,
            kv_heads: 2,
            head_width: 12,
            group: 3,
        };
        let blocks = 6;
        let mut state = 7u64;
        let mut next = move || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        };
        let size = blocks * layout.block_tokens * layout.token_width();
        let (mut keys, mut values) = (vec![0.0; size], vec![0.0; size]);
        // A sequence of 10 tokens in blocks 5, 1, 3 (out of order, the last one part full).
        let table = [5, 1, 3];
        let tokens = 10;
        let k: Vec<f32> = (0..tokens * layout.token_width()).map(|_| next()).collect();
        let v: Vec<f32> = (0..tokens * layout.token_width()).map(|_| next()).collect();
        write_tokens(layout, &mut keys, &table, 0, &k[..3 * layout.token_width()]);
        write_tokens(layout, &mut keys, &table, 3, &k[3 * layout.token_width()..]);
        write_tokens(layout, &mut values, &table, 0, &v);
        // Two query rows: positions 9 (sees all 10) and 4 (sees 5).
        let queries: Vec<f32> = (0..2 * layout.group * layout.token_width())
            .map(|_| next())
            .collect();
        let rows = [
            PagedQuery {
                table: &table,
                visible: 10,
            },
            PagedQuery {
                table: &table,
                visible: 5,
            },
        ];
        let mut out = vec![0.0; queries.len()];
        let scale = 0.3;
        paged_attention(layout, &keys, &values, &queries, &rows, scale, &mut out);
        let hw = layout.head_width;
        for (r, row) in rows.iter().enumerate() {
            for head in 0..layout.kv_heads * layout.group {
                let kv = head / layout.group;
                let head_of =
                    |x: &[f32], t: usize| x[(t * layout.kv_heads + kv) * hw..][..hw].to_vec();
                let ks: Vec<Vec<f32>> = (0..row.visible).map(|t| head_of(&k, t)).collect();
                let vs: Vec<Vec<f32>> = (0..row.visible).map(|t| head_of(&v, t)).collect();
                let at = (r * layout.kv_heads * layout.group + head) * hw;
                let expected = reference(&queries[at..at + hw], &ks, &vs, f64::from(scale));
                for (got, want) in out[at..at + hw].iter().zip(expected) {
                    assert!((f64::from(*got) - want).abs() < 1e-5, "{got} vs {want}");
                }
            }
        }
    }
}
