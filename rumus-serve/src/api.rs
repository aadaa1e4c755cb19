//! The HTTP endpoints: OpenAI's `POST /v1/completions` and `POST /v1/chat/completions`
//! (whole answers, or server-sent events with `"stream": true`), `GET /v1/models`,
//! `GET /health` and Prometheus's `GET /metrics`. Every failure is an OpenAI-style error
//! body with a 4xx status (5xx only for the engine's own faults).

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::Stream;
use rumus::llm::{Tokenizer, chat_ml};
use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

use crate::engine::{Event, Finish, FinishReason, Job};
use crate::metrics::Metrics;
use crate::openai::{ApiError, ChatRequest, Checked, CompletionRequest, parse};

/// What the server lets one request ask for.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Tokens of prompt plus answer.
    pub context: usize,
    /// `max_tokens` at most (and the chat endpoint's default).
    pub max_tokens: usize,
    /// Requests generating or waiting at once; more get 429.
    pub max_concurrent: usize,
    pub max_body_bytes: usize,
}

/// Everything the handlers share.
pub struct Shared {
    pub jobs: mpsc::Sender<Job>,
    pub tokenizer: Arc<Tokenizer>,
    pub vocab: usize,
    pub model_id: String,
    pub limits: Limits,
    pub metrics: Arc<Metrics>,
    in_flight: AtomicUsize,
    started: u64,
}

impl Shared {
    pub fn new(
        jobs: mpsc::Sender<Job>,
        tokenizer: Arc<Tokenizer>,
        vocab: usize,
        model_id: String,
        limits: Limits,
        metrics: Arc<Metrics>,
    ) -> Arc<Shared> {
        Arc::new(Shared {
            jobs,
            tokenizer,
            vocab,
            model_id,
            limits,
            metrics,
            in_flight: AtomicUsize::new(0),
            started: unix_seconds(),
        })
    }
}

/// The server's routes over `shared`.
pub fn router(shared: Arc<Shared>) -> Router {
    let limit = shared.limits.max_body_bytes;
    Router::new()
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/models", get(models))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(limit))
        .with_state(shared)
}

fn unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A request counted as generating until dropped (its answer sent, or its client gone).
struct InFlight(Arc<Shared>);

