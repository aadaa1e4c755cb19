//! The `rumus-serve` binary on a loopback port, serving the real SmolLM2-135M: concurrent
//! streaming and whole answers (each equal to the same request answered alone), every kind
//! of bad input (a 4xx with an OpenAI error body, never a crash), a client leaving
//! mid-stream (its sequence leaves the batch and its cache blocks come back), and a graceful
//! shutdown that finishes the answer in flight.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A running server, killed when dropped.
struct Server {
    child: Child,
    address: SocketAddr,
}

impl Server {
    fn start(model: &std::path::Path) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_rumus-serve"))
            .args(["--model", model.to_str().unwrap(), "--port", "0"])
            .args([
                "--max-batch",
                "8",
                "--kv-tokens",
                "4096",
                "--context",
                "512",
            ])
            .args(["--max-tokens", "64", "--max-concurrent", "16"])
            .args(["--max-body-bytes", "65536"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let address = line
            .trim()
            .strip_prefix("rumus-serve: listening on http://")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .parse()
            .unwrap();
        Server { child, address }
    }

    /// The response's status and body to `method path` with `body`.
    fn call(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        let mut stream = self.send(method, path, body);
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        parse_response(&raw)
    }

    /// The status and JSON body of a POST.
    fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let (status, text) = self.call("POST", path, &body.to_string());
        let value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{status} with a body that is not JSON ({e}): {text}"));
        (status, value)
    }

