//! OpenAI's request bodies for `/v1/completions` and `/v1/chat/completions`, read strictly
//! (a field of the wrong type is an error naming it) and checked against the server's
//! limits, and the errors in OpenAI's shape: `{"error": {"message", "type", "param",
//! "code"}}`. Fields this server does not use (`user`, `service_tier`, ...) are ignored, as
//! OpenAI's clients send them; options it cannot honour (`n` above 1, `logprobs`, `echo`,
//! `best_of`) are errors rather than silently different answers.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use rumus::llm::Sampling;
use serde::Deserialize;
use serde_json::{Value, json};

/// An error answer: its status and OpenAI's error body.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub kind: &'static str,
    pub code: Option<&'static str>,
    pub param: Option<&'static str>,
    pub message: String,
}

impl ApiError {
    /// A 400 about `param`.
    pub fn invalid(param: Option<&'static str>, message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            kind: "invalid_request_error",
            code: None,
            param,
            message: message.into(),
        }
    }

    pub fn body(&self) -> Value {
        json!({
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }
        })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body())).into_response()
    }
}

/// A prompt: text, or token ids, or a list holding one of them.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Prompt {
    Text(String),
    Tokens(Vec<i64>),
    Texts(Vec<String>),
    TokenLists(Vec<Vec<i64>>),
}

/// Stop strings: one or a list.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Stop {
    One(String),
    Many(Vec<String>),
}

/// The sampling and length fields both endpoints share.
#[derive(Debug, Default, Deserialize)]
pub struct Generation {
    pub model: Option<String>,
    pub max_tokens: Option<u64>,
    /// The chat endpoint's newer name for `max_tokens`.
    pub max_completion_tokens: Option<u64>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<u64>,
    pub min_p: Option<f64>,
    #[serde(alias = "repeat_penalty")]
    pub repetition_penalty: Option<f64>,
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    pub seed: Option<u64>,
    pub stop: Option<Stop>,
    pub stream: Option<bool>,
    pub n: Option<u64>,
    pub best_of: Option<u64>,
    pub echo: Option<bool>,
    pub logprobs: Option<Value>,
    pub top_logprobs: Option<Value>,
    pub stream_options: Option<StreamOptions>,
    /// Added to the logits of token ids (keys, as strings) before sampling, in `[-100, 100]`.
    pub logit_bias: Option<std::collections::BTreeMap<String, f64>>,
}

/// `stream_options`: `include_usage` adds a last chunk with the token counts.
#[derive(Debug, Default, Deserialize)]
pub struct StreamOptions {
    pub include_usage: Option<bool>,
}

/// `POST /v1/completions`'s own field (the others are [`Generation`]'s).
#[derive(Debug, Deserialize)]
pub struct CompletionRequest {
    pub prompt: Prompt,
}

/// One message of a chat.
#[derive(Debug, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: Content,
}

/// A message's content: text, or parts of which only text ones are understood.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Debug, Deserialize)]
pub struct Part {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: Option<String>,
}

/// `POST /v1/chat/completions`'s own field (the others are [`Generation`]'s).
#[derive(Debug, Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<Message>,
}

/// Parses a request body into the endpoint's own fields and the shared ones, or a 400
/// naming the field that is wrong.
pub fn parse<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<(T, Generation), ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid(None, format!("the body is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(ApiError::invalid(None, "the body must be a JSON object"));
    }
    Ok((fields(&value)?, fields(&value)?))
}

fn fields<T: for<'de> Deserialize<'de>>(value: &Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        ApiError::invalid(None, format!("`{path}`: {}", e.inner()))
    })
}

/// What the engine needs of a request's generation fields, checked.
pub struct Checked {
    pub sampling: Sampling,
    pub seed: u64,
    pub stops: Vec<String>,
    pub stream: bool,
    /// Whether a stream ends with a chunk of token counts.
    pub include_usage: bool,
    /// As asked (`None`: the endpoint's default).
    pub max_tokens: Option<usize>,
    pub logit_bias: Vec<(usize, f32)>,
}

