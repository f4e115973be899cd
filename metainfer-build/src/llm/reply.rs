//! Reading replies: a whole `chat.completion` JSON body, or a stream of `chat.completion.chunk`
//! events, into [`ReplyParts`]; and error bodies into a message.

use super::error::LlmError;
use super::Usage;
use serde_json::Value;

/// What a successful reply said, before the client adds timing and attempts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplyParts {
    pub content: String,
    pub model: Option<String>,
    /// The body's `id` (the first chunk's, when streaming).
    pub id: Option<String>,
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
}

/// The first ~200 characters of `body`, whitespace runs collapsed, in backticks, for error
/// messages.
pub fn preview(body: &str) -> String {
    const MAX: usize = 200;
    let collapsed = body.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.is_empty() {
        return "(empty body)".to_string();
    }
    match collapsed.char_indices().nth(MAX) {
        Some((i, _)) => format!("`{}…`", &collapsed[..i]),
        None => format!("`{collapsed}`"),
    }
}

/// An error object's message and type: `{"error": {"message", "type", "code"}}`, also
/// `{"error": "text"}`, `{"message": …}` and `{"detail": …}` as some servers send.
pub fn error_fields(v: &Value) -> Option<(String, Option<String>)> {
    let text = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    };
    if let Some(err) = v.get("error") {
        return match err {
            Value::Object(_) => {
                let message = err
                    .get("message")
                    .and_then(text)
                    .unwrap_or_else(|| err.to_string());
                let kind = err
                    .get("type")
                    .and_then(text)
                    .or_else(|| err.get("code").and_then(text));
                Some((message, kind))
            }
            other => text(other).map(|m| (m, None)),
        };
    }
    v.get("message")
        .or_else(|| v.get("detail"))
        .and_then(text)
        .map(|m| (m, None))
}

/// The message and kind of a non-success response body.
pub fn error_body(body: &str) -> (String, Option<String>) {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| error_fields(&v))
        .unwrap_or_else(|| (preview(body), None))
}

fn str_field(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

fn usage_field(v: &Value) -> Result<Option<Usage>, String> {
    match v.get("usage") {
        None | Some(Value::Null) => Ok(None),
        Some(u) => serde_json::from_value::<Usage>(u.clone())
            .map(Some)
            .map_err(|e| format!("usage is not {{prompt_tokens, completion_tokens}}: {e}")),
    }
}

/// Parses a whole (non-streamed) `chat.completion` body.
pub fn parse_completion(body: &str, request_id: Option<&str>) -> Result<ReplyParts, LlmError> {
    let v: Value = serde_json::from_str(body).map_err(|e| {
        LlmError::protocol(format!("the body is not json ({e}); is base_url an OpenAI-compatible /v1 endpoint? body starts {}", preview(body)))
    })?;
    if !v.is_object() {
        return Err(LlmError::protocol(format!(
            "the body is json but not an object: {}",
            preview(body)
        )));
    }
    if let Some((message, kind)) = v.get("error").and_then(|_| error_fields(&v)) {
        let request_id = request_id
            .map(str::to_string)
            .or_else(|| str_field(&v, "id"));
        return Err(LlmError::InReply {
            message,
            kind,
            request_id,
        });
    }
    let choice = match v.get("choices") {
        Some(Value::Array(c)) if !c.is_empty() => &c[0],
        Some(Value::Array(_)) => {
            return Err(LlmError::protocol_transient(format!(
                "the reply has an empty \"choices\" array: {}",
                preview(body)
            )))
        }
        _ => {
            return Err(LlmError::protocol(format!(
                "the reply has no \"choices\" array: {}",
                preview(body)
            )))
        }
    };
    let content = match choice.get("message").and_then(|m| m.get("content")) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => {
            return Err(LlmError::protocol(format!(
                "choices[0].message.content is not a string but {other}"
            )))
        }
    };
    let finish_reason = str_field(choice, "finish_reason");
    if content.is_empty() {
        return Err(LlmError::protocol_transient(format!(
            "the reply has no content in choices[0].message.content (finish_reason {}): {}",
            finish_reason.as_deref().unwrap_or("none"),
            preview(body)
        )));
    }
    Ok(ReplyParts {
        content,
        model: str_field(&v, "model"),
        id: str_field(&v, "id"),
        finish_reason,
        usage: usage_field(&v).map_err(LlmError::protocol)?,
    })
}

