//! Keys and values of many sequences in one bounded pool of fixed-size blocks, and the model
//! step that runs a batch of sequences over it: the memory and the step a server batching
//! requests continuously needs (requests join and leave the batch between steps).
//!
//! A [`KvPool`] holds every block of every layer, allocated once; a [`PagedCache`] is one
//! sequence's table of the blocks its tokens lie in. A sequence takes a block when it needs
//! one and gives all of them back when it ends, so the pool's memory is bounded whatever the
//! sequences' lengths, and none is reserved for tokens a sequence never reaches.

use std::sync::atomic::{AtomicU64, Ordering};

use super::config::LlamaConfig;
use super::invalid;
use super::llama::{Llama, Rotation};
use crate::backend::cpu::paged_attention::{
    PagedLayout, PagedQuery, paged_attention, write_tokens,
};
use crate::error::Result;
use crate::tensor::DynTensor;

/// Tokens per block of [`KvPool::new`]'s pools unless told otherwise: small enough that a
/// sequence wastes little of its last block, large enough that a table stays short.
pub const DEFAULT_BLOCK_TOKENS: usize = 16;

/// The keys and values of a [`Llama`]'s layers for many sequences, in blocks of
/// `block_tokens` tokens taken from a free list. Made for one model's layout; a
/// [`PagedCache`] from another pool is refused.
pub struct KvPool {
    id: u64,
    layout: PagedLayout,
    layers: Vec<LayerBlocks>,
    free: Vec<usize>,
    blocks: usize,
}

/// One layer's blocks: `[blocks, block_tokens, kv_heads, head_width]` each.
struct LayerBlocks {
    keys: Vec<f32>,
    values: Vec<f32>,
}

/// One sequence's place in a [`KvPool`]: the blocks holding its tokens' keys and values, in
/// order, and how many tokens it holds. Give its blocks back with [`KvPool::release`] when
/// the sequence ends (dropping it without that leaves them taken).
#[derive(Debug, Default)]
pub struct PagedCache {
    /// The pool its blocks come from (0 before it has any).
    pool: u64,
    table: Vec<usize>,
    len: usize,
}

impl PagedCache {
    /// A sequence with no tokens and no blocks yet.
    pub fn new() -> PagedCache {
        PagedCache::default()
    }

    /// Tokens whose keys and values it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Blocks it has taken.
    pub fn blocks(&self) -> usize {
        self.table.len()
    }
}

/// One sequence of a [`Llama::forward_paged`] step: its cache and the tokens that follow
/// the ones it holds (a whole prompt, or the one token drawn last).
pub struct BatchEntry<'a> {
    /// The sequence's keys and values so far; the step adds its tokens'.
    pub cache: &'a mut PagedCache,
    /// The tokens after those the cache holds (at least one).
    pub tokens: &'a [i64],
}

impl KvPool {
    /// A pool for `config`'s model with room for `tokens` tokens (rounded up to whole
    /// blocks) in blocks of `block_tokens`. Its memory is allocated zeroed, which the system
    /// commits page by page as blocks are first written.
    ///
    /// # Errors
    /// `block_tokens` or `tokens` is 0, or the pool's size overflows.
    pub fn new(config: &LlamaConfig, tokens: usize, block_tokens: usize) -> Result<KvPool> {
        if block_tokens == 0 || tokens == 0 {
            return Err(invalid(format!(
                "a key/value pool needs tokens and block_tokens above 0 (got {tokens} and \
                 {block_tokens})"
            )));
        }
        let layout = PagedLayout {
            block_tokens,
            kv_heads: config.kv_heads,
            head_width: config.head_width(),
            group: config.heads / config.kv_heads,
        };
        let blocks = tokens.div_ceil(block_tokens);
        let floats = blocks
            .checked_mul(block_tokens)
            .and_then(|t| t.checked_mul(layout.token_width()))
            .filter(|&f| f.checked_mul(8 * config.blocks).is_some())
            .ok_or_else(|| invalid(format!("a pool of {tokens} tokens overflows memory")))?;
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        Ok(KvPool {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            layout,
            layers: (0..config.blocks)
                .map(|_| LayerBlocks {
                    keys: vec![0.0; floats],
                    values: vec![0.0; floats],
                })
                .collect(),
            // Popped from the end: blocks are handed out from 0 up.
            free: (0..blocks).rev().collect(),
            blocks,
        })
    }

    /// Tokens per block.
    pub fn block_tokens(&self) -> usize {
        self.layout.block_tokens
    }

    /// Blocks in all.
    pub fn total_blocks(&self) -> usize {
        self.blocks
    }

    /// Blocks no sequence holds.
    pub fn free_blocks(&self) -> usize {
        self.free.len()
    }

    /// Bytes its buffers take (allocated, not only written).
    pub fn bytes(&self) -> usize {
        self.layers.len() * 2 * self.layers.first().map_or(0, |l| l.keys.len()) * 4
    }

    /// Blocks `cache` must take before it can hold `more` more tokens.
    pub fn blocks_needed(&self, cache: &PagedCache, more: usize) -> usize {
        (cache.len + more)
            .div_ceil(self.layout.block_tokens)
            .saturating_sub(cache.table.len())
    }

    /// Gives `cache`'s blocks back to the pool; it is empty after (and may start again).
    /// A cache of another pool is left as it is.
    pub fn release(&mut self, cache: &mut PagedCache) {
        if cache.pool == self.id {
            self.free.extend(cache.table.drain(..).rev());
            *cache = PagedCache::new();
        }
    }

