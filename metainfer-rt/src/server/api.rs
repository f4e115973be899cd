//! The OpenAI request bodies → [`GenParams`], and the generation with its response (plain or
//! an event stream).

use super::http::{ApiError, Conn, LogExtra};
use super::reasoning::{opens_think, ThinkSplit};
use super::tools::{calls_json, message_calls, ReplyCalls, Tools};
use super::{ReasoningFormat, Shared};
use crate::random_u64;
use crate::serde_json::{json, Map, Value};
use crate::{Error, FinishReason, GenParams, Message, TemplateKwargs, TEMPLATE_ENGINE_VARS};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The one model's `/v1/models` entry.
pub(crate) fn model_object(shared: &Shared) -> Value {
    json!({
        "id": shared.model_id,
        "object": "model",
        "created": shared.created,
        "owned_by": "metainfer",
        "context_length": shared.max_seq,
    })
}

pub(crate) enum Input {
    /// The messages and the chat template variables (the server's, then the request's).
    Messages(Vec<Message>, TemplateKwargs),
    Prompt(String),
}

/// A validated generation request.
pub(crate) struct GenRequest {
    chat: bool,
    input: Input,
    /// `max_tokens` is set when the prompt is counted.
    params: GenParams,
    max_tokens: Option<usize>,
    stream: bool,
    include_usage: bool,
    /// Chat: the request's `reasoning_format`, else the server's (completions: `None`).
    reasoning: ReasoningFormat,
    /// Chat: the functions offered (`tools`, unless `tool_choice` is `none`).
    tools: Option<Tools>,
}

pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The field, `null` counting as absent.
pub(crate) fn get<'a>(o: &'a Map<String, Value>, k: &str) -> Option<&'a Value> {
    o.get(k).filter(|v| !v.is_null())
}

fn num(o: &Map<String, Value>, k: &str) -> Result<Option<f32>, ApiError> {
    match get(o, k) {
        None => Ok(None),
        Some(v) => v.as_f64().map(|x| Some(x as f32)).ok_or_else(|| {
            ApiError::invalid(format!("'{k}' must be a number, not {}", kind(v))).param(k)
        }),
    }
}

fn uint(o: &Map<String, Value>, k: &str) -> Result<Option<u64>, ApiError> {
    match get(o, k) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .or_else(|| {
                v.as_f64()
                    .filter(|x| *x >= 0.0 && x.fract() == 0.0 && *x < 1.8e19)
                    .map(|x| x as u64)
            })
            .map(Some)
            .ok_or_else(|| {
                ApiError::invalid(format!("'{k}' must be a non-negative integer, not {v}")).param(k)
            }),
    }
}

fn boolean(o: &Map<String, Value>, k: &str) -> Result<Option<bool>, ApiError> {
    match get(o, k) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => {
            Err(ApiError::invalid(format!("'{k}' must be a boolean, not {}", kind(v))).param(k))
        }
    }
}

fn to_usize(x: u64) -> usize {
    usize::try_from(x).unwrap_or(usize::MAX)
}

/// `stop`: a string or an array of strings.
fn stops(o: &Map<String, Value>) -> Result<Vec<String>, ApiError> {
    match get(o, "stop") {
        None => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(Value::Array(a)) => a
            .iter()
            .map(|s| {
                s.as_str().map(str::to_string).ok_or_else(|| {
                    ApiError::invalid(format!("'stop' must hold strings, not {}", kind(s)))
                        .param("stop")
                })
            })
            .collect(),
        Some(v) => Err(ApiError::invalid(format!(
            "'stop' must be a string or an array of strings, not {}",
            kind(v)
        ))
        .param("stop")),
    }
}

