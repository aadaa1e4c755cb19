//! The engine: one thread that owns the model and the key/value pool and runs every
//! request's sequence in one continuously changing batch.
//!
//! Each step runs the whole batch through [`Llama::forward_paged`]: a sequence that just
//! joined brings its prompt, the others their last token, so the weights are read once per
//! step for all of them. Between steps, finished sequences leave (their blocks go back to
//! the pool) and waiting requests join, first come first served, as long as the pool can
//! hold every running sequence at its longest (prompt plus `max_tokens`): a sequence never
//! runs out of cache halfway, and a full pool makes requests wait, not fail.
//!
//! The model runs here, not on tokio's threads: a step takes milliseconds of CPU (on the
//! rayon pool), which would stall the server's network work.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Instant;

use rumus::llm::{BatchEntry, KvPool, Llama, PagedCache, Sampling, Tokenizer};
use rumus::rng::Generator;
use tokio::sync::mpsc::UnboundedSender;

use crate::metrics::Metrics;
use crate::text::TextStream;

/// One generation request, checked by the HTTP layer.
pub struct Job {
    pub prompt: Vec<i64>,
    /// At least 1; the prompt plus this fits the context.
    pub max_tokens: usize,
    pub sampling: Sampling,
    pub seed: u64,
    pub stops: Vec<String>,
    /// Added to these tokens' logits before sampling.
    pub logit_bias: Vec<(usize, f32)>,
    /// Where the job's text goes; the job is dropped once the receiver is (a client gone).
    pub events: UnboundedSender<Event>,
    pub arrived: Instant,
}

/// What the engine tells a job's receiver.
#[derive(Debug)]
pub enum Event {
    /// More of the answer's text.
    Text(String),
    /// The end of the answer.
    Done(Finish),
    /// The step failed (an internal error; the text so far stands).
    Failed(String),
}

/// How and after how many tokens a sequence ended.
#[derive(Debug, Clone, Copy)]
pub struct Finish {
    pub reason: FinishReason,
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
}

/// Why a sequence ended, as OpenAI names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// The end-of-turn token or a stop string.
    Stop,
    /// `max_tokens` reached.
    Length,
}

impl FinishReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
        }
    }
}

/// What the engine runs: the model, its tokenizer and the pool of cache blocks, made on
/// the engine's thread (so the kernels' thread pool takes that thread in before any kernel
/// runs).
pub struct Served {
    pub model: Arc<Llama>,
    pub tokenizer: Arc<Tokenizer>,
    pub pool: KvPool,
    /// Tokens of prompt plus answer a request may have.
    pub context: usize,
}

/// The HTTP side's end of the engine.
pub struct EngineHandle {
    jobs: mpsc::Sender<Job>,
    thread: JoinHandle<()>,
}

impl EngineHandle {
    /// Waits for the engine to finish the jobs it has, after the last handle's sender is
    /// gone (the server stopped taking requests).
    pub fn shut_down(self) {
        drop(self.jobs);
        let _ = self.thread.join();
    }

    /// A sender of jobs (one per request handler).
    pub fn sender(&self) -> mpsc::Sender<Job> {
        self.jobs.clone()
    }
}

/// A running sequence.
struct Sequence {
    job: Job,
    cache: PagedCache,
    /// The prompt and the tokens drawn (what penalties look at).
    history: Vec<i64>,
    generated: usize,
    text: TextStream,
    rng: Generator,
    /// Blocks the pool keeps for it at its longest.
    committed: usize,
    last_token_at: Option<Instant>,
}