impl Generation {
    /// The fields checked against OpenAI's ranges, the server's model name and its
    /// vocabulary of `vocab` tokens.
    pub fn check(&self, model_id: &str, vocab: usize) -> Result<Checked, ApiError> {
        if let Some(model) = &self.model
            && model != model_id
        {
            return Err(ApiError {
                status: StatusCode::NOT_FOUND,
                kind: "invalid_request_error",
                code: Some("model_not_found"),
                param: Some("model"),
                message: format!(
                    "The model `{model}` does not exist; this server serves `{model_id}`"
                ),
            });
        }
        for (param, value) in [("n", self.n), ("best_of", self.best_of)] {
            if value.is_some_and(|v| v != 1) {
                return Err(ApiError::invalid(
                    Some(param),
                    format!("{param} must be 1: this server generates one answer per request"),
                ));
            }
        }
        if self.echo == Some(true) {
            return Err(ApiError::invalid(Some("echo"), "echo is not supported"));
        }
        for (param, value) in [
            ("logprobs", &self.logprobs),
            ("top_logprobs", &self.top_logprobs),
        ] {
            if value
                .as_ref()
                .is_some_and(|v| !v.is_null() && v != &Value::Bool(false))
            {
                return Err(ApiError::invalid(
                    Some(param),
                    format!("{param} is not supported"),
                ));
            }
        }
        let max_tokens = self.max_tokens.or(self.max_completion_tokens);
        if max_tokens == Some(0) {
            return Err(ApiError::invalid(
                Some("max_tokens"),
                "max_tokens must be at least 1",
            ));
        }
        let stops = match &self.stop {
            None => Vec::new(),
            Some(Stop::One(s)) => vec![s.clone()],
            Some(Stop::Many(list)) if list.len() <= 4 => list.clone(),
            Some(Stop::Many(list)) => {
                return Err(ApiError::invalid(
                    Some("stop"),
                    format!("stop takes up to 4 strings, not {}", list.len()),
                ));
            }
        };
        // OpenAI's temperature is in [0, 2]; the sampler takes any value >= 0.
        if let Some(t) = self.temperature
            && !(0.0..=2.0).contains(&t)
        {
            return Err(ApiError::invalid(
                Some("temperature"),
                format!("temperature {t} is outside [0, 2]"),
            ));
        }
        let sampling = Sampling {
            temperature: self.temperature.unwrap_or(1.0),
            top_k: match self.top_k {
                Some(0) | None => None,
                Some(k) => Some(usize::try_from(k).unwrap_or(usize::MAX)),
            },
            top_p: self.top_p,
            min_p: self.min_p,
            repetition_penalty: self.repetition_penalty.unwrap_or(1.0),
            presence_penalty: self.presence_penalty.unwrap_or(0.0),
            frequency_penalty: self.frequency_penalty.unwrap_or(0.0),
        };
        sampling.check().map_err(|e| {
            let message = e.to_string();
            let param = [
                "top_p",
                "min_p",
                "repetition_penalty",
                "presence_penalty",
                "frequency_penalty",
            ]
            .into_iter()
            .find(|p| message.contains(p));
            ApiError::invalid(param, message)
        })?;
        let logit_bias = self
            .logit_bias
            .iter()
            .flatten()
            .map(|(token, &bias)| {
                let id = token.parse::<usize>().ok().filter(|&id| id < vocab);
                match id {
                    Some(id) if (-100.0..=100.0).contains(&bias) => Ok((id, bias as f32)),
                    Some(_) => Err(format!(
                        "logit_bias {bias} of token {token} is outside [-100, 100]"
                    )),
                    None => Err(format!(
                        "logit_bias names `{token}`, not a token id below {vocab}"
                    )),
                }
            })
            .collect::<Result<Vec<_>, String>>()
            .map_err(|m| ApiError::invalid(Some("logit_bias"), m))?;
        Ok(Checked {
            logit_bias,
            sampling,
            seed: self.seed.unwrap_or_else(fresh_seed),
            stops,
            stream: self.stream.unwrap_or(false),
            include_usage: self
                .stream_options
                .as_ref()
                .and_then(|o| o.include_usage)
                .unwrap_or(false),
            max_tokens: max_tokens.map(|m| usize::try_from(m).unwrap_or(usize::MAX)),
        })
    }
}

/// A seed for a request that names none: different each time, as OpenAI's sampling is.
fn fresh_seed() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now())
}

impl CompletionRequest {
    /// The prompt as text or as token ids.
    pub fn prompt(&self) -> Result<Result<&str, &[i64]>, ApiError> {
        let one = |count: usize| {
            ApiError::invalid(
                Some("prompt"),
                format!("one prompt per request, not {count}"),
            )
        };
        match &self.prompt {
            Prompt::Text(text) => Ok(Ok(text)),
            Prompt::Tokens(tokens) => Ok(Err(tokens)),
            Prompt::Texts(list) if list.len() == 1 => Ok(Ok(&list[0])),
            Prompt::TokenLists(list) if list.len() == 1 => Ok(Err(&list[0])),
            Prompt::Texts(list) => Err(one(list.len())),
            Prompt::TokenLists(list) => Err(one(list.len())),
        }
    }
}

impl ChatRequest {
    /// The conversation as (role, text) pairs, roles checked.
    pub fn conversation(&self) -> Result<Vec<(&str, String)>, ApiError> {
        if self.messages.is_empty() {
            return Err(ApiError::invalid(Some("messages"), "messages is empty"));
        }
        self.messages
            .iter()
            .map(|m| {
                if !matches!(
                    m.role.as_str(),
                    "system" | "developer" | "user" | "assistant"
                ) {
                    return Err(ApiError::invalid(
                        Some("messages"),
                        format!(
                            "role `{}` is not supported (system, developer, user, assistant)",
                            m.role
                        ),
                    ));
                }
                let role = if m.role == "developer" {
                    "system"
                } else {
                    m.role.as_str()
                };
                let text = match &m.content {
                    Content::Text(text) => text.clone(),
                    Content::Parts(parts) => parts
                        .iter()
                        .map(|p| match (&p.kind[..], &p.text) {
                            ("text", Some(text)) => Ok(text.as_str()),
                            _ => Err(ApiError::invalid(
                                Some("messages"),
                                format!("content parts of type `{}` are not supported", p.kind),
                            )),
                        })
                        .collect::<Result<Vec<&str>, ApiError>>()?
                        .concat(),
                };
                Ok((role, text))
            })
            .collect()
    }
}