/// A message's `content`: a string, text parts, or null.
fn content(v: Option<&Value>, at: &str) -> Result<String, ApiError> {
    match v {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut out = String::new();
            for (j, part) in parts.iter().enumerate() {
                let pat = format!("{at}.content[{j}]");
                let Some(po) = part.as_object() else {
                    return Err(ApiError::invalid(format!(
                        "{pat} must be an object like {{\"type\":\"text\",\"text\":\"…\"}}"
                    ))
                    .param(pat));
                };
                match po.get("type").and_then(Value::as_str) {
                    Some("text") => match po.get("text").and_then(Value::as_str) {
                        Some(t) => out.push_str(t),
                        None => {
                            return Err(ApiError::invalid(format!("{pat}.text must be a string"))
                                .param(pat))
                        }
                    },
                    Some(t) => {
                        return Err(ApiError::invalid(format!(
                            "{pat} has type '{t}'; only text content parts are supported"
                        ))
                        .param(pat))
                    }
                    None => {
                        return Err(ApiError::invalid(format!("{pat} has no 'type'")).param(pat))
                    }
                }
            }
            Ok(out)
        }
        Some(v) => Err(ApiError::invalid(format!(
            "{at}.content must be a string or an array of text parts, not {}",
            kind(v)
        ))
        .param(format!("{at}.content"))),
    }
}

fn messages(o: &Map<String, Value>) -> Result<Vec<Message>, ApiError> {
    let v = get(o, "messages")
        .ok_or_else(|| ApiError::invalid("'messages' is required").param("messages"))?;
    let arr = v.as_array().ok_or_else(|| {
        ApiError::invalid(format!("'messages' must be an array, not {}", kind(v))).param("messages")
    })?;
    if arr.is_empty() {
        return Err(
            ApiError::invalid("'messages' must hold at least one message").param("messages"),
        );
    }
    arr.iter()
        .enumerate()
        .map(|(i, m)| {
            let at = format!("messages[{i}]");
            let mo = m.as_object().ok_or_else(|| {
                ApiError::invalid(format!("{at} must be an object")).param(at.clone())
            })?;
            let role = match mo.get("role").and_then(Value::as_str) {
                Some(r @ ("system" | "user" | "assistant" | "tool")) => r,
                Some("developer") => "system",
                Some(r) => {
                    return Err(ApiError::invalid(format!(
                        "{at}.role is '{r}'; use system, developer, user, assistant or tool"
                    ))
                    .param(format!("{at}.role")))
                }
                None => {
                    return Err(
                        ApiError::invalid(format!("{at}.role is required (a string)"))
                            .param(format!("{at}.role")),
                    )
                }
            };
            let mut msg = Message::new(role, content(mo.get("content"), &at)?);
            if let Some(calls) = get(mo, "tool_calls") {
                if role != "assistant" {
                    return Err(ApiError::invalid(format!(
                        "{at} has tool_calls, which only assistant messages carry"
                    ))
                    .param(format!("{at}.tool_calls")));
                }
                msg.tool_calls = message_calls(calls, &at)?;
            }
            match get(mo, "tool_call_id") {
                None => {}
                Some(Value::String(id)) if role == "tool" => msg.tool_call_id = Some(id.clone()),
                Some(_) => {
                    return Err(ApiError::invalid(format!(
                        "{at}.tool_call_id must be a string, on a tool message"
                    ))
                    .param(format!("{at}.tool_call_id")))
                }
            }
            Ok(msg)
        })
        .collect()
}

/// `chat_template_kwargs` over the server's defaults: an object whose keys are not the engine's
/// own variables.
fn template_kwargs(
    o: &Map<String, Value>,
    defaults: &TemplateKwargs,
) -> Result<TemplateKwargs, ApiError> {
    let k = "chat_template_kwargs";
    let mut out = defaults.clone();
    match get(o, k) {
        None => {}
        Some(Value::Object(m)) => {
            if let Some(own) = m
                .keys()
                .find(|key| TEMPLATE_ENGINE_VARS.contains(&key.as_str()))
            {
                return Err(ApiError::invalid(format!(
                    "'{k}' may not set '{own}': the server sets it from the request"
                ))
                .param(k));
            }
            out.extend(m.iter().map(|(key, v)| (key.clone(), v.clone())));
        }
        Some(v) => {
            return Err(ApiError::invalid(format!(
                "'{k}' must be an object like {{\"enable_thinking\": false}}, not {}",
                kind(v)
            ))
            .param(k))
        }
    }
    Ok(out)
}

