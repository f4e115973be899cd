//! [`LlmConfig`]: where the model server is and how patient to be with it.
//!
//! Sources, highest precedence first: the `METAINFER_LLM_*` variables, then the TOML file named
//! by `METAINFER_LLM_CONFIG` (keys `base_url`, `model`, `api_key`, `timeout_s`,
//! `connect_timeout_s`, `max_retries`, `stream`, `repeat_penalty`; unknown keys are rejected).
//! Empty variables count as unset.

use super::error::LlmError;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

pub const ENV_BASE_URL: &str = "METAINFER_LLM_BASE_URL";
pub const ENV_MODEL: &str = "METAINFER_LLM_MODEL";
pub const ENV_API_KEY: &str = "METAINFER_LLM_API_KEY";
pub const ENV_TIMEOUT_S: &str = "METAINFER_LLM_TIMEOUT_S";
pub const ENV_CONNECT_TIMEOUT_S: &str = "METAINFER_LLM_CONNECT_TIMEOUT_S";
pub const ENV_MAX_RETRIES: &str = "METAINFER_LLM_MAX_RETRIES";
pub const ENV_STREAM: &str = "METAINFER_LLM_STREAM";
pub const ENV_CONFIG: &str = "METAINFER_LLM_CONFIG";
pub const ENV_REPEAT_PENALTY: &str = "METAINFER_LLM_REPEAT_PENALTY";

const FILE_KEYS: [&str; 8] = [
    "repeat_penalty",
    "base_url",
    "model",
    "api_key",
    "timeout_s",
    "connect_timeout_s",
    "max_retries",
    "stream",
];

/// How to reach an OpenAI-compatible chat-completions server. `Debug` hides the api key.
#[derive(Clone, PartialEq)]
pub struct LlmConfig {
    /// e.g. `http://127.0.0.1:8080/v1`; requests go to `{base_url}/chat/completions`.
    pub base_url: String,
    pub model: String,
    /// Sent as `Authorization: Bearer …` when set.
    pub api_key: Option<String>,
    /// Default 10 s.
    pub connect_timeout: std::time::Duration,
    /// Per attempt, the whole request including reading the body. Default 300 s.
    pub total_timeout: std::time::Duration,
    /// Default 4 (so up to 5 attempts).
    pub max_retries: u32,
    /// First retry delay, doubled per retry up to `backoff_max`. Default 500 ms.
    pub backoff_base: Duration,
    /// Default 8 s.
    pub backoff_max: Duration,
    /// A `retry-after(-ms)` hint longer than this gives up at once. Default 60 s.
    pub max_retry_hint: Duration,
    /// Request `"stream": true` and parse SSE. Default true.
    pub stream: bool,
    /// llama.cpp's multiplicative `repeat_penalty` (an extension llama-server and `demo-engine
    /// serve` accept; hosted APIs may reject unknown fields, so it is off by default). The chain
    /// sends it on the rounds after a reply that looped (repeated itself into the token limit).
    pub repeat_penalty: Option<f32>,
}

impl fmt::Debug for LlmConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("connect_timeout", &self.connect_timeout)
            .field("total_timeout", &self.total_timeout)
            .field("max_retries", &self.max_retries)
            .field("backoff_base", &self.backoff_base)
            .field("backoff_max", &self.backoff_max)
            .field("max_retry_hint", &self.max_retry_hint)
            .field("stream", &self.stream)
            .field("repeat_penalty", &self.repeat_penalty)
            .finish()
    }
}

