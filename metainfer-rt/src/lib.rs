//! The runtime vocabulary every MetaInfer-generated engine shares.
//!
//! A generated engine (`cache/<key>/engine.rs`) is one file of plain Rust. It refers to this
//! crate only as `rt::…`: the crate that includes it (the `#[metainfer::engine]` expansion, or
//! the verifier's scratch crate) binds `rt` to this crate before the `include!`. Everything an
//! engine needs from outside `std` comes through here, so a user depends on `metainfer` only:
//!
//! - [`Error`]: the one error type of every engine, with a variant per kind of bad input;
//! - [`GenParams`], [`Message`], [`Stats`]: what generation takes and reports;
//! - [`ToolCall`] and [`ToolCallParser`]: the calls of functions a chat reply makes;
//! - the runtime crates engines use, re-exported: [`memmap2`], [`half`], [`minijinja`],
//!   [`minijinja_contrib`], [`fancy_regex`], [`serde_json`];
//! - with the cargo feature `server`, [`server`]: an OpenAI-compatible HTTP server over an
//!   engine;
//! - with the cargo feature `hf`, [`tokenizers`] (Hugging Face checkpoints), and with `cuda`,
//!   [`cudarc`] (the CUDA driver API, loaded at run time) for engines of a cuda target.

#[cfg(feature = "cuda")]
pub use cudarc;
pub use fancy_regex;
pub use half;
pub use memmap2;
pub use minijinja;
pub use minijinja_contrib;
pub use serde_json;
#[cfg(feature = "hf")]
pub use tokenizers;

#[cfg(feature = "server")]
pub mod server;
mod tool_calls;

pub use tool_calls::ToolCallParser;

use std::fmt;
use std::path::PathBuf;

/// Everything that can go wrong in a generated engine. Messages are lowercase, name what was
/// wrong, and say how to fix it where there is a fix.
#[derive(Debug)]
pub enum Error {
    /// The model file could not be opened or mapped.
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The model file is malformed: `field` names the offending part (e.g. `tensor[12].offset`).
    Format { field: String, detail: String },
    /// The model file is well formed but not the one this engine was generated for.
    Mismatch {
        what: String,
        expected: String,
        found: String,
        fix: String,
    },
    /// The prompt plus the requested tokens do not fit the context.
    ContextFull { needed: usize, limit: usize },
    /// A generation parameter is out of range.
    Params(String),
    /// The chat template failed to render.
    Template(String),
    /// The tokenizer data in the model file is unusable.
    Tokenizer(String),
    /// The CPU lacks an instruction set the engine was generated for.
    Unsupported(String),
    /// A CUDA engine found no usable GPU (no driver, no device, or a device older than the
    /// arch it was generated for): the message says which, and what to use instead.
    NoDevice(String),
    /// A CUDA driver call failed while the engine ran (out of memory, a kernel fault).
    Device(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, source } => write!(f, "cannot read model file {}: {source}", path.display()),
            Error::Format { field, detail } => write!(f, "malformed model file: {field}: {detail}"),
            Error::Mismatch { what, expected, found, fix } => write!(
                f,
                "model file does not match this engine: {what} is {found}, but the engine was generated for {expected}; {fix}"
            ),
            Error::ContextFull { needed, limit } => write!(
                f,
                "context full: {needed} tokens needed but the context holds {limit}; shorten the prompt or lower max_tokens"
            ),
            Error::Params(m) => write!(f, "invalid generation parameters: {m}"),
            Error::Template(m) => write!(f, "chat template failed: {m}"),
            Error::Tokenizer(m) => write!(f, "tokenizer: {m}"),
            Error::Unsupported(m) => write!(f, "unsupported cpu: {m}"),
            Error::NoDevice(m) => write!(f, "no usable cuda device: {m}"),
            Error::Device(m) => write!(f, "cuda: {m}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Shorthand used by engines.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A [`Error::Format`] error for `field`.
    pub fn format(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Error::Format {
            field: field.into(),
            detail: detail.into(),
        }
    }
}

/// How to generate: sampling, limits and stop conditions.
#[derive(Debug, Clone, PartialEq)]
pub struct GenParams {
    /// Most tokens to generate.
    pub max_tokens: usize,
    /// 0.0 means greedy (argmax); otherwise logits are divided by it.
    pub temperature: f32,
    /// Keep the k most likely tokens; 0 disables.
    pub top_k: usize,
    /// Keep the smallest set whose probability reaches p; 1.0 disables.
    pub top_p: f32,
    /// Drop tokens whose probability is below min_p × the top probability; 0.0 disables.
    pub min_p: f32,
    /// Penalty (> 1 discourages) on tokens among the last `repeat_last_n`; 1.0 disables.
    pub repeat_penalty: f32,
    /// Subtracted from a token's logit once per time it is among the last `repeat_last_n`
    /// (OpenAI's `frequency_penalty`, applied over llama.cpp's window); 0.0 disables. In [-2, 2].
    pub frequency_penalty: f32,
    /// Subtracted from a token's logit once if it is among the last `repeat_last_n` (OpenAI's
    /// `presence_penalty`); 0.0 disables. In [-2, 2].
    pub presence_penalty: f32,
    /// How many recent tokens (prompt and generated) the three penalties look at.
    pub repeat_last_n: usize,
    /// Added to these token ids' logits before everything else (OpenAI's `logit_bias`: -100
    /// bans a token, 100 all but forces it); ids past the vocabulary are ignored. In [-100, 100].
    pub logit_bias: Vec<(u32, f32)>,
    /// Seed of the sampler's random number generator.
    pub seed: u64,
    /// Generation stops when the text ends with one of these (the stop string is not returned).
    pub stop: Vec<String>,
    /// Stop at the model's end-of-sequence / end-of-turn tokens.
    pub stop_at_eos: bool,
}

impl GenParams {
    /// Greedy decoding of at most `max_tokens` tokens.
    pub fn greedy(max_tokens: usize) -> Self {
        GenParams {
            max_tokens,
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repeat_penalty: 1.0,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            repeat_last_n: 64,
            logit_bias: Vec::new(),
            seed: 0,
            stop: Vec::new(),
            stop_at_eos: true,
        }
    }