fn prompt(o: &Map<String, Value>) -> Result<String, ApiError> {
    let bad = |m: String| ApiError::invalid(m).param("prompt");
    match get(o, "prompt") {
        None => Err(bad("'prompt' is required".into())),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(a)) => match a.as_slice() {
            [Value::String(s)] => Ok(s.clone()),
            [] => Err(bad("'prompt' is an empty array; send one string".into())),
            [Value::String(_), ..] => Err(bad(format!(
                "'prompt' holds {} prompts; this server takes one per request",
                a.len()
            ))),
            _ => Err(bad(
                "'prompt' as token ids is not supported; send the text".into()
            )),
        },
        Some(v) => Err(bad(format!("'prompt' must be a string, not {}", kind(v)))),
    }
}

/// Fields that ask for something this server cannot do.
fn refuse_unsupported(o: &Map<String, Value>, chat: bool) -> Result<(), ApiError> {
    let unsupported = |k: &str, why: &str| {
        Err(ApiError::invalid(format!("'{k}' is not supported: {why}")).param(k))
    };
    if let Some(n) = uint(o, "n")? {
        if n != 1 {
            return Err(ApiError::invalid(format!(
                "'n' is {n}; this server generates one choice per request (n = 1)"
            ))
            .param("n"));
        }
    }
    if let Some(b) = uint(o, "best_of")? {
        if b != 1 {
            return Err(
                ApiError::invalid(format!("'best_of' is {b}; only 1 is supported"))
                    .param("best_of"),
            );
        }
    }
    match get(o, "logprobs") {
        None | Some(Value::Bool(false)) => {}
        Some(_) => return unsupported("logprobs", "this server does not return log probabilities"),
    }
    if let Some(rf) = get(o, "response_format") {
        let t = rf.get("type").and_then(Value::as_str);
        if t != Some("text") {
            return unsupported("response_format", "only {\"type\":\"text\"} is");
        }
    }
    if !chat {
        if boolean(o, "echo")? == Some(true) {
            return unsupported("echo", "the prompt is not echoed");
        }
        if get(o, "suffix").is_some_and(|v| v.as_str() != Some("")) {
            return unsupported("suffix", "there is no fill-in-the-middle");
        }
    }
    Ok(())
}

/// `logit_bias`: `{"token id": bias}` (the ids as the model's tokenizer numbers them).
fn logit_bias(o: &Map<String, Value>) -> Result<Vec<(u32, f32)>, ApiError> {
    let k = "logit_bias";
    let bad = |m: String| Err(ApiError::invalid(m).param(k));
    let m = match get(o, k) {
        None => return Ok(Vec::new()),
        Some(Value::Object(m)) => m,
        Some(v) => {
            return bad(format!(
                "'{k}' must be an object of token ids and biases like {{\"50256\": -100}}, not {}",
                kind(v)
            ))
        }
    };
    let mut out = Vec::with_capacity(m.len());
    for (id, b) in m {
        let Ok(id_n) = id.parse::<u32>() else {
            return bad(format!(
                "'{k}' key '{id}' is not a token id (a non-negative integer)"
            ));
        };
        let Some(b) = b.as_f64() else {
            return bad(format!(
                "'{k}' of token {id} must be a number, not {}",
                kind(b)
            ));
        };
        out.push((id_n, b as f32));
    }
    Ok(out)
}

