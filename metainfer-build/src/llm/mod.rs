//! The llm client: one OpenAI-compatible `POST {base_url}/chat/completions` call, done robustly.
//!
//! The chain's `llm` implementer asks a model for code through [`Client::chat`]. Everything that
//! can go wrong between here and the model server is handled in this module, so callers see
//! either a [`ChatReply`] or one typed [`LlmError`] that says what went wrong and how to fix it:
//!
//! - [`config`]: [`LlmConfig`], from `METAINFER_LLM_*` variables and/or a TOML file
//!   (`METAINFER_LLM_CONFIG`), with connect and per-attempt total timeouts;
//! - [`client`]: [`Client`], the request, retries with capped exponential backoff on
//!   timeouts, transport errors, HTTP 408/409/429/5xx and truncated streams, honouring
//!   `retry-after-ms` / `retry-after` hints (a hint above `max_retry_hint` gives up at once);
//! - [`sse`]: [`SseParser`], an incremental, byte-fed server-sent-events parser that survives
//!   events split at any byte;
//! - [`reply`]: turning a JSON body or a stream of chunks into content, usage, model and
//!   request id, and rejecting garbage (HTML, invalid JSON, no choices, empty content);
//! - [`retry`]: backoff and retry-hint arithmetic;
//! - [`error`]: the error type, [`LlmError`], and which of its cases are retryable.
//!
//! Every HTTP attempt, failed ones included, is recorded as an [`Attempt`] in the reply, with
//! its status, the server's request id (`x-request-id`, else the body's `id`) and its duration.

#[cfg(feature = "llm")]
pub mod client;
#[cfg(not(feature = "llm"))]
#[path = "client_off.rs"]
pub mod client;
pub mod config;
pub mod error;
pub mod reply;
pub mod retry;
pub mod sse;

pub use client::Client;
pub use config::LlmConfig;
pub use error::LlmError;
pub use sse::{SseEvent, SseParser};

use serde::{Deserialize, Serialize};

/// One message of a chat conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    /// A message with any role.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content: content.into(),
        }
    }
    /// A `system` message.
    pub fn system(content: impl Into<String>) -> ChatMessage {
        ChatMessage::new("system", content)
    }
    /// A `user` message.
    pub fn user(content: impl Into<String>) -> ChatMessage {
        ChatMessage::new("user", content)
    }
    /// An `assistant` message.
    pub fn assistant(content: impl Into<String>) -> ChatMessage {
        ChatMessage::new("assistant", content)
    }
}

/// What to ask: the conversation and the sampling knobs that are sent when set.
#[derive(Debug, Clone, Default)]
pub struct ChatRequest {
    pub messages: Vec<ChatMessage>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f32>,
    /// Sent as `"stop"` when not empty.
    pub stop: Vec<String>,
    pub seed: Option<u64>,
    /// Sent as llama.cpp's `"repeat_penalty"` when set (see [`LlmConfig::repeat_penalty`]).
    pub repeat_penalty: Option<f32>,
}

/// Token counts the server reported.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// One HTTP attempt of a [`Client::chat`] call, failed ones included.
#[derive(Debug, Clone, Serialize)]
pub struct Attempt {
    /// The HTTP status, when a status line arrived.
    pub status: Option<u16>,
    /// The server's request id (`x-request-id` or `request-id` header, else the body's `id`).
    pub request_id: Option<String>,
    pub elapsed_ms: u64,
    /// Why this attempt failed; `None` for the successful one.
    pub error: Option<String>,
}

/// The answer of a successful [`Client::chat`] call.
#[derive(Debug, Clone, Serialize)]
pub struct ChatReply {
    pub content: String,
    /// The model id the server reported (fallback: the configured one).
    pub model: String,
    /// From the `x-request-id` (or `request-id`) response header, else the body's `id`.
    pub request_id: Option<String>,
    pub finish_reason: Option<String>,
    /// From the body, or from the final usage chunk when streaming.
    pub usage: Option<Usage>,
    /// The whole call, retries and backoff included.
    pub elapsed_ms: u64,
    /// One per HTTP attempt; the last one is the successful one.
    pub attempts: Vec<Attempt>,
}
