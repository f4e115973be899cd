//! The calls of functions a chat reply makes, read from its text in the two forms chat templates
//! teach models:
//!
//! - Hermes blocks, anywhere in the reply: `<tool_call>{"name": …, "arguments": {…}}</tool_call>`
//!   (the Qwen2.5, Qwen3, Hermes and SmolLM3 templates);
//! - a reply that is one JSON object `{"name": …, "parameters" | "arguments": {…}}`, after
//!   `<|python_tag|>` or not (the Llama 3.1–3.3 templates).
//!
//! A call counts only when its JSON parses and names one of the functions offered; anything else
//! stays in the content as the model wrote it, so a garbled call reaches the client as text
//! rather than as a call it cannot make. The whitespace beside calls is dropped. Fed piece by
//! piece as an engine streams, the parser holds back only what may still become a call (the
//! start of a `<tool_call>` tag, the whitespace before one, an open block; a reply that opens
//! with `{` until it ends), so streamed pieces concatenate to what the whole reply parses into.

use crate::ToolCall;
use serde_json::Value;

const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";
const PYTHON_TAG: &str = "<|python_tag|>";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Nothing but whitespace yet: the reply may still be one JSON call.
    Start,
    /// Text, between calls.
    Text,
    /// Inside a `<tool_call>` block.
    Call,
    /// A reply that opened with `{` or `<|python_tag|>`: read whole at the end.
    Whole,
}

/// Reads the calls a chat reply makes to the functions it was offered.
///
/// ```
/// use metainfer_rt::ToolCallParser;
/// let reply = "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
/// let (content, calls) = ToolCallParser::new(["get_weather"]).whole(reply);
/// assert_eq!(content, "Let me look.");
/// assert_eq!((calls[0].name.as_str(), calls[0].arguments.as_str()), ("get_weather", "{\"city\":\"Paris\"}"));
/// ```
#[derive(Debug, Clone)]
pub struct ToolCallParser {
    tools: Vec<String>,
    state: State,
    held: String,
    /// Whitespace after a call is dropped until other text comes.
    strip: bool,
    /// The whitespace before the open block: dropped if it holds a call, else content.
    gap: String,
}

impl ToolCallParser {
    /// A parser for one reply; `tools`: the names of the functions offered.
    pub fn new<S: Into<String>>(tools: impl IntoIterator<Item = S>) -> Self {
        ToolCallParser {
            tools: tools.into_iter().map(Into::into).collect(),
            state: State::Start,
            held: String::new(),
            strip: false,
            gap: String::new(),
        }
    }

    /// A whole reply's content and calls.
    pub fn whole(mut self, reply: &str) -> (String, Vec<ToolCall>) {
        let (mut content, mut calls) = self.push(reply);
        let (c2, k2) = self.finish();
        content.push_str(&c2);
        calls.extend(k2);
        (content, calls)
    }

    /// Feeds a piece of the reply; returns the content and the calls that became final.
    pub fn push(&mut self, piece: &str) -> (String, Vec<ToolCall>) {
        self.held.push_str(piece);
        let (mut content, mut calls) = (String::new(), Vec::new());
        loop {
            match self.state {
                State::Start => {
                    let t = self.held.trim_start();
                    if t.starts_with('{') || t.starts_with(PYTHON_TAG) {
                        self.state = State::Whole;
                    } else if t.is_empty() || OPEN.starts_with(t) || PYTHON_TAG.starts_with(t) {
                        return (content, calls);
                    } else {
                        self.state = State::Text;
                    }
                }
                State::Text => {
                    if self.strip {
                        let n = self.held.len() - self.held.trim_start().len();
                        self.held.drain(..n);
                        self.strip = self.held.is_empty();
                    }
                    if let Some(i) = self.held.find(OPEN) {
                        let text = self.held[..i].trim_end();
                        content.push_str(text);
                        self.gap = self.held[text.len()..i].to_string();
                        self.held.drain(..i + OPEN.len());
                        self.state = State::Call;
                        continue;
                    }
                    let keep = hold_back(&self.held, OPEN, str::trim_end);
                    content.extend(self.held.drain(..self.held.len() - keep));
                    return (content, calls);
                }
                State::Call => {
                    let Some(i) = self.held.find(CLOSE) else {
                        return (content, calls);
                    };
                    let gap = std::mem::take(&mut self.gap);
                    let made = self.call(&self.held[..i]);
                    self.strip = made.is_some();
                    match made {
                        Some(c) => calls.push(c),
                        None => content
                            .push_str(&format!("{gap}{OPEN}{}", &self.held[..i + CLOSE.len()])),
                    }
                    self.held.drain(..i + CLOSE.len());
                    self.state = State::Text;
                }
                State::Whole => return (content, calls),
            }
        }
    }

    /// The end of the reply: what is held becomes content, or a call where it is a whole one (a
    /// block whose closing tag never came, or a reply that is one JSON call).
    pub fn finish(&mut self) -> (String, Vec<ToolCall>) {
        let held = std::mem::take(&mut self.held);
        let body = match self.state {
            State::Start | State::Text => return (held, Vec::new()),
            State::Call => held.as_str(),
            State::Whole => held.trim_start().trim_start_matches(PYTHON_TAG),
        };
        match self.call(body) {
            Some(c) => (String::new(), vec![c]),
            None if self.state == State::Call => (format!("{}{OPEN}{held}", self.gap), Vec::new()),
            None => (held, Vec::new()),
        }
    }

