//! An OpenAI-compatible HTTP server for a language model run by rumus: `POST
//! /v1/completions` and `POST /v1/chat/completions` (whole answers, or server-sent events
//! with `"stream": true`), `GET /v1/models`, `GET /health` and Prometheus's `GET /metrics`.
//!
//! Requests join one running batch between the model's steps and leave it when they end
//! (continuous batching), their keys and values in one bounded pool of cache blocks
//! ([`rumus::llm::KvPool`]); a full pool makes new requests wait. The binary
//! (`cargo run --release -p rumus-serve -- --model FILE.gguf`) is [`options`] plus
//! [`serve`].

pub mod api;
pub mod engine;
pub mod metrics;
pub mod openai;
pub mod options;
pub mod text;

use std::sync::Arc;

use rumus::io::GgufFile;
use rumus::llm::{DEFAULT_BLOCK_TOKENS, KvPool, Llama, Tokenizer};
use tokio::net::TcpListener;

use crate::api::{Limits, Shared};
use crate::engine::Served;
use crate::metrics::Metrics;
use crate::options::Options;

/// Loads the model `options` names, starts the engine, and serves on `listener` until
/// `shutdown` completes; then stops taking requests, finishes the ones in flight, and
/// returns.
///
/// # Errors
/// A model that cannot be loaded, limits that do not fit it, or a failing listener.
pub async fn serve(
    options: Options,
    listener: TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    let metrics = Arc::new(Metrics::default());
    let load = {
        let options = options.clone();
        move || load(&options)
    };
    let (engine, tokenizer, vocab, context) =
        engine::start(options.max_batch, metrics.clone(), load)?;
    let shared = Shared::new(
        engine.sender(),
        tokenizer,
        vocab,
        options.model_id(),
        Limits {
            context,
            max_tokens: options.max_tokens.min(context),
            max_concurrent: options.max_concurrent,
            max_body_bytes: options.max_body_bytes,
        },
        metrics,
    );
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    println!("rumus-serve: listening on http://{address}");
    let served = axum::serve(listener, api::router(shared))
        .with_graceful_shutdown(shutdown)
        .await;
    // The router (and its senders) are gone: the engine ends after its last sequence.
    engine.shut_down();
    served.map_err(|e| e.to_string())
}

/// The model, tokenizer and cache pool `options` ask for.
fn load(options: &Options) -> Result<Served, String> {
    let text = |e: rumus::Error| e.to_string();
    let file = GgufFile::open(&options.model).map_err(text)?;
    let model = Llama::load(&file, options.weights).map_err(text)?;
    let tokenizer = Tokenizer::from_gguf(&file).map_err(text)?;
    let trained = file
        .metadata("llama.context_length")
        .and_then(|v| v.as_u64())
        .map(|c| usize::try_from(c).unwrap_or(usize::MAX));
    let context = options.context.or(trained).unwrap_or(2048);
    let kv_tokens = options.kv_tokens.unwrap_or(context.max(16 * 1024));
    if kv_tokens < context {
        return Err(format!(
            "--kv-tokens {kv_tokens} is below the context of {context} tokens: a request at the \
             context's length could never run (raise --kv-tokens or lower --context)"
        ));
    }
    let pool = KvPool::new(model.config(), kv_tokens, DEFAULT_BLOCK_TOKENS).map_err(text)?;
    Ok(Served {
        model: Arc::new(model),
        tokenizer: Arc::new(tokenizer),
        pool,
        context,
    })
}