    /// Takes blocks so that each entry's cache can hold its new tokens: all or none.
    fn reserve(&mut self, batch: &mut [BatchEntry<'_>]) -> Result<()> {
        for entry in batch.iter() {
            if entry.cache.pool != 0 && entry.cache.pool != self.id {
                return Err(invalid(
                    "a sequence's cache belongs to another key/value pool: run each \
                     sequence with the pool its blocks came from"
                        .into(),
                ));
            }
        }
        let needed: usize = batch
            .iter()
            .map(|e| self.blocks_needed(e.cache, e.tokens.len()))
            .sum();
        if needed > self.free.len() {
            return Err(invalid(format!(
                "the key/value pool has {} free blocks of {} tokens and this step needs \
                 {needed}: release finished sequences or make the pool larger",
                self.free.len(),
                self.layout.block_tokens
            )));
        }
        for entry in batch.iter_mut() {
            let more = self.blocks_needed(entry.cache, entry.tokens.len());
            let start = self.free.len() - more;
            entry.cache.table.extend(self.free.drain(start..).rev());
            entry.cache.pool = self.id;
        }
        Ok(())
    }

    fn check_model(&self, config: &LlamaConfig) -> Result<()> {
        let l = &self.layout;
        let same = self.layers.len() == config.blocks
            && l.kv_heads == config.kv_heads
            && l.head_width == config.head_width()
            && l.group * l.kv_heads == config.heads;
        if !same {
            return Err(invalid(
                "the key/value pool was made for a model of another shape: make it with \
                 KvPool::new(model.config(), ..)"
                    .into(),
            ));
        }
        Ok(())
    }
}

impl Llama {
    /// One step of a batch of sequences over `pool`: each entry's `tokens` follow the
    /// tokens its cache holds, attend to those and to the ones before them in `tokens`, and
    /// add their keys and values to the cache (taking blocks from the pool). The products of
    /// every sequence's tokens run together, so the weights are read once per step for the
    /// whole batch. Returns the next-token logits after each entry's last token, `[entries,
    /// vocab]`, in the entries' order.
    ///
    /// The same logits as [`Llama::forward`] with a [`KvCache`](super::KvCache) per
    /// sequence, up to the order of float sums.
    ///
    /// # Errors
    /// No entries, an entry without tokens, a token outside the vocabulary, a pool of
    /// another model or too few free blocks (nothing is taken then), or a cache from another
    /// pool.
    pub fn forward_paged(
        &self,
        pool: &mut KvPool,
        batch: &mut [BatchEntry<'_>],
    ) -> Result<DynTensor> {
        if batch.is_empty() {
            return Err(invalid("a paged step needs at least one sequence".into()));
        }
        for entry in batch.iter() {
            self.check_tokens(entry.tokens)?;
        }
        pool.check_model(self.config())?;
        pool.reserve(batch)?;
        let tokens: Vec<i64> = batch
            .iter()
            .flat_map(|e| e.tokens.iter().copied())
            .collect();
        let positions: Vec<usize> = batch
            .iter()
            .flat_map(|e| e.cache.len..e.cache.len + e.tokens.len())
            .collect();
        let _autocast = self.autocast()?;
        let rotation = Rotation::at(self.config(), &positions, self.device())?;
        let layout = pool.layout;
        let scale = 1.0 / (layout.head_width as f32).sqrt();
        let (rows, width) = (tokens.len(), self.config().width);
        let mut x = self.embed(&tokens)?;
        for (block, layer) in self.blocks().iter().zip(&mut pool.layers) {
            let [q, k, v] = self.projections(block, &x, &rotation)?;
            let (k, v) = (k.to_vec::<f32>()?, v.to_vec::<f32>()?);
            let token_width = layout.token_width();
            let mut first = 0;
            for entry in batch.iter() {
                let span = first * token_width..(first + entry.tokens.len()) * token_width;
                let (table, past) = (&entry.cache.table, entry.cache.len);
                write_tokens(layout, &mut layer.keys, table, past, &k[span.clone()]);
                write_tokens(layout, &mut layer.values, table, past, &v[span]);
                first += entry.tokens.len();
            }
            let queries: Vec<PagedQuery<'_>> = batch
                .iter()
                .flat_map(|e| {
                    (1..=e.tokens.len()).map(|i| PagedQuery {
                        table: &e.cache.table,
                        visible: e.cache.len + i,
                    })
                })
                .collect();
            let mut attended = vec![0.0; rows * width];
            let q = q.to_vec::<f32>()?;
            paged_attention(
                layout,
                &layer.keys,
                &layer.values,
                &q,
                &queries,
                scale,
                &mut attended,
            );
            // (the pool is host memory: on a GPU model the step's queries, keys and values
            // come to the host and the attended rows go back)
            let attended = DynTensor::from_vec(attended, &[rows, width])?.to(self.device())?;
            x = self.attended(block, &x, &attended)?;
        }
        let mut last = Vec::with_capacity(batch.len());
        let mut end = 0;
        for entry in batch.iter_mut() {
            end += entry.tokens.len();
            last.push(end as i64 - 1);
            entry.cache.len += entry.tokens.len();
        }
        let last = DynTensor::from_vec(last, &[batch.len()])?.to(self.device())?;
        self.head(&x.index_select(0, &last)?)
    }
}
