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
use rumus::llm::{Llama, Tokenizer};
use tokio::net::TcpListener;

use crate::api::{Limits, Shared};
use crate::engine::EngineOptions;
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
    let file = GgufFile::open(&options.model).map_err(|e| e.to_string())?;
    let model = Arc::new(Llama::load(&file, options.weights).map_err(|e| e.to_string())?);
    let tokenizer = Arc::new(Tokenizer::from_gguf(&file).map_err(|e| e.to_string())?);
    let trained = file
        .metadata("llama.context_length")
        .and_then(|v| v.as_u64())
        .map(|c| usize::try_from(c).unwrap_or(usize::MAX));
    drop(file);
    let context = options.context.or(trained).unwrap_or(2048);
    let kv_tokens = options.kv_tokens.unwrap_or(context.max(16 * 1024));
    if kv_tokens < context {
        return Err(format!(
            "--kv-tokens {kv_tokens} is below the context of {context} tokens: a request at the \
             context's length could never run (raise --kv-tokens or lower --context)"
        ));
    }
    let metrics = Arc::new(Metrics::default());
    let engine = engine::start(
        model.clone(),
        tokenizer.clone(),
        EngineOptions {
            max_batch: options.max_batch,
            kv_tokens,
            block_tokens: rumus::llm::DEFAULT_BLOCK_TOKENS,
        },
        metrics.clone(),
    )
    .map_err(|e| e.to_string())?;
    let shared = Shared::new(
        engine.sender(),
        tokenizer,
        model.config().vocab,
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
