//! An OpenAI-compatible HTTP/1.1 server over one engine (cargo feature `server`).
//!
//! `std::net` and one thread per connection; no async runtime. Connection threads call the
//! [`Backend`] concurrently (`&self`): a batching engine's backend hands each request to the
//! scheduler thread that owns the engine and runs all of them in shared steps; a backend with
//! one KV cache runs them one at a time behind its own lock. Requests beyond
//! [`ServerConfig::max_concurrent`] (running plus waiting for the engine) are refused with 429
//! and a `retry-after` header.
//!
//! ```ignore
//! let server = Server::bind("127.0.0.1:8080", my_backend, ServerConfig::default())?;
//! eprintln!("listening on http://{}/v1", server.local_addr()?);
//! server.run()?; // or: let handle = server.spawn(); … handle.shutdown();
//! ```
//!
//! # Endpoints
//!
//! | method | path | |
//! |---|---|---|
//! | GET | `/v1/models` | `{"object":"list","data":[{"id","object":"model","created","owned_by","context_length"}]}` |
//! | GET | `/v1/models/{id}` | that model object, or 404 `model_not_found` |
//! | POST | `/v1/chat/completions` | chat with the model's chat template |
//! | POST | `/v1/completions` | raw-prompt completion |
//! | GET | `/health` | `{"status":"ok"}` |
//! | GET | `/metrics` | counters and gauges in Prometheus' text format: `metainfer_requests_total{model, outcome}` (`ok`, `cancelled`, `rejected`: 429/503, `error`), `metainfer_prompt_tokens_total`, `metainfer_generated_tokens_total`, `metainfer_prefill_seconds_total`, `metainfer_decode_seconds_total`, `metainfer_requests_admitted`, `metainfer_connections_open`, `metainfer_context_length` |
//!
//! The same paths without the `/v1` prefix are accepted too. The request's `model` field is
//! not checked: every request goes to the one model, whose id the response echoes.
//!
//! # Request fields and how they map to [`GenParams`]
//!
//! - `messages` (chat): `[{role, content}]`; `role` is `system`, `user`, `assistant`, `tool`
//!   or `developer` (sent to the template as `system`); `content` is a string, an array of
//!   `{"type":"text","text":…}` parts (concatenated) or `null` (empty). Other part types → 400.
//!   An assistant message may carry `tool_calls` (`[{id, type: "function", function: {name,
//!   arguments}}]`, the arguments a string of JSON), a `tool` message its `tool_call_id`; the
//!   template reads them as [`Message::template_value`] writes them.
//! - `tools` (chat): `[{"type": "function", "function": {name, description, parameters}}]`, given
//!   to the chat template as its `tools` variable as sent (Qwen2.5's and Qwen3's templates list
//!   them in the system prompt). A template that renders the same prompt with them and without
//!   (one that knows no tools: SmolLM2's, Gemma 3's) → 400, since the model would never see them;
//!   so does `tools` beside `chat_template_kwargs.tools`, or on `/v1/completions`. Each tool must
//!   be a function with a name of 1–64 letters, digits, `_` or `-`, named once; `functions` /
//!   `function_call` (the deprecated form) → 400 naming `tools`.
//! - `tool_choice`: `auto` (default) or `none` (the template does not get the tools and the reply
//!   is all content); `required` or a named function → 400 (a call cannot be forced without
//!   constrained decoding). `parallel_tool_calls: false` keeps a reply's first call only.
//! - `chat_template_kwargs` (chat; the extension vLLM and llama.cpp's server take): an object of
//!   extra chat template variables, over the server's own ([`ServerConfig::chat_template_kwargs`]),
//!   e.g. `{"enable_thinking": false}` for Qwen3. Not an object, naming a variable the engine
//!   sets (`messages`, `add_generation_prompt`, `bos_token`, `eos_token`) or sent to
//!   `/v1/completions` → 400.
//! - `reasoning_format` (chat; llama.cpp's extension): `none`, `deepseek` or `auto` (the same as
//!   `deepseek`) over [`ServerConfig::reasoning_format`]; another value, or sent to
//!   `/v1/completions` → 400.
//! - `prompt` (completions): a string, or an array of exactly one string.
//! - `max_completion_tokens` (chat; preferred) / `max_tokens` → `max_tokens`. Absent: the
//!   server's `default_max_tokens`, lowered to what is left of the context when the backend
//!   can count the prompt. prompt + max_tokens over the context → 400 `context_length_exceeded`.
//! - `temperature` (default **1.0**, OpenAI's default; 0 = greedy), `top_p` (default 0.95),
//!   `top_k` (extension, default 40; 0 disables), `min_p` (extension, default 0.05): the
//!   truncation defaults are [`GenParams::sampled`]'s, since a small model sampled at 1.0 with
//!   no truncation rambles. Send `temperature: 0` for deterministic output.
//! - `seed` → `seed` (absent: a random seed per request).
//! - `stop`: a string or an array of strings → `stop` (the stop string is not returned).
//! - `repeat_penalty` and `repeat_last_n` (llama.cpp's names, extensions) → the same fields
//!   (defaults 1.0 and 64).
//! - `frequency_penalty` and `presence_penalty` (in [-2, 2], default 0) → the same fields: as in
//!   llama.cpp, over the last `repeat_last_n` tokens of prompt and reply (OpenAI counts the reply
//!   only).
//! - `logit_bias`: `{"token id": bias}`, each in [-100, 100] → `logit_bias` (ids past the
//!   vocabulary are ignored).
//! - `ignore_eos: true` (extension) → `stop_at_eos = false`.
//! - `stream`, `stream_options.include_usage`.
//! - `n` and `best_of` must be 1 (or absent) → else 400.
//! - Refused with 400 because they cannot be honoured: `logprobs` (true / non-null),
//!   `response_format` other than `{"type":"text"}`, `echo: true`, a non-empty `suffix`.
//! - Accepted and ignored: `model`, `user`, `top_logprobs`, `store`, `metadata`,
//!   `service_tier` and any other unknown field.
//!
//! [`GenParams::validate`] failures are 400 `invalid_request_error` with `param` set.
//!
//! # Responses
//!
//! The OpenAI shapes: `chat.completion` (`id` `chatcmpl-…`) and `text_completion` (`id`
//! `cmpl-…`) with `created`, `model`, `choices[{index, message{role,content} | text,
//! logprobs: null, finish_reason: "stop"|"length"}]`, `usage{prompt_tokens,
//! completion_tokens, total_tokens}`. `usage.prompt_tokens` is [`Backend::count_tokens`] of the
//! prompt for completions, and [`Backend::count_chat_tokens`] (else the backend's
//! `Stats::prompt_tokens`) for chat.
//!
//! With [`ReasoningFormat::Deepseek`] (the server's, or the request's `reasoning_format`) a chat
//! message also has `reasoning_content`: the text of a `<think>…</think>` block that opens the
//! reply, or that the chat prompt opened ([`Backend::chat_prompt`]), which `content` then leaves
//! out (streamed as `delta.reasoning_content` pieces).
//!
//! With `tools`, the calls the reply makes ([`ToolCallParser`](crate::ToolCallParser): Hermes
//! `<tool_call>` blocks, or a reply that is one JSON call as Llama 3.x writes them) are
//! `message.tool_calls` (`[{id: "call_…", type: "function", function: {name, arguments}}]`, the
//! arguments a string of compact JSON), `content` is the text beside them (`null` when there is
//! none) and `finish_reason` is `tool_calls` (unless `max_tokens` cut the reply). A block that does
//! not parse or names a function not offered stays in `content` as written. Streamed, each call
//! comes whole in one `delta.tool_calls: [{index, id, type, function}]`, when its block closes.
//!
//! Streaming (`stream: true`): `text/event-stream`, one `data: {chunk}\n\n` per piece of text
//! (chat: the first chunk is `delta: {role: "assistant", content: ""}`), a last chunk with
//! empty delta / text and the `finish_reason`, then with `stream_options.include_usage` a chunk
//! with `choices: []` and the `usage` (the other chunks then carry `usage: null`), then
//! `data: [DONE]\n\n`. The status line is sent with the first piece, so errors found before
//! generation starts (context full, bad template) still get a proper status; an engine error
//! after that is sent as a `data: {"error":…}` event before `[DONE]`.
//!
//! # Errors
//!
//! Always the envelope `{"error":{"message","type","param","code"}}`:
//! 400 `invalid_request_error` (bad JSON — the message says where parsing failed —, missing or
//! invalid fields, code `context_length_exceeded` when the prompt and max_tokens do not fit,
//! chat-template failures), 404 unknown route, 405 wrong method (with `allow`), 411 a chunked
//! request body (not supported: send `Content-Length`), 413 a body over `max_body_bytes`
//! (decided from `Content-Length` before reading it), 431 a request head over 16 KiB, 429
//! `rate_limit_exceeded` when `max_concurrent` requests are admitted, 503 when
//! `max_connections` connections are open, 500 `server_error` for engine errors and panics.
//!
//! # Connections
//!
//! Every response has an `x-request-id` (the client's own `x-request-id` when it is a short
//! token, else a fresh one). A JSON response to an HTTP/1.1 client that did not ask to close
//! keeps the connection alive for its next request (`keep_alive`); streamed bodies end when the
//! connection closes (no chunked encoding), and errors close it too.
//! `Expect: 100-continue` is answered. Reads and writes time out after `io_timeout`, and the
//! whole request (head and body) must arrive within `request_timeout` of its first byte, so
//! clients that trickle a byte at a time cannot hold connections open (408).
//!
//! # Cancellation
//!
//! Between tokens the server checks whether the client is still there (a nonblocking `peek`
//! that sees end-of-stream or an error; for streams also a failed write) and, if not, makes
//! the backend's callback return false so generation stops — for streaming and non-streaming
//! requests alike. A client that half-closes its sending side after the request counts as gone.
//! [`ServerHandle::shutdown`] also cancels the generation in flight.