    /// Sampling with `temperature` and common defaults (top-k 40, top-p 0.95, min-p 0.05).
    pub fn sampled(max_tokens: usize, temperature: f32, seed: u64) -> Self {
        GenParams {
            temperature,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            seed,
            ..Self::greedy(max_tokens)
        }
    }

    /// Checks every field's range; the message names the field and its allowed range.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Params(m));
        if !(self.temperature >= 0.0 && self.temperature.is_finite()) {
            return bad(format!(
                "temperature is {}, must be a finite number >= 0",
                self.temperature
            ));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad(format!("top_p is {}, must be in (0, 1]", self.top_p));
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return bad(format!("min_p is {}, must be in [0, 1]", self.min_p));
        }
        if !(self.repeat_penalty > 0.0 && self.repeat_penalty.is_finite()) {
            return bad(format!(
                "repeat_penalty is {}, must be a finite number > 0",
                self.repeat_penalty
            ));
        }
        for (name, x) in [
            ("frequency_penalty", self.frequency_penalty),
            ("presence_penalty", self.presence_penalty),
        ] {
            if !(-2.0..=2.0).contains(&x) {
                return bad(format!("{name} is {x}, must be in [-2, 2]"));
            }
        }
        if let Some((id, b)) = self
            .logit_bias
            .iter()
            .find(|b| !(-100.0..=100.0).contains(&b.1))
        {
            return bad(format!(
                "logit_bias of token {id} is {b}, must be in [-100, 100]"
            ));
        }
        if self.stop.iter().any(|s| s.is_empty()) {
            return bad("stop strings must not be empty".into());
        }
        Ok(())
    }
}

impl Default for GenParams {
    fn default() -> Self {
        Self::greedy(256)
    }
}

/// One sequence's part of an engine's `step` (several sequences in one pass, each in its own
/// KV slot): `tokens` at positions `pos..pos + tokens.len()` of slot `slot`; the slot's cached
/// positions from `pos` on are dropped first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Work<'a> {
    pub slot: usize,
    pub tokens: &'a [u32],
    pub pos: usize,
}

/// Extra variables for a chat template, as transformers' `apply_chat_template(**kwargs)` and
/// the OpenAI-compatible servers' `chat_template_kwargs` pass them: `{"enable_thinking": false}`
/// for Qwen3's template, for example. They may not name the variables the engine sets itself
/// ([`TEMPLATE_ENGINE_VARS`]).
pub type TemplateKwargs = serde_json::Map<String, serde_json::Value>;

