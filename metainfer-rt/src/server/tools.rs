//! Function calling: a chat request's `tools`, `tool_choice` and `parallel_tool_calls`, the
//! `tool_calls` of its assistant messages, and the calls a reply makes ([`ToolCallParser`]) as
//! OpenAI's `message.tool_calls` and streamed `delta.tool_calls`.

use super::api::{get, kind};
use super::http::ApiError;
use crate::serde_json::{json, Map, Value};
use crate::{TemplateKwargs, ToolCall, ToolCallParser};

/// The functions a chat request offers.
pub(crate) struct Tools {
    names: Vec<String>,
    /// `parallel_tool_calls` (default true); false keeps a reply's first call only.
    parallel: bool,
}

/// Reads `tools`, `tool_choice` and `parallel_tool_calls`; the tools go to the chat template as
/// its `tools` variable (as the client sent them, as transformers' `apply_chat_template(tools=…)`
/// gets them). `None`: no tools, or `tool_choice: "none"` (then the template does not see them
/// and the reply is all content).
pub(crate) fn tools(
    o: &Map<String, Value>,
    kwargs: &mut TemplateKwargs,
) -> Result<Option<Tools>, ApiError> {
    for k in ["functions", "function_call"] {
        if get(o, k).is_some() {
            return Err(ApiError::invalid(format!(
                "'{k}' is OpenAI's deprecated form of function calling; send 'tools': [{{\"type\": \"function\", \"function\": {{\"name\": …, \"parameters\": …}}}}] (and 'tool_choice')"
            ))
            .param(k));
        }
    }
    let parallel = match get(o, "parallel_tool_calls") {
        None => true,
        Some(Value::Bool(b)) => *b,
        Some(v) => {
            return Err(ApiError::invalid(format!(
                "'parallel_tool_calls' must be a boolean, not {}",
                kind(v)
            ))
            .param("parallel_tool_calls"))
        }
    };
    let list = match get(o, "tools") {
        None => return Ok(None),
        Some(Value::Array(a)) if a.is_empty() => return Ok(None),
        Some(Value::Array(a)) => a,
        Some(v) => {
            return Err(ApiError::invalid(format!(
            "'tools' must be an array of {{\"type\": \"function\", \"function\": {{…}}}}, not {}",
            kind(v)
        ))
            .param("tools"))
        }
    };
    let mut names = Vec::with_capacity(list.len());
    for (i, t) in list.iter().enumerate() {
        let at = format!("tools[{i}]");
        let bad = |m: String, p: &str| Err(ApiError::invalid(m).param(format!("{at}{p}")));
        let Some(t) = t.as_object() else {
            return bad(format!("{at} must be an object, not {}", kind(t)), "");
        };
        match t.get("type").and_then(Value::as_str) {
            Some("function") => {}
            Some(other) => {
                return bad(
                    format!("{at}.type is '{other}'; only \"function\" tools are supported"),
                    ".type",
                )
            }
            None => return bad(format!("{at}.type is required (\"function\")"), ".type"),
        }
        let Some(f) = t.get("function").and_then(Value::as_object) else {
            return bad(
                format!(
                    "{at}.function is required: an object with name, description and parameters"
                ),
                ".function",
            );
        };
        let name = f.get("name").and_then(Value::as_str).unwrap_or("");
        let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
        if name.is_empty() || name.len() > 64 || !name.chars().all(valid) {
            return bad(
                format!(
                    "{at}.function.name must be 1 to 64 letters, digits, '_' or '-', not {}",
                    f.get("name").map_or("missing".into(), Value::to_string)
                ),
                ".function.name",
            );
        }
        if names.iter().any(|n| n == name) {
            return bad(
                format!("{at}.function.name '{name}' is offered twice"),
                ".function.name",
            );
        }
        if let Some(p) = f.get("parameters").filter(|p| !p.is_object()) {
            return bad(
                format!(
                    "{at}.function.parameters must be a JSON Schema object, not {}",
                    kind(p)
                ),
                ".function.parameters",
            );
        }
        names.push(name.to_string());
    }
    match get(o, "tool_choice") {
        None => {}
        Some(Value::String(s)) if s == "auto" => {}
        Some(Value::String(s)) if s == "none" => return Ok(None),
        Some(c) => {
            return Err(ApiError::invalid(format!(
                "'tool_choice' {c} is not supported: the server cannot force a call (it has no constrained decoding); use \"auto\" or \"none\""
            ))
            .param("tool_choice"))
        }
    }
    kwargs.insert("tools".into(), Value::Array(list.clone()));
    Ok(Some(Tools { names, parallel }))
}