mod api;
mod http;
mod metrics;
mod reasoning;
mod tools;

use crate::{GenParams, Message, Result, Stats, TemplateKwargs};
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// What the server needs of an engine.
pub trait Backend: Send + Sync + 'static {
    /// The id /v1/models lists and responses echo.
    fn model_id(&self) -> String;
    /// Context length (for /v1/models metadata and request validation).
    fn max_seq(&self) -> usize;
    /// Token count of a text as the model tokenizes it (for usage.prompt_tokens).
    fn count_tokens(&self, text: &str) -> usize;
    /// Raw-prompt completion; on_text gets each piece of text; returning false cancels.
    /// It may also be called with an empty piece (a token whose text is held back), which
    /// lets the server check for a vanished client between every token.
    fn complete(
        &self,
        prompt: &str,
        p: &GenParams,
        on_text: &mut dyn FnMut(&str) -> bool,
    ) -> Result<(String, Stats)>;
    /// Chat completion with the model's chat template, given `kwargs` besides the messages.
    fn chat(
        &self,
        messages: &[Message],
        kwargs: &TemplateKwargs,
        p: &GenParams,
        on_text: &mut dyn FnMut(&str) -> bool,
    ) -> Result<(String, Stats)>;
    /// Token count of the prompt [`Backend::chat`] builds for `messages` and `kwargs`, when the
    /// backend can tell; used for `usage.prompt_tokens`, for the context check before generating
    /// and to fit a default `max_tokens` into the context. `None` (the default): the server uses
    /// the `Stats::prompt_tokens` that `chat` reports.
    fn count_chat_tokens(&self, _messages: &[Message], _kwargs: &TemplateKwargs) -> Option<usize> {
        None
    }
    /// The prompt text [`Backend::chat`] builds for `messages` and `kwargs` (the chat
    /// template's rendering with the generation prompt), when the backend can tell. The server
    /// reads whether it leaves a `<think>` block open, so that [`ReasoningFormat::Deepseek`]
    /// splits a reply that starts inside one. `None` (the default): a reply is split as if the
    /// prompt opened nothing.
    fn chat_prompt(&self, _messages: &[Message], _kwargs: &TemplateKwargs) -> Option<String> {
        None
    }
}