    fn send(&self, method: &str, path: &str, body: &str) -> TcpStream {
        let mut stream = TcpStream::connect(self.address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(120)))
            .unwrap();
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        stream
    }

    /// A metric's value from `GET /metrics`.
    fn metric(&self, name: &str) -> f64 {
        let (_, text) = self.call("GET", "/metrics", "");
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in\n{text}"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Status and body of a raw HTTP/1.1 response, chunked or not.
fn parse_response(raw: &[u8]) -> (u16, String) {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n").expect("a complete response");
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    (
        status,
        if chunked {
            dechunk(body)
        } else {
            body.to_string()
        },
    )
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// The `data:` payloads of a server-sent event stream.
fn events(body: &str) -> Vec<String> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(str::to_string)
        .collect()
}

/// A streamed answer's text and finish reason, after checking its shape: chunks of the
/// endpoint's object, one finish reason on the last chunk, then `[DONE]`.
fn streamed(body: &str, chat: bool) -> (String, String) {
    let data = events(body);
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"), "{body}");
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let object = if chat {
        "chat.completion.chunk"
    } else {
        "text_completion"
    };
    let mut text = String::new();
    for chunk in &chunks {
        assert_eq!(chunk["object"], object, "{chunk}");
        let choice = &chunk["choices"][0];
        let piece = if chat {
            &choice["delta"]["content"]
        } else {
            &choice["text"]
        };
        text.push_str(piece.as_str().unwrap_or(""));
    }
    let last = &chunks.last().unwrap()["choices"][0]["finish_reason"];
    assert!(
        chunks[..chunks.len() - 1]
            .iter()
            .all(|c| c["choices"][0]["finish_reason"].is_null())
    );
    (text, last.as_str().unwrap().to_string())
}

const PROMPTS: [&str; 4] = [
    "The three primary colours are",
    "def fibonacci(n):",
    "Once upon a time, in a quiet village,",
    "Water boils at",
];

fn completion(prompt: &str, stream: bool) -> Value {
    json!({"prompt": prompt, "max_tokens": 24, "temperature": 0, "stream": stream})
}

#[test]
fn the_server_answers_concurrent_clients_and_every_bad_request() {
    let Some(model) = common::smollm2::smollm2("the server on SmolLM2") else {
        return;
    };
    let server = Server::start(&model);
    let (status, health) = server.call("GET", "/health", "");
    assert_eq!((status, health.as_str()), (200, r#"{"status":"ok"}"#));
    let (status, models) = server.call("GET", "/v1/models", "");
    assert_eq!(status, 200);
    let models: Value = serde_json::from_str(&models).unwrap();
    assert_eq!(models["data"][0]["id"], "SmolLM2-135M-Instruct.Q4_1");

    // Each prompt answered alone, greedily.
    let alone: Vec<String> = PROMPTS
        .iter()
        .map(|p| {
            let (status, answer) = server.post("/v1/completions", &completion(p, false));
            assert_eq!(status, 200, "{answer}");
            let usage = &answer["usage"];
            assert_eq!(
                usage["total_tokens"].as_u64(),
                Some(
                    usage["prompt_tokens"].as_u64().unwrap()
                        + usage["completion_tokens"].as_u64().unwrap()
                )
            );
            assert!(usage["completion_tokens"].as_u64().unwrap() <= 24);
            answer["choices"][0]["text"].as_str().unwrap().to_string()
        })
        .collect();
    assert!(alone.iter().all(|a| !a.is_empty()), "{alone:?}");
    let (status, chat) = server.post(
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": "What is the capital of France?"}],
                "temperature": 0, "max_tokens": 20}),
    );
    assert_eq!(status, 200);
    assert_eq!(chat["object"], "chat.completion");
    let reply = chat["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(reply.contains("Paris"), "{reply}");

    // Eight clients at once, half streaming: batched, each gets the answer it got alone
    // (each sequence's arithmetic does not depend on the others in its batch).
    std::thread::scope(|scope| {
        let clients: Vec<_> = (0..8)
            .map(|i| {
                let server = &server;
                scope.spawn(move || {
                    let stream = i % 2 == 0;
                    let request = completion(PROMPTS[i % 4], stream);
                    if stream {
                        let (status, body) =
                            server.call("POST", "/v1/completions", &request.to_string());
                        assert_eq!(status, 200);
                        streamed(&body, false).0
                    } else {
                        let (status, answer) = server.post("/v1/completions", &request);
                        assert_eq!(status, 200);
                        answer["choices"][0]["text"].as_str().unwrap().to_string()
                    }
                })
            })
            .collect();
        for (i, client) in clients.into_iter().enumerate() {
            assert_eq!(client.join().unwrap(), alone[i % 4], "client {i}");
        }
    });
    // A streamed chat: the role first, then the text, then the reason.
    let request = json!({"messages": [{"role": "system", "content": "Be brief."},
                                      {"role": "user", "content": [{"type": "text", "text": "Name a fruit."}]}],
                         "temperature": 0.7, "seed": 3, "max_tokens": 12, "stream": true});
    let (status, body) = server.call("POST", "/v1/chat/completions", &request.to_string());
    assert_eq!(status, 200);
    let first: Value = serde_json::from_str(&events(&body)[0]).unwrap();
    assert_eq!(first["choices"][0]["delta"]["role"], "assistant");
    let (text, reason) = streamed(&body, true);
    assert!(!text.is_empty() && ["stop", "length"].contains(&reason.as_str()));
    // The same seed, the same sampled answer; with `include_usage`, a last chunk of counts.
    let mut request = request;
    request["stream_options"] = json!({"include_usage": true});
    let (_, again) = server.call("POST", "/v1/chat/completions", &request.to_string());
    let data = events(&again);
    let counts: Value = serde_json::from_str(&data[data.len() - 2]).unwrap();
    assert_eq!(counts["choices"], json!([]));
    let completion = counts["usage"]["completion_tokens"].as_u64().unwrap();
    assert!((1..=12).contains(&completion), "{counts}");
    let without_counts: Vec<&str> = again.lines().filter(|l| !l.contains("\"usage\"")).collect();
    assert_eq!(streamed(&without_counts.join("\n"), true).0, text);

    // A bias of 100 on one token makes every greedy token that one; -100 on the end of turn
    // runs an answer to max_tokens.
    let (_, forced) = server.post(
        "/v1/completions",
        &json!({"prompt": "Hi", "max_tokens": 5, "temperature": 0, "logit_bias": {"28": 100}}),
    );
    assert_eq!(forced["usage"]["completion_tokens"], 5);
    let text = forced["choices"][0]["text"].as_str().unwrap();
    assert!(
        text.len() == 5 && text.chars().all(|c| c == text.chars().next().unwrap()),
        "{text:?}"
    );

    // Bad requests: the status, and an OpenAI error body naming the problem.
    let long_prompt: Vec<i64> = (0..600).map(|i| 100 + i).collect();
    let huge = "x".repeat(70_000);
    let cases: Vec<(&str, String, u16, &str)> = vec![
        ("/v1/completions", "{bad json".into(), 400, "not valid JSON"),
        ("/v1/completions", "[1, 2]".into(), 400, "JSON object"),
        (
            "/v1/completions",
            json!({"max_tokens": 4}).to_string(),
            400,
            "prompt",
        ),
        (
            "/v1/completions",
            json!({"prompt": "a", "max_tokens": "ten"}).to_string(),
            400,
            "max_tokens",
        ),
        (
            "/v1/completions",
            json!({"prompt": "a", "temperature": -1}).to_string(),
            400,
            "temperature",
        ),
        (
            "/v1/completions",
            json!({"prompt": "a", "top_p": 1.5}).to_string(),
            400,
            "top_p",
        ),
        (
            "/v1/completions",
            json!({"prompt": "a", "max_tokens": 0}).to_string(),
            400,
            "max_tokens",
        ),
        (
            "/v1/completions",
            json!({"prompt": "a", "max_tokens": 65}).to_string(),
            400,
            "at most 64",
        ),
        (
            "/v1/completions",
            json!({"prompt": "a", "n": 2}).to_string(),
            400,
            "n must be 1",
        ),
        (
            "/v1/completions",
            json!({"prompt": "a", "model": "gpt-4"}).to_string(),
            404,
            "does not exist",
        ),
        (
            "/v1/completions",
            json!({"prompt": long_prompt}).to_string(),
            400,
            "context",
        ),
        (
            "/v1/completions",
            json!({"prompt": [1_000_000_000]}).to_string(),
            400,
            "vocabulary",
        ),
        (
            "/v1/completions",
            json!({"prompt": ["a", "b"]}).to_string(),
            400,
            "one prompt",
        ),
        (
            "/v1/completions",
            json!({"prompt": ""}).to_string(),
            400,
            "empty",
        ),
        (
            "/v1/completions",
            json!({"prompt": huge}).to_string(),
            413,
            "larger",
        ),
        (
            "/v1/chat/completions",
            json!({"messages": []}).to_string(),
            400,
            "messages",
        ),
        (
            "/v1/chat/completions",
            json!({"messages": [{"role": "tool", "content": "x"}]}).to_string(),
            400,
            "role",
        ),
        (
            "/v1/chat/completions",
            json!({"messages": "hello"}).to_string(),
            400,
            "messages",
        ),
        ("/v1/nothing", "{}".into(), 404, "no such endpoint"),
    ];
    for (path, body, status, says) in cases {
        let (got, text) = server.call("POST", path, &body);
        let error: Value = serde_json::from_str(&text)
            .unwrap_or_else(|_| panic!("{path} {body:.60}: not JSON: {text}"));
        let message = error["error"]["message"].as_str().unwrap_or_default();
        assert_eq!(got, status, "{path} {body:.60}: {text}");
        assert!(message.contains(says), "{path} {body:.60}: {message}");
    }

    // A client that leaves after the first piece of a long answer.
    let generated_before = server.metric("rumus_generated_tokens_total");
    let request = json!({"prompt": PROMPTS[2], "max_tokens": 64, "temperature": 1.0,
                         "min_p": 0.0, "stream": true});
    let mut stream = server.send("POST", "/v1/completions", &request.to_string());
    let mut first = [0u8; 256];
    let read = stream.read(&mut first).unwrap();
    assert!(String::from_utf8_lossy(&first[..read]).starts_with("HTTP/1.1 200"));
    drop(stream);
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.metric("rumus_running_sequences") > 0.0 {
        assert!(
            Instant::now() < deadline,
            "the sequence never left the batch"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let generated = server.metric("rumus_generated_tokens_total") - generated_before;
    assert!(
        generated < 64.0,
        "{generated} tokens generated for a client that left"
    );
    // Every block back in the pool, nothing waiting, and the server well.
    assert_eq!(server.metric("rumus_kv_cache_blocks_used"), 0.0);
    assert_eq!(server.metric("rumus_queue_depth"), 0.0);
    assert_eq!(server.call("GET", "/health", "").0, 200);
    assert!(server.metric("rumus_requests_total{endpoint=\"completions\",status=\"400\"}") >= 10.0);
}

#[test]
fn a_terminated_server_finishes_the_answer_in_flight() {
    let Some(model) = common::smollm2::smollm2("the server's shutdown on SmolLM2") else {
        return;
    };
    let mut server = Server::start(&model);
    let request = json!({"prompt": PROMPTS[0], "max_tokens": 40, "temperature": 1.0,
                         "seed": 1, "stream": true, "min_p": 0.0});
    let mut stream = server.send("POST", "/v1/completions", &request.to_string());
    let mut head = [0u8; 64];
    let read = stream.read(&mut head).unwrap();
    assert!(String::from_utf8_lossy(&head[..read]).starts_with("HTTP/1.1 200"));
    // The shell's own `kill` (no procps needed).
    let terminated = Command::new("sh")
        .args(["-c", &format!("kill -TERM {}", server.child.id())])
        .status()
        .unwrap();
    assert!(terminated.success());
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest).unwrap();
    let whole = [&head[..read], &rest[..]].concat();
    let (_, body) = parse_response(&whole);
    // The whole answer, closed by its reason and `[DONE]`, though the signal came first.
    let (_, reason) = streamed(&body, false);
    assert!(["stop", "length"].contains(&reason.as_str()), "{body}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            break;
        }
        assert!(Instant::now() < deadline, "the server did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}