impl LlmConfig {
    /// A config with the defaults for everything but the server and model.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> LlmConfig {
        LlmConfig {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            connect_timeout: Duration::from_secs(10),
            total_timeout: Duration::from_secs(300),
            max_retries: 4,
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(8),
            max_retry_hint: Duration::from_secs(60),
            stream: true,
            repeat_penalty: None,
        }
    }

    /// The url requests are posted to.
    pub fn endpoint(&self) -> String {
        format!("{}/chat/completions", self.base_url.trim_end_matches('/'))
    }

    /// From the process environment; see [`LlmConfig::from_vars`].
    pub fn from_env() -> Result<Option<LlmConfig>, LlmError> {
        LlmConfig::from_vars(crate::env::var)
    }

    /// From METAINFER_LLM_BASE_URL / METAINFER_LLM_MODEL / METAINFER_LLM_API_KEY, optionally
    /// METAINFER_LLM_TIMEOUT_S, METAINFER_LLM_CONNECT_TIMEOUT_S, METAINFER_LLM_MAX_RETRIES,
    /// METAINFER_LLM_STREAM (0/1), and the file METAINFER_LLM_CONFIG names (variables override
    /// its values). `Ok(None)` when nothing is configured; `Err` naming the variable or key when
    /// the configuration is partial or invalid (a config file or a model without a base url
    /// counts as partial).
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Option<LlmConfig>, LlmError> {
        let var = |k: &str| {
            get(k)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let file = match var(ENV_CONFIG) {
            Some(path) => Some(ConfigFile::load(&path)?),
            None => None,
        };
        let lookup = |env: &'static str, key: &'static str| -> Option<(Value, Origin)> {
            if let Some(v) = var(env) {
                return Some((Value::Text(v), Origin::Var(env)));
            }
            let f = file.as_ref()?;
            f.values
                .get(key)
                .map(|v| (Value::Toml(v.clone()), Origin::Key(key, f.path.clone())))
        };

        let Some((url, url_origin)) = lookup(ENV_BASE_URL, "base_url") else {
            if let Some(f) = &file {
                return Err(cfg_err(format!(
                    "{} sets no base_url and {ENV_BASE_URL} is unset: add base_url = \"http://host:port/v1\" to the file or set the variable",
                    f.path
                )));
            }
            if var(ENV_MODEL).is_some() {
                return Err(cfg_err(format!("{ENV_MODEL} is set but {ENV_BASE_URL} is not: set it to the server's OpenAI-compatible base url, e.g. http://127.0.0.1:8080/v1")));
            }
            return Ok(None);
        };
        let base_url = url.text(&url_origin)?;
        let lower = base_url.to_ascii_lowercase();
        let rest = lower
            .strip_prefix("http://")
            .or_else(|| lower.strip_prefix("https://"));
        if !matches!(rest, Some(r) if !r.trim_matches('/').is_empty()) {
            return Err(cfg_err(format!("{url_origin} is {base_url:?}, not an http:// or https:// url: use e.g. http://127.0.0.1:8080/v1")));
        }
        let base_url = base_url.trim_end_matches('/').to_string();

        let Some((model, model_origin)) = lookup(ENV_MODEL, "model") else {
            return Err(cfg_err(format!(
                "{url_origin} is set but no model is: set {ENV_MODEL}{} to the model id the server serves",
                file.as_ref().map(|f| format!(" or model in {}", f.path)).unwrap_or_default()
            )));
        };
        let mut cfg = LlmConfig::new(base_url, model.text(&model_origin)?);
        if let Some((v, o)) = lookup(ENV_API_KEY, "api_key") {
            cfg.api_key = Some(v.text(&o)?);
        }
        if let Some((v, o)) = lookup(ENV_TIMEOUT_S, "timeout_s") {
            cfg.total_timeout = v.seconds(&o)?;
        }
        if let Some((v, o)) = lookup(ENV_CONNECT_TIMEOUT_S, "connect_timeout_s") {
            cfg.connect_timeout = v.seconds(&o)?;
        }
        if let Some((v, o)) = lookup(ENV_MAX_RETRIES, "max_retries") {
            cfg.max_retries = v.count(&o)?;
        }
        if let Some((v, o)) = lookup(ENV_STREAM, "stream") {
            cfg.stream = v.flag(&o)?;
        }
        if let Some((v, o)) = lookup(ENV_REPEAT_PENALTY, "repeat_penalty") {
            cfg.repeat_penalty = Some(v.penalty(&o)?);
        }
        Ok(Some(cfg))
    }
}