/// Accumulates a streamed reply, one SSE `data` payload at a time.
#[derive(Debug, Default)]
pub struct StreamState {
    parts: ReplyParts,
    done: bool,
    events: usize,
}

impl StreamState {
    pub fn new() -> StreamState {
        StreamState::default()
    }

    /// Whether `data: [DONE]` arrived.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Handles one event's data; content pieces go to `on_delta`. Returns whether the stream
    /// is finished (`[DONE]`).
    pub fn on_data(
        &mut self,
        data: &str,
        request_id: Option<&str>,
        on_delta: &mut dyn FnMut(&str),
    ) -> Result<bool, LlmError> {
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(true);
        }
        self.events += 1;
        let v: Value = serde_json::from_str(data).map_err(|e| {
            LlmError::protocol(format!(
                "stream event {} is not json ({e}): {}",
                self.events,
                preview(data)
            ))
        })?;
        if !v.is_object() {
            return Err(LlmError::protocol(format!(
                "stream event {} is json but not an object: {}",
                self.events,
                preview(data)
            )));
        }
        if v.get("error").is_some() {
            let (message, kind) = error_fields(&v).unwrap_or_else(|| (preview(data), None));
            let request_id = request_id
                .map(str::to_string)
                .or_else(|| self.parts.id.clone())
                .or_else(|| str_field(&v, "id"));
            return Err(LlmError::InReply {
                message,
                kind,
                request_id,
            });
        }
        if self.parts.id.is_none() {
            self.parts.id = str_field(&v, "id");
        }
        if let Some(m) = str_field(&v, "model") {
            self.parts.model = Some(m);
        }
        if let Some(u) = usage_field(&v)
            .map_err(|e| LlmError::protocol(format!("stream event {}: {e}", self.events)))?
        {
            self.parts.usage = Some(u);
        }
        match v.get("choices") {
            Some(Value::Array(choices)) => {
                for choice in choices
                    .iter()
                    .filter(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
                {
                    match choice.get("delta").and_then(|d| d.get("content")) {
                        Some(Value::String(piece)) if !piece.is_empty() => {
                            self.parts.content.push_str(piece);
                            on_delta(piece);
                        }
                        Some(Value::String(_)) | Some(Value::Null) | None => {}
                        Some(other) => {
                            return Err(LlmError::protocol(format!(
                                "stream event {}: delta.content is not a string but {other}",
                                self.events
                            )))
                        }
                    }
                    if let Some(f) = str_field(choice, "finish_reason") {
                        self.parts.finish_reason = Some(f);
                    }
                }
            }
            None if v.get("usage").is_some() => {}
            _ => {
                return Err(LlmError::protocol(format!(
                    "stream event {} has neither a \"choices\" array nor usage: {}",
                    self.events,
                    preview(data)
                )))
            }
        }
        Ok(false)
    }