/// Starts the engine thread, which makes what it serves with `load` and then steps at most
/// `max_batch` sequences at a time. Returns once `load` has finished: the handle, the
/// tokenizer and the context length, or `load`'s error.
///
/// # Errors
/// What `load` returns, or no thread to run it on.
pub fn start(
    max_batch: usize,
    metrics: Arc<Metrics>,
    load: impl FnOnce() -> Result<Served, String> + Send + 'static,
) -> Result<(EngineHandle, Arc<Tokenizer>, usize, usize), String> {
    let (jobs, incoming) = mpsc::channel();
    let (ready, loaded) = mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("rumus-serve engine".into())
        .spawn(move || {
            // The model's kernels run a share of each parallel loop on this thread.
            rumus::backend::cpu::parallel::adopt_current_thread();
            let served = match load() {
                Ok(served) => served,
                Err(message) => {
                    let _ = ready.send(Err(message));
                    return;
                }
            };
            metrics
                .kv_blocks_total
                .store(served.pool.total_blocks(), Ordering::Relaxed);
            let vocab = served.model.config().vocab;
            let _ = ready.send(Ok((served.tokenizer.clone(), vocab, served.context)));
            Engine {
                model: served.model,
                tokenizer: served.tokenizer,
                pool: served.pool,
                max_batch: max_batch.max(1),
                metrics,
                waiting: VecDeque::new(),
                running: Vec::new(),
                committed: 0,
            }
            .run(incoming)
        })
        .map_err(|e| format!("cannot start the engine thread: {e}"))?;
    let (tokenizer, vocab, context) = loaded
        .recv()
        .map_err(|_| "the engine thread ended while loading".to_string())??;
    Ok((EngineHandle { jobs, thread }, tokenizer, vocab, context))
}

struct Engine {
    model: Arc<Llama>,
    tokenizer: Arc<Tokenizer>,
    pool: KvPool,
    max_batch: usize,
    metrics: Arc<Metrics>,
    waiting: VecDeque<Job>,
    running: Vec<Sequence>,
    /// Blocks promised to the running sequences (at their longest).
    committed: usize,
}

impl Engine {
    fn run(mut self, incoming: mpsc::Receiver<Job>) {
        loop {
            if self.running.is_empty() && self.waiting.is_empty() {
                // Idle: sleep until a job comes, or stop once no sender is left.
                match incoming.recv() {
                    Ok(job) => self.waiting.push_back(job),
                    Err(_) => return,
                }
            }
            self.waiting.extend(incoming.try_iter());
            // Requests whose client left while they waited.
            self.waiting.retain(|job| !job.events.is_closed());
            self.admit();
            self.publish();
            if !self.running.is_empty() {
                self.step();
            }
            self.publish();
        }
    }

    /// Moves waiting jobs into the batch, in order, while the batch and the pool have room
    /// for them at their longest.
    fn admit(&mut self) {
        while self.running.len() < self.max_batch {
            let Some(job) = self.waiting.front() else {
                return;
            };
            let longest = job.prompt.len() + job.max_tokens;
            let blocks = longest.div_ceil(self.pool.block_tokens());
            if self.committed + blocks > self.pool.total_blocks() {
                return;
            }
            let job = self.waiting.pop_front().expect("looked at above");
            self.committed += blocks;
            self.running.push(Sequence {
                history: job.prompt.clone(),
                text: TextStream::new(job.stops.clone()),
                rng: Generator::new(job.seed),
                cache: PagedCache::new(),
                generated: 0,
                committed: blocks,
                last_token_at: None,
                job,
            });
        }
    }

