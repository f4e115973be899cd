// The model's Jinja2 chat template, rendered with minijinja configured like HF transformers' environment.

use rt::minijinja::value::Kwargs;
use rt::minijinja::{Environment, Error as JinjaError, ErrorKind, Value};

/// A compiled chat template.
pub(crate) struct ChatTemplate {
    source: String,                // the template text from the model file
    env: Environment<'static>,     // holds the compiled template "chat" when `compile_error` is None
    compile_error: Option<String>, // a syntax error found at load, reported by `render`
}

/// Writes `v` as Python's json.dumps does (separators ", " / ": ", or "," / ": " with indent).
fn chat_json_py(v: &rt::serde_json::Value, indent: Option<usize>, sort_keys: bool, level: usize, out: &mut String) {
    use rt::serde_json::Value as J;
    let (open, close, items): (char, char, Vec<(Option<&String>, &J)>) = match v {
        J::Array(a) => ('[', ']', a.iter().map(|x| (None, x)).collect()),
        J::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            if sort_keys {
                keys.sort();
            }
            ('{', '}', keys.into_iter().map(|k| (Some(k), &m[k])).collect())
        }
        // Python writes floats as "1.0" / "1e-05", serde_json "1.0" / "1e-5": close enough for tool schemas.
        other => return out.push_str(&other.to_string()),
    };
    let newline = |out: &mut String, level: usize| {
        if let Some(n) = indent {
            out.push('\n');
            out.extend(std::iter::repeat(' ').take(n * level));
        }
    };
    out.push(open);
    for (i, (key, x)) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(if indent.is_some() { "," } else { ", " });
        }
        newline(out, level + 1);
        if let Some(k) = key {
            out.push_str(&rt::serde_json::to_string(k).unwrap_or_default());
            out.push_str(": ");
        }
        chat_json_py(x, indent, sort_keys, level + 1, out);
    }
    if !items.is_empty() {
        newline(out, level);
    }
    out.push(close);
}

/// `x | tojson(indent=None, sort_keys=False, ensure_ascii=False)` as transformers defines it.
fn chat_tojson(value: Value, kwargs: Kwargs) -> Result<Value, JinjaError> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    let ascii: Option<bool> = kwargs.get("ensure_ascii")?;
    let _separators: Option<Value> = kwargs.get("separators")?;
    kwargs.assert_all_used()?;
    let j = rt::serde_json::to_value(&value)
        .map_err(|e| JinjaError::new(ErrorKind::InvalidOperation, format!("tojson: {e}")))?;
    let mut out = String::new();
    chat_json_py(&j, indent, sort_keys.unwrap_or(false), 0, &mut out);
    if ascii.unwrap_or(false) {
        // Non-ASCII characters (only ever inside strings) become \uXXXX UTF-16 escapes.
        let esc = |c: char| c.encode_utf16(&mut [0; 2]).iter().map(|u| format!("\\u{u:04x}")).collect::<String>();
        out = out.chars().map(|c| if c.is_ascii() { c.to_string() } else { esc(c) }).collect();
    }
    Ok(Value::from_safe_string(out))
}

impl ChatTemplate {
    /// Reads `tokenizer.chat_template` (None when absent); a template that does not compile still loads.
    pub(crate) fn from_gguf(g: &Gguf) -> rt::Result<Option<ChatTemplate>> {
        // The file's own template, else the family's default (DEFAULT_CHAT_TEMPLATE), else none.
        Ok(g.get_str_opt("tokenizer.chat_template")?.or(DEFAULT_CHAT_TEMPLATE).map(|s| ChatTemplate::new(s.to_string())))
    }

    /// Compiles a template text.
    pub(crate) fn new(source: String) -> ChatTemplate {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_keep_trailing_newline(false);
        env.set_auto_escape_callback(|_| rt::minijinja::AutoEscape::None);
        env.set_unknown_method_callback(rt::minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |msg: String| -> Result<Value, JinjaError> {
            Err(JinjaError::new(ErrorKind::InvalidOperation, msg))
        });
        env.add_filter("tojson", chat_tojson);
        let compile_error = env.add_template_owned("chat", source.clone()).err().map(|e| e.to_string());
        ChatTemplate { source, env, compile_error }
    }

    /// The template text.
    pub(crate) fn source(&self) -> &str { &self.source }

    /// Ok when the template compiled, else rt::Error::Template with minijinja's message.
    pub(crate) fn check(&self) -> rt::Result<()> {
        match &self.compile_error {
            Some(e) => Err(rt::Error::Template(format!("the chat template does not compile: {e}"))),
            None => Ok(()),
        }
    }

    /// Renders the conversation (`messages` as rt::Message::template_value writes them, with
    /// their tool calls; `add_generation_prompt`, `bos_token`, `eos_token`; `tools` and `documents`
    /// none) with the caller's `kwargs` besides (they may set `tools`, not the four the engine sets).
    pub(crate) fn render(&self, messages: &[rt::Message], add_generation_prompt: bool, bos: &str, eos: &str, kwargs: &rt::TemplateKwargs) -> rt::Result<String> {
        self.check()?;
        if let Some(k) = kwargs.keys().find(|k| rt::TEMPLATE_ENGINE_VARS.contains(&k.as_str())) {
            return Err(rt::Error::Template(format!("chat template kwargs may not set '{k}': the engine sets it; pass the conversation as messages")));
        }
        let own = [
            ("messages", Value::from_serialize(messages.iter().map(rt::Message::template_value).collect::<Vec<_>>())),
            ("add_generation_prompt", Value::from(add_generation_prompt)),
            ("bos_token", Value::from(bos)),
            ("eos_token", Value::from(eos)),
            ("tools", Value::from(())),
            ("documents", Value::from(())),
        ];
        let extra = kwargs.iter().map(|(k, v)| (k.as_str(), Value::from_serialize(v)));
        let ctx = Value::from(own.into_iter().chain(extra).collect::<std::collections::BTreeMap<&str, Value>>());
        let tmpl = self.env.get_template("chat").map_err(|e| rt::Error::Template(e.to_string()))?;
        tmpl.render(ctx).map_err(|e| rt::Error::Template(e.to_string()))
    }
}