impl InFlight {
    fn enter(shared: &Arc<Shared>) -> Result<InFlight, ApiError> {
        let before = shared.in_flight.fetch_add(1, Ordering::SeqCst);
        let guard = InFlight(shared.clone());
        if before >= shared.limits.max_concurrent {
            return Err(ApiError {
                status: StatusCode::TOO_MANY_REQUESTS,
                kind: "rate_limit_error",
                code: Some("server_busy"),
                param: None,
                message: format!(
                    "the server is generating {} answers, its limit: try again shortly",
                    shared.limits.max_concurrent
                ),
            });
        }
        Ok(guard)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Which endpoint an answer is for: how its pieces are written.
#[derive(Clone, Copy)]
enum Kind {
    Completion,
    Chat,
}

/// The fields every answer object repeats.
struct Answer {
    kind: Kind,
    id: String,
    created: u64,
    model: String,
}

impl Answer {
    fn new(kind: Kind, model: &str) -> Answer {
        static NEXT: AtomicUsize = AtomicUsize::new(1);
        let prefix = match kind {
            Kind::Completion => "cmpl",
            Kind::Chat => "chatcmpl",
        };
        Answer {
            kind,
            id: format!("{prefix}-{}", NEXT.fetch_add(1, Ordering::Relaxed)),
            created: unix_seconds(),
            model: model.to_string(),
        }
    }

    /// One streamed piece: `text` (or the chat's opening role), and the finish reason on the
    /// last.
    fn chunk(&self, text: Option<&str>, finish: Option<FinishReason>) -> Value {
        let finish = finish.map(FinishReason::as_str);
        let (object, choice) = match self.kind {
            Kind::Completion => (
                "text_completion",
                json!({"index": 0, "text": text.unwrap_or(""), "logprobs": null, "finish_reason": finish}),
            ),
            Kind::Chat => {
                let delta = match (text, finish) {
                    (None, None) => json!({"role": "assistant", "content": ""}),
                    (Some(text), _) => json!({"content": text}),
                    (None, Some(_)) => json!({}),
                };
                (
                    "chat.completion.chunk",
                    json!({"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}),
                )
            }
        };
        json!({
            "id": self.id, "object": object, "created": self.created, "model": self.model,
            "choices": [choice],
        })
    }

    /// A stream's last chunk under `stream_options.include_usage`: no choices, the counts.
    fn usage_chunk(&self, finish: Finish) -> Value {
        let object = match self.kind {
            Kind::Completion => "text_completion",
            Kind::Chat => "chat.completion.chunk",
        };
        json!({
            "id": self.id, "object": object, "created": self.created, "model": self.model,
            "choices": [], "usage": usage(finish),
        })
    }

    /// The whole answer of a request without `stream`.
    fn whole(&self, text: String, finish: Finish) -> Value {
        let reason = finish.reason.as_str();
        let (object, choice) = match self.kind {
            Kind::Completion => (
                "text_completion",
                json!({"index": 0, "text": text, "logprobs": null, "finish_reason": reason}),
            ),
            Kind::Chat => (
                "chat.completion",
                json!({
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "logprobs": null,
                    "finish_reason": reason,
                }),
            ),
        };
        json!({
            "id": self.id, "object": object, "created": self.created, "model": self.model,
            "choices": [choice],
            "usage": usage(finish),
        })
    }
}

/// OpenAI's token counts of an answer.
fn usage(finish: Finish) -> Value {
    json!({
        "prompt_tokens": finish.prompt_tokens,
        "completion_tokens": finish.completion_tokens,
        "total_tokens": finish.prompt_tokens + finish.completion_tokens,
    })
}

/// The body's bytes, or 413 past the size limit (another failure reading it: 400).
fn body_bytes(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError {
                status: StatusCode::PAYLOAD_TOO_LARGE,
                kind: "invalid_request_error",
                code: Some("request_too_large"),
                param: None,
                message: "the request body is larger than this server accepts".into(),
            }
        } else {
            ApiError::invalid(
                None,
                format!("cannot read the body: {}", rejection.body_text()),
            )
        }
    })
}

async fn completions(
    State(shared): State<Arc<Shared>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let answer = async {
        let (request, generation): (CompletionRequest, _) = parse(&body_bytes(body)?)?;
        let checked = generation.check(&shared.model_id, shared.vocab)?;
        let prompt = match request.prompt()? {
            Ok(text) => encode(&shared, text)?,
            Err(tokens) => {
                let vocab = shared.vocab as i64;
                if let Some(bad) = tokens.iter().find(|&&t| !(0..vocab).contains(&t)) {
                    return Err(ApiError::invalid(
                        Some("prompt"),
                        format!("token id {bad} is outside the vocabulary of {vocab}"),
                    ));
                }
                tokens.to_vec()
            }
        };
        // OpenAI's default for this endpoint.
        generate(&shared, Kind::Completion, prompt, checked, 16).await
    }
    .await;
    respond(&shared, "completions", answer)
}

async fn chat_completions(
    State(shared): State<Arc<Shared>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let answer = async {
        let (request, generation): (ChatRequest, _) = parse(&body_bytes(body)?)?;
        let checked = generation.check(&shared.model_id, shared.vocab)?;
        let conversation = request.conversation()?;
        let pairs: Vec<(&str, &str)> = conversation.iter().map(|(r, t)| (*r, t.as_str())).collect();
        let prompt = encode(&shared, &chat_ml(&pairs, true))?;
        let default = shared.limits.max_tokens;
        generate(&shared, Kind::Chat, prompt, checked, default).await
    }
    .await;
    respond(&shared, "chat_completions", answer)
}

fn respond(
    shared: &Shared,
    endpoint: &'static str,
    answer: Result<Response, ApiError>,
) -> Response {
    let response = answer.unwrap_or_else(IntoResponse::into_response);
    shared
        .metrics
        .count_request(endpoint, response.status().as_u16());
    response
}

fn encode(shared: &Shared, text: &str) -> Result<Vec<i64>, ApiError> {
    let tokens = shared.tokenizer.encode(text).map_err(|e| ApiError {
        status: StatusCode::INTERNAL_SERVER_ERROR,
        kind: "server_error",
        code: None,
        param: None,
        message: e.to_string(),
    })?;
    if tokens.is_empty() {
        return Err(ApiError::invalid(Some("prompt"), "the prompt is empty"));
    }
    Ok(tokens)
}

/// Checks the lengths, hands the job to the engine and answers: the whole text, or a stream.
async fn generate(
    shared: &Arc<Shared>,
    kind: Kind,
    prompt: Vec<i64>,
    checked: Checked,
    default_max_tokens: usize,
) -> Result<Response, ApiError> {
    let limits = shared.limits;
    let too_long = |message: String| ApiError {
        code: Some("context_length_exceeded"),
        ..ApiError::invalid(None, message)
    };
    if prompt.len() >= limits.context {
        return Err(too_long(format!(
            "the prompt is {} tokens; this server's context is {} tokens, answer included",
            prompt.len(),
            limits.context
        )));
    }
    let room = limits.context - prompt.len();
    let max_tokens = match checked.max_tokens {
        Some(asked) if asked > limits.max_tokens => {
            return Err(ApiError::invalid(
                Some("max_tokens"),
                format!(
                    "max_tokens is {asked}; this server generates at most {} per request",
                    limits.max_tokens
                ),
            ));
        }
        Some(asked) if asked > room => {
            return Err(too_long(format!(
                "the prompt ({} tokens) and max_tokens ({asked}) exceed this server's context of \
                 {} tokens",
                prompt.len(),
                limits.context
            )));
        }
        Some(asked) => asked,
        None => default_max_tokens.min(room),
    };
    let in_flight = InFlight::enter(shared)?;
    let (events, receiver) = unbounded_channel();
    let job = Job {
        prompt,
        max_tokens,
        sampling: checked.sampling,
        seed: checked.seed,
        stops: checked.stops,
        logit_bias: checked.logit_bias,
        events,
        arrived: Instant::now(),
    };
    if shared.jobs.send(job).is_err() {
        return Err(ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            kind: "server_error",
            code: Some("shutting_down"),
            param: None,
            message: "the server is shutting down".into(),
        });
    }
    let answer = Answer::new(kind, &shared.model_id);
    if checked.stream {
        let stream = event_stream(answer, receiver, in_flight, checked.include_usage);
        return Ok(Sse::new(stream).into_response());
    }
    whole_answer(answer, receiver).await
}