fn cfg_err(msg: String) -> LlmError {
    LlmError::Config(msg)
}

/// Where a value came from, for messages.
enum Origin {
    Var(&'static str),
    Key(&'static str, String),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Var(v) => write!(f, "{v}"),
            Origin::Key(k, path) => write!(f, "{k} in {path}"),
        }
    }
}

enum Value {
    Text(String),
    Toml(toml::Value),
}

impl Value {
    fn text(self, o: &Origin) -> Result<String, LlmError> {
        match self {
            Value::Text(s) => Ok(s),
            Value::Toml(toml::Value::String(s)) if !s.trim().is_empty() => Ok(s.trim().to_string()),
            Value::Toml(v) => Err(cfg_err(format!("{o} must be a non-empty string, not {v}"))),
        }
    }

    fn seconds(self, o: &Origin) -> Result<Duration, LlmError> {
        let secs = match &self {
            Value::Text(s) => s.parse::<f64>().ok(),
            Value::Toml(toml::Value::Integer(i)) => Some(*i as f64),
            Value::Toml(toml::Value::Float(x)) => Some(*x),
            Value::Toml(_) => None,
        };
        secs.filter(|s| s.is_finite() && *s > 0.0 && *s <= 86_400.0)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| cfg_err(format!("{o} is {}, not a number of seconds: use a positive number up to 86400, e.g. 300", self.shown())))
    }

    fn penalty(self, o: &Origin) -> Result<f32, LlmError> {
        let x = match &self {
            Value::Text(s) => s.parse::<f64>().ok(),
            Value::Toml(toml::Value::Integer(i)) => Some(*i as f64),
            Value::Toml(toml::Value::Float(x)) => Some(*x),
            Value::Toml(_) => None,
        };
        x.filter(|x| (1.0..=2.0).contains(x))
            .map(|x| x as f32)
            .ok_or_else(|| {
                cfg_err(format!(
                    "{o} is {}, not a repeat penalty: use a number from 1.0 (off) to 2.0, e.g. 1.3",
                    self.shown()
                ))
            })
    }

    fn count(self, o: &Origin) -> Result<u32, LlmError> {
        let n = match &self {
            Value::Text(s) => s.parse::<u32>().ok(),
            Value::Toml(toml::Value::Integer(i)) => u32::try_from(*i).ok(),
            Value::Toml(_) => None,
        };
        n.filter(|n| *n <= 100).ok_or_else(|| {
            cfg_err(format!(
                "{o} is {}, not a retry count: use a whole number from 0 to 100, e.g. 4",
                self.shown()
            ))
        })
    }

    fn flag(self, o: &Origin) -> Result<bool, LlmError> {
        let b = match &self {
            Value::Text(s) => match s.to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "on" => Some(true),
                "0" | "false" | "no" | "off" => Some(false),
                _ => None,
            },
            Value::Toml(toml::Value::Boolean(b)) => Some(*b),
            Value::Toml(toml::Value::Integer(0)) => Some(false),
            Value::Toml(toml::Value::Integer(1)) => Some(true),
            Value::Toml(_) => None,
        };
        b.ok_or_else(|| {
            cfg_err(format!(
                "{o} is {}, not a switch: use 1 (stream) or 0 (one json reply)",
                self.shown()
            ))
        })
    }

    fn shown(&self) -> String {
        match self {
            Value::Text(s) => format!("{s:?}"),
            Value::Toml(v) => v.to_string(),
        }
    }
}

struct ConfigFile {
    path: String,
    values: BTreeMap<String, toml::Value>,
}