    /// `{"name": …, "arguments" | "parameters": {…}}` naming an offered function, as a call.
    fn call(&self, json: &str) -> Option<ToolCall> {
        let v: Value = serde_json::from_str(json.trim()).ok()?;
        let name = v.get("name")?.as_str()?;
        if !self.tools.iter().any(|t| t == name) {
            return None;
        }
        let arguments = match v.get("arguments").or_else(|| v.get("parameters")) {
            None => "{}".to_string(),
            Some(a @ Value::Object(_)) => a.to_string(),
            // arguments written as a string holding the JSON object
            Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
                Ok(a @ Value::Object(_)) => a.to_string(),
                _ => return None,
            },
            Some(_) => return None,
        };
        Some(ToolCall {
            id: format!("call_{:016x}", crate::random_u64()),
            name: name.to_string(),
            arguments,
        })
    }
}

/// Bytes at the end of `s` that may still turn out to be the start of `tag`, or the separators
/// before it (what `trim` strips from the end: whitespace before `<tool_call>`, newlines before
/// `</think>`): what a splitter fed piece by piece holds back.
pub(crate) fn hold_back(s: &str, tag: &str, trim: fn(&str) -> &str) -> usize {
    let start = (1..tag.len())
        .rev()
        .find(|&k| s.ends_with(&tag[..k]))
        .unwrap_or(0);
    let before = &s[..s.len() - start];
    start + before.len() - trim(before).len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Calls as (name, arguments).
    type Calls = Vec<(String, String)>;

    /// The reply fed in pieces of `n` characters gives the same content and calls as whole.
    fn pieces(reply: &str, n: usize) -> (String, Calls) {
        let mut p = ToolCallParser::new(["get_weather", "add"]);
        let (mut content, mut calls) = (String::new(), Vec::new());
        let chars: Vec<char> = reply.chars().collect();
        for c in chars.chunks(n) {
            let (t, k) = p.push(&c.iter().collect::<String>());
            content.push_str(&t);
            calls.extend(k);
        }
        let (t, k) = p.finish();
        content.push_str(&t);
        calls.extend(k);
        (
            content,
            calls.into_iter().map(|c| (c.name, c.arguments)).collect(),
        )
    }

    #[test]
    fn replies_split_into_content_and_calls_whole_and_in_pieces() {
        let w = |a: &str| ("get_weather".to_string(), a.to_string());
        let cases: Vec<(&str, &str, Calls)> = vec![
            ("plain answer\n", "plain answer\n", vec![]),
            ("  <tool_", "  <tool_", vec![]),
            (
                "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
                "",
                vec![w("{\"city\":\"Paris\"}")],
            ),
            (
                "Checking.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"add\", \"arguments\": \"{\\\"a\\\": 1}\"}\n</tool_call>\nDone.",
                "Checking.Done.",
                vec![w("{\"city\":\"Paris\"}"), ("add".into(), "{\"a\":1}".into())],
            ),
            // not offered, not JSON, unclosed and cut off: content as written
            (
                "a <tool_call>{\"name\": \"rm_rf\"}</tool_call> b",
                "a <tool_call>{\"name\": \"rm_rf\"}</tool_call> b",
                vec![],
            ),
            ("<tool_call>{not json</tool_call>", "<tool_call>{not json</tool_call>", vec![]),
            ("ok\n<tool_call>\n{\"name\": \"get_weather\", \"argu", "ok\n<tool_call>\n{\"name\": \"get_weather\", \"argu", vec![]),
            // a whole JSON call closed by the end of the reply, not the tag
            ("<tool_call>\n{\"name\": \"get_weather\"}\n", "", vec![w("{}")]),
            // Llama 3.x: the reply is the call
            ("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}", "", vec![w("{\"city\":\"Oslo\"}")]),
            ("<|python_tag|>{\"name\": \"add\", \"parameters\": {}}", "", vec![("add".into(), "{}".into())]),
            ("{\"answer\": 42}", "{\"answer\": 42}", vec![]),
            ("x < y and <tool", "x < y and <tool", vec![]),
        ];
        for (reply, content, calls) in cases {
            for n in [1, 2, 3, 5, 1000] {
                assert_eq!(
                    pieces(reply, n),
                    (content.to_string(), calls.clone()),
                    "{reply:?} in pieces of {n}"
                );
            }
            let (c, k) = ToolCallParser::new(["get_weather", "add"]).whole(reply);
            assert_eq!(c, content, "{reply:?}");
            assert!(k
                .iter()
                .all(|c| c.id.starts_with("call_") && c.id.len() == 21));
        }
    }

    #[test]
    fn template_value_has_the_calls_arguments_as_objects() {
        let call = |args: &str| ToolCall {
            id: "call_1".into(),
            name: "f".into(),
            arguments: args.into(),
        };
        let m = crate::Message::assistant_calls(
            "",
            vec![call("{\"b\": 1, \"a\": [true]}"), call("not json")],
        );
        assert_eq!(
            m.template_value().to_string(),
            r#"{"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":{"b":1,"a":[true]}}},{"id":"call_1","type":"function","function":{"name":"f","arguments":"not json"}}]}"#
        );
        let t = crate::Message::tool("call_1", "22 C");
        assert_eq!(
            t.template_value().to_string(),
            r#"{"role":"tool","content":"22 C","tool_call_id":"call_1"}"#
        );
    }
}