    /// One step of the whole batch, then each sequence's next token.
    fn step(&mut self) {
        let last_tokens: Vec<[i64; 1]> = self
            .running
            .iter()
            .map(|s| [*s.history.last().expect("a prompt is never empty")])
            .collect();
        let mut batch: Vec<BatchEntry<'_>> = self
            .running
            .iter_mut()
            .zip(&last_tokens)
            .map(|(s, last)| {
                let tokens: &[i64] = if s.cache.is_empty() {
                    &s.job.prompt
                } else {
                    last
                };
                BatchEntry {
                    cache: &mut s.cache,
                    tokens,
                }
            })
            .collect();
        let prompt_tokens: usize = batch
            .iter()
            .filter(|e| e.cache.is_empty())
            .map(|e| e.tokens.len())
            .sum();
        let logits = self
            .model
            .forward_paged(&mut self.pool, &mut batch)
            .and_then(|l| l.to_vec::<f32>());
        drop(batch);
        self.metrics
            .prompt_tokens
            .fetch_add(prompt_tokens as u64, Ordering::Relaxed);
        let logits = match logits {
            Ok(logits) => logits,
            Err(error) => {
                for s in std::mem::take(&mut self.running) {
                    let _ = s.job.events.send(Event::Failed(error.to_string()));
                    self.retire(s);
                }
                return;
            }
        };
        let vocab = self.model.config().vocab;
        let eos = self.tokenizer.eos();
        let mut still = Vec::with_capacity(self.running.len());
        for (mut s, row) in std::mem::take(&mut self.running)
            .into_iter()
            .zip(logits.chunks_exact(vocab))
        {
            let next = if s.job.logit_bias.is_empty() {
                s.job.sampling.draw_after(row, &s.history, &mut s.rng)
            } else {
                let mut biased = row.to_vec();
                for &(token, bias) in &s.job.logit_bias {
                    biased[token] += bias;
                }
                s.job.sampling.draw_after(&biased, &s.history, &mut s.rng)
            };
            s.history.push(next);
            s.generated += 1;
            self.metrics
                .generated_tokens
                .fetch_add(1, Ordering::Relaxed);
            let now = Instant::now();
            match s.last_token_at {
                None => self
                    .metrics
                    .first_token_seconds
                    .observe(now - s.job.arrived),
                Some(at) => self.metrics.inter_token_seconds.observe(now - at),
            }
            s.last_token_at = Some(now);
            let outcome = self.next_text(&mut s, next, eos);
            let delivered = match outcome {
                Ok((text, finished)) => {
                    let sent = text.is_empty() || s.job.events.send(Event::Text(text)).is_ok();
                    match finished {
                        Some(reason) => {
                            let _ = s.job.events.send(Event::Done(Finish {
                                reason,
                                prompt_tokens: s.job.prompt.len(),
                                completion_tokens: s.generated,
                            }));
                            false
                        }
                        None => sent && !s.job.events.is_closed(),
                    }
                }
                Err(message) => {
                    let _ = s.job.events.send(Event::Failed(message));
                    false
                }
            };
            if delivered {
                still.push(s);
            } else {
                self.metrics.request_seconds.observe(now - s.job.arrived);
                self.retire(s);
            }
        }
        self.running = still;
    }

    /// The text token `next` makes final, and whether the sequence ends with it.
    fn next_text(
        &self,
        s: &mut Sequence,
        next: i64,
        eos: Option<i64>,
    ) -> Result<(String, Option<FinishReason>), String> {
        if Some(next) == eos {
            return Ok((s.text.finish(), Some(FinishReason::Stop)));
        }
        let tokenizer = &self.tokenizer;
        let piece = s
            .text
            .push(next, |ids| tokenizer.decode(ids, true))
            .map_err(|e| e.to_string())?;
        if piece.stopped {
            return Ok((piece.text, Some(FinishReason::Stop)));
        }
        if s.generated >= s.job.max_tokens {
            return Ok((piece.text + &s.text.finish(), Some(FinishReason::Length)));
        }
        Ok((piece.text, None))
    }

    /// Gives a sequence's blocks back.
    fn retire(&mut self, mut s: Sequence) {
        self.pool.release(&mut s.cache);
        self.committed -= s.committed;
    }

    fn publish(&self) {
        let m = &self.metrics;
        m.waiting.store(self.waiting.len(), Ordering::Relaxed);
        m.running.store(self.running.len(), Ordering::Relaxed);
        m.kv_blocks_used.store(
            self.pool.total_blocks() - self.pool.free_blocks(),
            Ordering::Relaxed,
        );
    }
}