/// Waits for the whole text.
async fn whole_answer(
    answer: Answer,
    mut receiver: UnboundedReceiver<Event>,
) -> Result<Response, ApiError> {
    let mut text = String::new();
    while let Some(event) = receiver.recv().await {
        match event {
            Event::Text(piece) => text.push_str(&piece),
            Event::Done(finish) => return Ok(Json(answer.whole(text, finish)).into_response()),
            Event::Failed(message) => return Err(engine_failure(message)),
        }
    }
    Err(engine_failure(
        "the engine stopped before the answer ended".into(),
    ))
}

fn engine_failure(message: String) -> ApiError {
    ApiError {
        status: StatusCode::INTERNAL_SERVER_ERROR,
        kind: "server_error",
        code: None,
        param: None,
        message,
    }
}

/// Where a stream is: the chat's opening role chunk still to send, answering, the token
/// counts to send (`include_usage`), the closing `[DONE]` to send, or over.
enum StreamState {
    Opening,
    Answering,
    Usage(Finish),
    Closing,
    Over,
}

/// The answer as server-sent events: a chunk per piece of text, the finish reason, then
/// `data: [DONE]`, as OpenAI streams. Dropping the stream (the client gone) drops the
/// receiver, which takes the sequence out of the batch.
fn event_stream(
    answer: Answer,
    receiver: UnboundedReceiver<Event>,
    in_flight: InFlight,
    include_usage: bool,
) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    let first = match answer.kind {
        Kind::Chat => StreamState::Opening,
        Kind::Completion => StreamState::Answering,
    };
    let data = |value: Value| Some(Ok(SseEvent::default().data(value.to_string())));
    futures_util::stream::unfold(
        (first, answer, receiver, in_flight),
        move |(state, answer, mut receiver, in_flight)| async move {
            let (event, next) = match state {
                StreamState::Over => return None,
                StreamState::Opening => (data(answer.chunk(None, None)), StreamState::Answering),
                StreamState::Usage(finish) => {
                    (data(answer.usage_chunk(finish)), StreamState::Closing)
                }
                StreamState::Closing => (
                    Some(Ok(SseEvent::default().data("[DONE]"))),
                    StreamState::Over,
                ),
                StreamState::Answering => match receiver.recv().await {
                    Some(Event::Text(piece)) => (
                        data(answer.chunk(Some(&piece), None)),
                        StreamState::Answering,
                    ),
                    Some(Event::Done(finish)) => (
                        data(answer.chunk(None, Some(finish.reason))),
                        if include_usage {
                            StreamState::Usage(finish)
                        } else {
                            StreamState::Closing
                        },
                    ),
                    Some(Event::Failed(message)) => {
                        (data(engine_failure(message).body()), StreamState::Over)
                    }
                    None => (
                        data(engine_failure("the engine stopped".into()).body()),
                        StreamState::Over,
                    ),
                },
            };
            event.map(|e| (e, (next, answer, receiver, in_flight)))
        },
    )
}

async fn models(State(shared): State<Arc<Shared>>) -> Response {
    shared.metrics.count_request("models", 200);
    Json(json!({
        "object": "list",
        "data": [{
            "id": shared.model_id,
            "object": "model",
            "created": shared.started,
            "owned_by": "rumus",
        }],
    }))
    .into_response()
}

async fn health(State(shared): State<Arc<Shared>>) -> Response {
    shared.metrics.count_request("health", 200);
    Json(json!({"status": "ok"})).into_response()
}

async fn metrics(State(shared): State<Arc<Shared>>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        shared.metrics.render(),
    )
        .into_response()
}

async fn not_found(State(shared): State<Arc<Shared>>) -> Response {
    shared.metrics.count_request("unknown", 404);
    ApiError {
        status: StatusCode::NOT_FOUND,
        kind: "invalid_request_error",
        code: Some("unknown_url"),
        param: None,
        message: "no such endpoint: this server answers /v1/completions, /v1/chat/completions, \
                  /v1/models, /health and /metrics"
            .into(),
    }
    .into_response()
}