/// Limits and defaults of a [`Server`].
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// Largest request body accepted; larger → 413. Default 1 MiB.
    pub max_body_bytes: usize,
    /// Generation requests admitted at once (running + waiting for the engine); beyond → 429.
    /// Default 4.
    pub max_concurrent: usize,
    /// `max_tokens` when a request gives none (lowered to the context left). Default 256.
    pub default_max_tokens: usize,
    /// Overrides [`Backend::model_id`].
    pub model_id: Option<String>,
    /// One line per request to stderr. Default false.
    pub log: bool,
    /// Connections handled at once (each has a thread); beyond → 503. Default 64 (at least
    /// `max_concurrent` + 1).
    pub max_connections: usize,
    /// Timeout of each read and write on a connection. Default 30 s.
    pub io_timeout: Duration,
    /// Time from a request's first byte to its last (head and body) before it is refused with
    /// 408. Default 10 s.
    pub request_timeout: Duration,
    /// How long a kept-alive connection waits for its next request (HTTP/1.1 keep-alive for
    /// length-delimited responses; zero: every response closes its connection). Default 5 s.
    pub keep_alive: Duration,
    /// Chat template variables every chat request gets (llama.cpp's `--chat-template-kwargs`);
    /// a request's own `chat_template_kwargs` override them key by key. Default none.
    pub chat_template_kwargs: TemplateKwargs,
    /// Whether chat replies carry their reasoning apart; a request's own `reasoning_format`
    /// overrides it. Default [`ReasoningFormat::None`].
    pub reasoning_format: ReasoningFormat,
}