/// An assistant message's `tool_calls`: `[{id, type: "function", function: {name, arguments}}]`,
/// the arguments a string of JSON (OpenAI's form) or the object itself.
pub(crate) fn message_calls(v: &Value, at: &str) -> Result<Vec<ToolCall>, ApiError> {
    let at = format!("{at}.tool_calls");
    let Some(list) = v.as_array() else {
        return Err(ApiError::invalid(format!("{at} must be an array, not {}", kind(v))).param(at));
    };
    list.iter()
        .enumerate()
        .map(|(i, c)| {
            let at = format!("{at}[{i}]");
            let bad = |m: &str| Err(ApiError::invalid(format!("{at}{m}")).param(at.clone()));
            let Some(c) = c.as_object() else {
                return bad(" must be an object {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}");
            };
            if c.get("type").is_some_and(|t| t != "function") {
                return bad(".type must be \"function\"");
            }
            let id = match c.get("id") {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => s.clone(),
                Some(_) => return bad(".id must be a string"),
            };
            let Some(f) = c.get("function").and_then(Value::as_object) else {
                return bad(".function is required: {\"name\", \"arguments\"}");
            };
            let Some(name) = f.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) else {
                return bad(".function.name is required (a string)");
            };
            let arguments = match f.get("arguments") {
                None | Some(Value::Null) => "{}".to_string(),
                Some(Value::String(s)) => s.clone(),
                Some(a @ Value::Object(_)) => a.to_string(),
                Some(_) => return bad(".function.arguments must be a string of JSON"),
            };
            Ok(ToolCall { id, name: name.to_string(), arguments })
        })
        .collect()
}

/// A reply's calls as they come (after any reasoning is taken out).
pub(crate) struct ReplyCalls {
    parser: ToolCallParser,
    parallel: bool,
    /// Calls passed on so far.
    pub(crate) made: usize,
}

impl ReplyCalls {
    pub(crate) fn new(t: &Tools) -> Self {
        ReplyCalls {
            parser: ToolCallParser::new(t.names.iter().cloned()),
            parallel: t.parallel,
            made: 0,
        }
    }

    /// The content and the calls that became final (beyond the first, none without
    /// `parallel_tool_calls`).
    pub(crate) fn push(&mut self, content: &str) -> (String, Vec<ToolCall>) {
        let (text, calls) = self.parser.push(content);
        (text, self.keep(calls))
    }

    /// The last of the content (the reply ended): what became final and what the parser held.
    pub(crate) fn end(&mut self, content: &str) -> (String, Vec<ToolCall>) {
        let (mut text, mut calls) = self.push(content);
        let (rest, more) = self.parser.finish();
        text.push_str(&rest);
        calls.extend(self.keep(more));
        (text, calls)
    }

    fn keep(&mut self, mut calls: Vec<ToolCall>) -> Vec<ToolCall> {
        if !self.parallel {
            calls.truncate(1 - self.made.min(1));
        }
        self.made += calls.len();
        calls
    }
}

/// Calls as `tool_calls` JSON; `index` from `first` when streamed (delta.tool_calls[i].index).
pub(crate) fn calls_json(calls: &[ToolCall], first: Option<usize>) -> Value {
    let one = |(i, c): (usize, &ToolCall)| {
        let mut v = json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}});
        if let Some(f) = first {
            let mut with = json!({"index": f + i});
            with.as_object_mut()
                .expect("an object")
                .append(v.as_object_mut().expect("an object"));
            v = with;
        }
        v
    };
    Value::Array(calls.iter().enumerate().map(one).collect())
}