impl ConfigFile {
    fn load(path: &str) -> Result<ConfigFile, LlmError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| cfg_err(format!("{ENV_CONFIG} names {path}, which cannot be read ({e}): fix the path or unset the variable")))?;
        let values: BTreeMap<String, toml::Value> = toml::from_str(&text)
            .map_err(|e| cfg_err(format!("{path} (from {ENV_CONFIG}) is not valid toml: {e}")))?;
        if let Some(k) = values.keys().find(|k| !FILE_KEYS.contains(&k.as_str())) {
            return Err(cfg_err(format!(
                "{path} (from {ENV_CONFIG}) has unknown key {k:?}: the keys are {}",
                FILE_KEYS.join(", ")
            )));
        }
        Ok(ConfigFile {
            path: path.to_string(),
            values,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn nothing_configured() {
        assert!(LlmConfig::from_vars(vars(&[])).unwrap().is_none());
        assert!(LlmConfig::from_vars(vars(&[(ENV_BASE_URL, "  ")]))
            .unwrap()
            .is_none());
    }

    #[test]
    fn env_only() {
        let c = LlmConfig::from_vars(vars(&[
            (ENV_BASE_URL, "https://api.example.com/v1/"),
            (ENV_MODEL, "m"),
            (ENV_API_KEY, "sk-x"),
            (ENV_TIMEOUT_S, "1.5"),
            (ENV_MAX_RETRIES, "0"),
            (ENV_STREAM, "0"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(c.base_url, "https://api.example.com/v1");
        assert_eq!(c.endpoint(), "https://api.example.com/v1/chat/completions");
        assert_eq!(c.total_timeout, Duration::from_millis(1500));
        assert_eq!(c.connect_timeout, Duration::from_secs(10));
        assert_eq!(
            (c.max_retries, c.stream, c.api_key.as_deref()),
            (0, false, Some("sk-x"))
        );
        assert!(!format!("{c:?}").contains("sk-x"));
    }

    #[test]
    fn repeat_penalty_is_off_unless_set_and_bounded() {
        let base = [(ENV_BASE_URL, "http://x/v1"), (ENV_MODEL, "m")];
        let c = LlmConfig::from_vars(vars(&base)).unwrap().unwrap();
        assert_eq!(c.repeat_penalty, None);
        let with = |v| {
            let mut p = base.to_vec();
            p.push((ENV_REPEAT_PENALTY, v));
            LlmConfig::from_vars(vars(&p))
        };
        assert_eq!(with("1.3").unwrap().unwrap().repeat_penalty, Some(1.3));
        let e = with("0.5").unwrap_err().to_string();
        assert!(
            e.contains(ENV_REPEAT_PENALTY) && e.contains("1.0 (off) to 2.0"),
            "{e}"
        );
    }

    #[test]
    fn bad_values_name_the_variable() {
        let e = LlmConfig::from_vars(vars(&[(ENV_BASE_URL, "127.0.0.1:8080"), (ENV_MODEL, "m")]))
            .unwrap_err();
        assert!(
            e.to_string().contains(ENV_BASE_URL) && e.to_string().contains("http://"),
            "{e}"
        );
        let e = LlmConfig::from_vars(vars(&[
            (ENV_BASE_URL, "http://x"),
            (ENV_MODEL, "m"),
            (ENV_STREAM, "maybe"),
        ]))
        .unwrap_err();
        assert!(e.to_string().contains(ENV_STREAM), "{e}");
        let e = LlmConfig::from_vars(vars(&[
            (ENV_BASE_URL, "http://x"),
            (ENV_MODEL, "m"),
            (ENV_MAX_RETRIES, "-1"),
        ]))
        .unwrap_err();
        assert!(e.to_string().contains(ENV_MAX_RETRIES), "{e}");
        let e = LlmConfig::from_vars(vars(&[(ENV_MODEL, "m")])).unwrap_err();
        assert!(e.to_string().contains(ENV_BASE_URL), "{e}");
    }
}