/// Where a chat reply's reasoning goes (llama.cpp's `--reasoning-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReasoningFormat {
    /// In `content`, as the model wrote it.
    #[default]
    None,
    /// A `<think>…</think>` block that opens the reply (Qwen3, DeepSeek-R1) goes to
    /// `message.reasoning_content` (streamed as `delta.reasoning_content`), the rest to
    /// `content`; the newlines beside the tags are dropped. A reply that does not open with the
    /// tag is all content; a block cut off by `max_tokens` is all reasoning. When the chat
    /// prompt itself ends with `<think>` ([`Backend::chat_prompt`]; DeepSeek-R1's and Qwen3
    /// Thinking-2507's templates), the reply's text up to `</think>` is the reasoning.
    Deepseek,
}

impl std::str::FromStr for ReasoningFormat {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "none" => Ok(ReasoningFormat::None),
            // llama.cpp's `auto` lets the chat format decide; `<think>` is the only reasoning
            // markup these engines know, so it is deepseek's split
            "deepseek" | "auto" => Ok(ReasoningFormat::Deepseek),
            other => Err(format!(
                "unknown reasoning format '{other}': use none (reasoning left in content) or deepseek (a leading <think> block to reasoning_content; auto is the same)"
            )),
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_body_bytes: 1 << 20,
            max_concurrent: 4,
            default_max_tokens: 256,
            model_id: None,
            log: false,
            max_connections: 64,
            io_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(10),
            keep_alive: Duration::from_secs(5),
            chat_template_kwargs: TemplateKwargs::new(),
            reasoning_format: ReasoningFormat::None,
        }
    }
}

/// State every connection thread shares.
struct Shared {
    backend: Box<dyn Backend>,
    cfg: ServerConfig,
    model_id: String,
    max_seq: usize,
    /// Unix seconds when the server was bound (the model's `created`).
    created: u64,
    admitted: AtomicUsize,
    connections: AtomicUsize,
    shutdown: AtomicBool,
    metrics: metrics::Metrics,
}