    /// The reply, once the body ended. `cut` says the parser held an unfinished event.
    pub fn finish(self, cut: bool) -> Result<ReplyParts, LlmError> {
        let StreamState {
            parts,
            done,
            events,
        } = self;
        if !done && parts.finish_reason.is_none() {
            return Err(LlmError::protocol_transient(format!(
                "stream ended early: no `data: [DONE]` and no finish_reason after {events} event{}, {} characters of content{}",
                if events == 1 { "" } else { "s" },
                parts.content.chars().count(),
                if cut { ", last event cut off" } else { "" }
            )));
        }
        if parts.content.is_empty() {
            return Err(LlmError::protocol_transient(format!(
                "the stream carried no content (finish_reason {}, {events} events)",
                parts.finish_reason.as_deref().unwrap_or("none")
            )));
        }
        Ok(parts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completion_ok() {
        let body = r#"{"id":"c1","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}"#;
        let p = parse_completion(body, None).unwrap();
        assert_eq!(p.content, "hi");
        assert_eq!(p.id.as_deref(), Some("c1"));
        assert_eq!(
            p.usage,
            Some(Usage {
                prompt_tokens: 3,
                completion_tokens: 1
            })
        );
    }

    #[test]
    fn completion_garbage() {
        let e = parse_completion("<html><body>Bad gateway</body></html>", None).unwrap_err();
        assert!(
            e.to_string().contains("not json") && e.to_string().contains("<html>"),
            "{e}"
        );
        assert!(!e.is_retryable());
        let e = parse_completion(r#"{"object":"list","data":[]}"#, None).unwrap_err();
        assert!(e.to_string().contains("no \"choices\""), "{e}");
        let e = parse_completion(r#"{"choices":[{"message":{"content":""}}]}"#, None).unwrap_err();
        assert!(e.to_string().contains("no content"), "{e}");
        assert!(e.is_retryable());
        let e = parse_completion(
            r#"{"error":{"message":"overloaded","type":"server_error"}}"#,
            Some("r9"),
        )
        .unwrap_err();
        assert!(
            matches!(&e, LlmError::InReply { request_id: Some(r), .. } if r == "r9"),
            "{e:?}"
        );
        assert!(e.is_retryable());
    }

    #[test]
    fn error_bodies() {
        assert_eq!(
            error_body(
                r#"{"error":{"message":"bad model","type":"invalid_request_error","code":null}}"#
            ),
            ("bad model".into(), Some("invalid_request_error".into()))
        );
        assert_eq!(error_body(r#"{"error":"nope"}"#), ("nope".into(), None));
        assert_eq!(
            error_body(r#"{"detail":"Not Found"}"#),
            ("Not Found".into(), None)
        );
        assert_eq!(error_body("  plain\n text "), ("`plain text`".into(), None));
        assert_eq!(error_body(""), ("(empty body)".into(), None));
        let long = "x".repeat(500);
        assert_eq!(error_body(&long).0.chars().count(), 200 + 3);
    }

    #[test]
    fn stream_states() {
        let mut s = StreamState::new();
        let mut got = String::new();
        let mut cb = |d: &str| got.push_str(d);
        s.on_data(
            r#"{"id":"s1","model":"m","choices":[{"index":0,"delta":{"role":"assistant"}}]}"#,
            None,
            &mut cb,
        )
        .unwrap();
        s.on_data(
            r#"{"id":"s1","choices":[{"index":0,"delta":{"content":"a"}}]}"#,
            None,
            &mut cb,
        )
        .unwrap();
        s.on_data(
            r#"{"id":"s1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            None,
            &mut cb,
        )
        .unwrap();
        s.on_data(
            r#"{"id":"s1","choices":[],"usage":{"prompt_tokens":2,"completion_tokens":1}}"#,
            None,
            &mut cb,
        )
        .unwrap();
        assert!(s.on_data("[DONE]", None, &mut cb).unwrap());
        let p = s.finish(false).unwrap();
        assert_eq!(
            (
                p.content.as_str(),
                p.id.as_deref(),
                p.finish_reason.as_deref()
            ),
            ("a", Some("s1"), Some("stop"))
        );
        assert_eq!(got, "a");

        let mut s = StreamState::new();
        s.on_data(
            r#"{"choices":[{"delta":{"content":"a"}}]}"#,
            None,
            &mut |_| {},
        )
        .unwrap();
        let e = s.finish(true).unwrap_err();
        assert!(
            e.to_string().contains("stream ended early") && e.is_retryable(),
            "{e}"
        );

        let mut s = StreamState::new();
        let e = s
            .on_data(
                r#"{"error":{"message":"boom","type":"server_error"}}"#,
                Some("h1"),
                &mut |_| {},
            )
            .unwrap_err();
        assert!(
            e.to_string().contains("boom") && e.request_id() == Some("h1"),
            "{e}"
        );
        let e = s
            .on_data(
                "{\"choices\":[{\"delta\":{\"content\":\"a",
                None,
                &mut |_| {},
            )
            .unwrap_err();
        assert!(e.to_string().contains("not json"), "{e}");
    }
}