/// Parses and validates a chat (`chat`) or completions request body.
pub(crate) fn parse_request(
    v: &Value,
    chat: bool,
    shared: &Shared,
) -> Result<GenRequest, ApiError> {
    let o = v
        .as_object()
        .ok_or_else(|| ApiError::invalid("the request body must be a JSON object"))?;
    refuse_unsupported(o, chat)?;
    let mut tools = None;
    let input = if chat {
        let mut kwargs = template_kwargs(o, &shared.cfg.chat_template_kwargs)?;
        if get(o, "tools").is_some()
            && get(o, "chat_template_kwargs").is_some_and(|k| k.get("tools").is_some())
        {
            return Err(ApiError::invalid(
                "the tools are both in 'tools' and in 'chat_template_kwargs'; send them in 'tools'",
            )
            .param("tools"));
        }
        tools = super::tools::tools(o, &mut kwargs)?;
        Input::Messages(messages(o)?, kwargs)
    } else {
        for (k, why) in [
            (
                "chat_template_kwargs",
                "a completion's prompt is not templated",
            ),
            (
                "reasoning_format",
                "a completion's text is returned as written",
            ),
            ("tools", "a completion's text is returned as written"),
        ] {
            if get(o, k).is_some() {
                return Err(ApiError::invalid(format!(
                    "'{k}' applies to /v1/chat/completions; {why}"
                ))
                .param(k));
            }
        }
        Input::Prompt(prompt(o)?)
    };
    let reasoning = match get(o, "reasoning_format") {
        None => shared.cfg.reasoning_format,
        Some(Value::String(s)) => s
            .parse()
            .map_err(|e: String| ApiError::invalid(e).param("reasoning_format"))?,
        Some(v) => {
            return Err(ApiError::invalid(format!(
                "'reasoning_format' must be a string (none or deepseek), not {}",
                kind(v)
            ))
            .param("reasoning_format"))
        }
    };
    let max_tokens = if chat {
        match uint(o, "max_completion_tokens")? {
            Some(m) => Some(m),
            None => uint(o, "max_tokens")?,
        }
    } else {
        uint(o, "max_tokens")?
    }
    .map(to_usize);
    let d = GenParams::sampled(shared.cfg.default_max_tokens, 1.0, 0);
    let seed = match get(o, "seed") {
        None => random_u64(),
        Some(s) => s
            .as_u64()
            .or_else(|| s.as_i64().map(|i| i as u64))
            .ok_or_else(|| {
                ApiError::invalid(format!("'seed' must be an integer, not {s}")).param("seed")
            })?,
    };
    let params = GenParams {
        max_tokens: max_tokens.unwrap_or(d.max_tokens),
        temperature: num(o, "temperature")?.unwrap_or(d.temperature),
        top_k: uint(o, "top_k")?.map(to_usize).unwrap_or(d.top_k),
        top_p: num(o, "top_p")?.unwrap_or(d.top_p),
        min_p: num(o, "min_p")?.unwrap_or(d.min_p),
        repeat_penalty: num(o, "repeat_penalty")?.unwrap_or(d.repeat_penalty),
        frequency_penalty: num(o, "frequency_penalty")?.unwrap_or(d.frequency_penalty),
        presence_penalty: num(o, "presence_penalty")?.unwrap_or(d.presence_penalty),
        repeat_last_n: uint(o, "repeat_last_n")?
            .map(to_usize)
            .unwrap_or(d.repeat_last_n),
        logit_bias: logit_bias(o)?,
        seed,
        stop: stops(o)?,
        stop_at_eos: !boolean(o, "ignore_eos")?.unwrap_or(false),
    };
    if let Err(e) = params.validate() {
        let param = match &e {
            Error::Params(m) => [
                "temperature",
                "top_p",
                "min_p",
                "repeat_penalty",
                "frequency_penalty",
                "presence_penalty",
                "logit_bias",
                "stop",
            ]
            .into_iter()
            .find(|p| m.starts_with(p)),
            _ => None,
        };
        let mut err = ApiError::invalid(e.to_string());
        err.param = param.map(str::to_string);
        return Err(err);
    }
    let stream = boolean(o, "stream")?.unwrap_or(false);
    let include_usage = match get(o, "stream_options") {
        None => false,
        Some(Value::Object(so)) => boolean(so, "include_usage")?.unwrap_or(false),
        Some(v) => {
            return Err(ApiError::invalid(format!(
                "'stream_options' must be an object, not {}",
                kind(v)
            ))
            .param("stream_options"))
        }
    };
    Ok(GenRequest {
        chat,
        input,
        params,
        max_tokens,
        stream,
        include_usage,
        reasoning,
        tools,
    })
}