/// A bound server; [`Server::run`] serves on this thread, [`Server::spawn`] on a new one.
pub struct Server {
    listener: TcpListener,
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.addr)
            .field("model_id", &self.shared.model_id)
            .finish()
    }
}

impl Server {
    /// Binds `addr` (port 0 picks a free port; see [`Server::local_addr`]). Fails with
    /// `InvalidInput` when `cfg.max_concurrent` or `cfg.max_body_bytes` is 0.
    pub fn bind(
        addr: impl ToSocketAddrs,
        backend: impl Backend,
        cfg: ServerConfig,
    ) -> io::Result<Server> {
        if cfg.max_concurrent == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "max_concurrent must be at least 1",
            ));
        }
        if cfg.max_body_bytes == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "max_body_bytes must be at least 1",
            ));
        }
        let mut cfg = cfg;
        cfg.max_connections = cfg.max_connections.max(cfg.max_concurrent + 1);
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let model_id = cfg.model_id.clone().unwrap_or_else(|| backend.model_id());
        let max_seq = backend.max_seq();
        let created = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let shared = Arc::new(Shared {
            backend: Box::new(backend),
            cfg,
            model_id,
            max_seq,
            created,
            admitted: AtomicUsize::new(0),
            connections: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
            metrics: metrics::Metrics::default(),
        });
        Ok(Server {
            listener,
            addr,
            shared,
        })
    }

    /// The address the server listens on (with the real port when bound to port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.addr)
    }

    /// Serves until [`ServerHandle::shutdown`] (when spawned); blocks the calling thread.
    pub fn run(self) -> io::Result<()> {
        accept_loop(&self.listener, &self.shared);
        Ok(())
    }

    /// Serves on a background thread.
    pub fn spawn(self) -> ServerHandle {
        let (addr, shared) = (self.addr, self.shared.clone());
        let thread = std::thread::Builder::new()
            .name("metainfer-server".into())
            .spawn(move || self.run())
            .expect("cannot spawn the server thread");
        ServerHandle {
            addr,
            shared,
            thread: Some(thread),
        }
    }
}

/// A server running on a background thread; dropping it shuts the server down.
pub struct ServerHandle {
    addr: SocketAddr,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl std::fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerHandle")
            .field("addr", &self.addr)
            .finish()
    }
}

impl ServerHandle {
    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting connections, cancels the generation in flight and waits for the accept
    /// loop to end. Connections already accepted finish on their own threads.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        self.shared.shutdown.store(true, Ordering::SeqCst);
        // Wake the blocking accept with a connection of our own.
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
        let _ = thread.join();
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Decrements a counter when dropped.
struct CountGuard(Arc<Shared>, fn(&Shared) -> &AtomicUsize);

impl Drop for CountGuard {
    fn drop(&mut self) {
        (self.1)(&self.0).fetch_sub(1, Ordering::SeqCst);
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    for conn in listener.incoming() {
        if shared.shutdown.load(Ordering::SeqCst) {
            break;
        }
        let stream = match conn {
            Ok(s) => s,
            Err(e) => {
                // e.g. out of file descriptors: back off instead of spinning.
                if shared.cfg.log {
                    eprintln!("[metainfer-server] accept failed: {e}");
                }
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
        };
        let open = shared.connections.fetch_add(1, Ordering::SeqCst);
        let guard = CountGuard(shared.clone(), |s| &s.connections);
        if open >= shared.cfg.max_connections {
            http::refuse_overloaded(stream, shared);
            drop(guard);
            continue;
        }
        let sh = shared.clone();
        // On a spawn failure the closure (stream and guard) is dropped: the connection closes.
        let _ = std::thread::Builder::new()
            .name("metainfer-http".into())
            .spawn(move || {
                let _guard = guard;
                http::handle_connection(stream, &sh);
            });
    }
}