/// The chat template variables an engine sets itself, which [`TemplateKwargs`] may not name:
/// the engines refuse them with [`Error::Template`], the server with a 400.
pub const TEMPLATE_ENGINE_VARS: [&str; 4] = [
    "messages",
    "add_generation_prompt",
    "bos_token",
    "eos_token",
];

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Message {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    pub content: String,
    /// An assistant turn's calls of functions (empty for other turns and plain answers).
    pub tool_calls: Vec<ToolCall>,
    /// A `tool` message: the id of the call whose result it carries.
    pub tool_call_id: Option<String>,
}

impl Message {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Message {
            role: role.into(),
            content: content.into(),
            ..Message::default()
        }
    }
    pub fn system(content: impl Into<String>) -> Self {
        Self::new("system", content)
    }
    pub fn user(content: impl Into<String>) -> Self {
        Self::new("user", content)
    }
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new("assistant", content)
    }
    /// An assistant turn that called functions (its `content` may be empty).
    pub fn assistant_calls(content: impl Into<String>, calls: Vec<ToolCall>) -> Self {
        Message {
            tool_calls: calls,
            ..Self::new("assistant", content)
        }
    }
    /// A function's result, answering the call with id `call_id`.
    pub fn tool(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Message {
            tool_call_id: Some(call_id.into()),
            ..Self::new("tool", content)
        }
    }

    /// The message as chat templates read it, transformers' message dict: `role` and
    /// `content`; where set, `tool_calls` (`[{id, type: "function", function: {name,
    /// arguments}}]`, the arguments as the JSON object they hold, as vLLM and llama.cpp pass
    /// them to templates, or as the text itself when it is not a JSON object) and `tool_call_id`.
    pub fn template_value(&self) -> serde_json::Value {
        use serde_json::{json, Value};
        let mut m = json!({"role": self.role, "content": self.content});
        if !self.tool_calls.is_empty() {
            let calls = self.tool_calls.iter().map(|c| {
                let args = match serde_json::from_str::<Value>(&c.arguments) {
                    Ok(v @ Value::Object(_)) => v,
                    _ => Value::String(c.arguments.clone()),
                };
                json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": args}})
            });
            m["tool_calls"] = Value::Array(calls.collect());
        }
        if let Some(id) = &self.tool_call_id {
            m["tool_call_id"] = json!(id);
        }
        m
    }
}

/// A call of a function (OpenAI's `tool_calls[i]`): one a reply made ([`ToolCallParser`]), or
/// one of an earlier assistant turn's in a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolCall {
    /// The call's id (`call_…`), which the `tool` message with its result names.
    pub id: String,
    /// The function's name.
    pub name: String,
    /// Its arguments: JSON text, normally an object (`{"city": "Paris"}`), as OpenAI sends them.
    pub arguments: String,
}

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FinishReason {
    /// `max_tokens` reached.
    #[default]
    Length,
    /// An end-of-sequence token or a stop string.
    Stop,
    /// The token callback asked to stop (e.g. the client went away).
    Cancelled,
}

/// What one generation did and how fast.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    pub prompt_tokens: usize,
    pub gen_tokens: usize,
    /// Seconds spent on the prompt (prefill).
    pub prefill_s: f64,
    /// Seconds spent generating after the prompt (decode).
    pub decode_s: f64,
    pub finish: FinishReason,
}

impl Stats {
    /// Prompt tokens per second.
    pub fn pp_tok_s(&self) -> f64 {
        if self.prefill_s > 0.0 {
            self.prompt_tokens as f64 / self.prefill_s
        } else {
            0.0
        }
    }
    /// Generated tokens per second (the first generated token comes from the prefill logits).
    pub fn tg_tok_s(&self) -> f64 {
        if self.decode_s > 0.0 {
            self.gen_tokens.saturating_sub(1) as f64 / self.decode_s
        } else {
            0.0
        }
    }
}

/// 64 random bits (std's per-process hash keys over a counter and the clock): request and call
/// ids, default seeds. Not for cryptography.
pub(crate) fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    h.write_u128(now);
    h.finish()
}