fn context_error(prompt: usize, completion: usize, limit: usize, chat: bool) -> ApiError {
    let what = if chat { "messages" } else { "prompt" };
    ApiError::invalid(format!(
        "this model's maximum context length is {limit} tokens, but {} tokens were requested ({prompt} in the {what}, {completion} for the completion); shorten the {what} or lower max_tokens",
        prompt.saturating_add(completion)
    ))
    .param(what)
    .code("context_length_exceeded")
}

/// An engine error as the response it makes.
fn engine_error(e: &Error, chat: bool) -> ApiError {
    match e {
        Error::ContextFull { .. } => ApiError::invalid(e.to_string())
            .param(if chat { "messages" } else { "prompt" })
            .code("context_length_exceeded"),
        Error::Params(_) | Error::Template(_) => ApiError::invalid(e.to_string()),
        _ => ApiError::new(500, "server_error", format!("the engine failed: {e}")),
    }
}

/// OpenAI's `finish_reason`: `tool_calls` when the reply called functions and was not cut off.
fn finish_reason(f: FinishReason, calls: usize) -> &'static str {
    match f {
        FinishReason::Length => "length",
        FinishReason::Stop | FinishReason::Cancelled if calls > 0 => "tool_calls",
        FinishReason::Stop | FinishReason::Cancelled => "stop",
    }
}

/// Writes the pieces of a streamed response and watches the client.
struct Emitter<'a> {
    conn: &'a mut Conn,
    chat: bool,
    stream: bool,
    include_usage: bool,
    id: String,
    created: u64,
    model: &'a str,
    shutdown: &'a AtomicBool,
    started: bool,
    gone: bool,
    pieces: usize,
    /// Chat replies with ReasoningFormat::Deepseek: the split of the text so far.
    split: Option<ThinkSplit>,
    /// Chat replies offered tools: the calls in the content so far.
    calls: Option<ReplyCalls>,
}

impl Emitter<'_> {
    /// A chunk with one choice (`None`: no choices, for the usage chunk).
    fn chunk(&self, choice: Option<Value>, usage: Option<Value>) -> Value {
        let object = if self.chat {
            "chat.completion.chunk"
        } else {
            "text_completion"
        };
        let mut c = json!({
            "id": self.id,
            "object": object,
            "created": self.created,
            "model": self.model,
            "choices": choice.into_iter().collect::<Vec<_>>(),
        });
        if self.include_usage {
            c["usage"] = usage.unwrap_or(Value::Null);
        }
        c
    }

    fn choice(&self, text: &str, finish: Option<&str>) -> Value {
        if self.chat {
            let delta = if finish.is_some() {
                json!({})
            } else {
                json!({"content": text})
            };
            json!({"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish})
        } else {
            json!({"index": 0, "text": text, "logprobs": null, "finish_reason": finish})
        }
    }

    /// Passes a chat reply's text that became final (`piece`, or at the end `None`: what the
    /// splitters held) through the reasoning split and the call parser, and sends a chunk with
    /// the reasoning, content and calls that came out, if any.
    fn send_chat(&mut self, piece: Option<&str>) -> bool {
        let (reasoning, content) = match (&mut self.split, piece) {
            (Some(s), Some(p)) => s.push(p),
            (Some(s), None) => s.finish(),
            (None, p) => (String::new(), p.unwrap_or("").to_string()),
        };
        let (content, calls) = match (&mut self.calls, piece) {
            (Some(c), Some(_)) => c.push(&content),
            (Some(c), None) => c.end(&content),
            (None, _) => (content, Vec::new()),
        };
        let mut delta = json!({});
        if !reasoning.is_empty() {
            delta["reasoning_content"] = json!(reasoning);
        }
        if !content.is_empty() {
            delta["content"] = json!(content);
        }
        if !calls.is_empty() {
            let made = self.calls.as_ref().map_or(0, |c| c.made);
            delta["tool_calls"] = calls_json(&calls, Some(made - calls.len()));
        }
        if delta.as_object().is_some_and(|d| d.is_empty()) {
            return true;
        }
        let c = json!({"index": 0, "delta": delta, "logprobs": null, "finish_reason": null});
        let c = self.chunk(Some(c), None);
        self.send(&c)
    }

    fn send(&mut self, v: &Value) -> bool {
        if self.conn.sse(&v.to_string()).is_err() {
            self.gone = true;
        }
        !self.gone
    }

    /// The status line, headers and (chat) the role chunk.
    fn start(&mut self) -> bool {
        if self.started {
            return !self.gone;
        }
        self.started = true;
        if self.conn.start_sse().is_err() {
            self.gone = true;
            return false;
        }
        if self.chat {
            let c = json!({"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null, "finish_reason": null});
            let c = self.chunk(Some(c), None);
            return self.send(&c);
        }
        true
    }

    /// The callback the backend calls per piece: false stops generation.
    fn piece(&mut self, text: &str) -> bool {
        if self.gone || self.shutdown.load(Ordering::Relaxed) {
            return false;
        }
        if self.stream && !text.is_empty() {
            if !self.start() {
                return false;
            }
            self.pieces += 1;
            if self.chat {
                if !self.send_chat(Some(text)) {
                    return false;
                }
            } else {
                let c = self.chunk(Some(self.choice(text, None)), None);
                if !self.send(&c) {
                    return false;
                }
            }
        }
        if self.conn.peer_gone() {
            self.gone = true;
            return false;
        }
        true
    }
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// Runs an admitted request on the engine and writes its response.
pub(crate) fn generate(
    conn: &mut Conn,
    shared: &Arc<Shared>,
    req: GenRequest,
    extra: &mut LogExtra,
) -> Result<(), ApiError> {
    let backend = &shared.backend;
    if conn.peer_gone() {
        extra.text = " client gone before generation".into();
        extra.cancelled = true;
        return Ok(());
    }
    let chat = req.chat;
    let n_prompt = match &req.input {
        Input::Prompt(p) => Some(backend.count_tokens(p)),
        Input::Messages(m, kw) => backend.count_chat_tokens(m, kw),
    };
    let (mut split, mut calls) = (None, None);
    if let Input::Messages(m, kw) = &req.input {
        let deepseek = req.reasoning == ReasoningFormat::Deepseek;
        let prompt = match deepseek || req.tools.is_some() {
            true => backend.chat_prompt(m, kw),
            false => None,
        };
        // a chat reply split into reasoning and content starts inside the think block when the
        // template's generation prompt opens it (DeepSeek-R1's, Qwen3 Thinking-2507's)
        if deepseek {
            split = Some(ThinkSplit::new(prompt.as_deref().is_some_and(opens_think)));
        }
        if let Some(t) = &req.tools {
            let mut without = kw.clone();
            without.remove("tools");
            if prompt.is_some() && prompt == backend.chat_prompt(m, &without) {
                return Err(ApiError::invalid(
                    "the model's chat template does not use tools (it renders the same prompt with them and without), so this model cannot be offered functions; describe them in a system message, or serve it with a chat template that takes tools",
                )
                .param("tools"));
            }
            calls = Some(ReplyCalls::new(t));
        }
    }
    let limit = shared.max_seq;
    let mut p = req.params;
    p.max_tokens = match (req.max_tokens, n_prompt) {
        (Some(m), Some(n)) if n.saturating_add(m) > limit => {
            return Err(context_error(n, m, limit, chat))
        }
        (Some(m), _) => m,
        (None, Some(n)) if n >= limit => return Err(context_error(n, 0, limit, chat)),
        (None, Some(n)) => shared.cfg.default_max_tokens.min(limit - n),
        (None, None) => shared.cfg.default_max_tokens,
    };
    let created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let id = format!(
        "{}-{:016x}{:08x}",
        if chat { "chatcmpl" } else { "cmpl" },
        random_u64(),
        random_u64() as u32
    );
    let mut em = Emitter {
        conn,
        chat,
        stream: req.stream,
        include_usage: req.stream && req.include_usage,
        id,
        created,
        model: &shared.model_id,
        shutdown: &shared.shutdown,
        started: false,
        gone: false,
        pieces: 0,
        split,
        calls,
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut on_text = |piece: &str| em.piece(piece);
        match &req.input {
            Input::Prompt(s) => backend.complete(s, &p, &mut on_text),
            Input::Messages(m, kw) => backend.chat(m, kw, &p, &mut on_text),
        }
    }));
    let failure = match result {
        Err(panic) => Err(ApiError::new(
            500,
            "server_error",
            format!("the engine panicked: {}", panic_message(&*panic)),
        )),
        Ok(Err(e)) => Err(engine_error(&e, chat)),
        Ok(Ok(r)) => Ok(r),
    };
    let (text, stats) = match failure {
        Ok(r) => r,
        Err(e) => {
            extra.text = format!(" error: {}", e.message);
            if em.gone {
                extra.cancelled = true;
                return Ok(());
            }
            if !em.started {
                return Err(e);
            }
            // Mid-stream: the status is sent already.
            if em.send(&e.body()) {
                let _ = em.conn.sse("[DONE]");
            }
            return Ok(());
        }
    };
    shared.metrics.generation(
        stats.prompt_tokens,
        stats.gen_tokens,
        stats.prefill_s,
        stats.decode_s,
    );
    let usage = {
        let prompt_tokens = n_prompt.unwrap_or(stats.prompt_tokens);
        json!({"prompt_tokens": prompt_tokens, "completion_tokens": stats.gen_tokens, "total_tokens": prompt_tokens + stats.gen_tokens})
    };
    extra.text = format!(
        " prompt={} gen={} finish={:?}",
        usage["prompt_tokens"], stats.gen_tokens, stats.finish
    );
    if em.gone || stats.finish == FinishReason::Cancelled {
        extra.cancelled = true;
        extra.text.push_str(if em.gone {
            " (client gone)"
        } else {
            " (shutdown)"
        });
        return Ok(());
    }
    if em.stream {
        // the client gone while the last chunks went out counts as cancelled
        extra.cancelled = true;
        if !em.start() || (chat && !em.send_chat(None)) {
            return Ok(());
        }
        let finish = finish_reason(stats.finish, em.calls.as_ref().map_or(0, |c| c.made));
        let last = em.chunk(Some(em.choice("", Some(finish))), None);
        if !em.send(&last) {
            return Ok(());
        }
        if em.include_usage {
            let u = em.chunk(None, Some(usage));
            if !em.send(&u) {
                return Ok(());
            }
        }
        extra.cancelled = em.conn.sse("[DONE]").is_err();
        return Ok(());
    }
    let choice = if chat {
        let (reasoning, content) = match em.split.take() {
            Some(split) => split.whole(&text),
            None => (String::new(), text),
        };
        let (content, calls) = match em.calls.as_mut() {
            Some(c) => c.end(&content),
            None => (content, Vec::new()),
        };
        let mut message = json!({"role": "assistant", "content": content});
        if req.reasoning == ReasoningFormat::Deepseek {
            message["reasoning_content"] = json!(reasoning);
        }
        if !calls.is_empty() {
            if content.trim().is_empty() {
                message["content"] = Value::Null;
            }
            message["tool_calls"] = calls_json(&calls, None);
        }
        let finish = finish_reason(stats.finish, calls.len());
        json!({"index": 0, "message": message, "logprobs": null, "finish_reason": finish})
    } else {
        let finish = finish_reason(stats.finish, 0);
        json!({"index": 0, "text": text, "logprobs": null, "finish_reason": finish})
    };
    let object = if chat {
        "chat.completion"
    } else {
        "text_completion"
    };
    let body = json!({
        "id": em.id,
        "object": object,
        "created": created,
        "model": shared.model_id,
        "choices": [choice],
        "usage": usage,
    });
    em.conn.send_json(200, &body, &[]);
    Ok(())
}
