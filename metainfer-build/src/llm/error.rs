//! [`LlmError`]: everything a chat call can fail with.

use std::time::Duration;

/// Why a chat call failed. Messages name what was wrong and, where there is one, the fix.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// The configuration is partial or invalid; the message names the variable or key.
    #[error("llm config: {0}")]
    Config(String),

    /// The server answered with a non-success HTTP status.
    #[error("{}", status_message(*.status, .message, .kind.as_deref(), .request_id.as_deref()))]
    Status {
        status: u16,
        /// The server's `error.message`, else the first ~200 characters of the body.
        message: String,
        /// The server's `error.type` (else `error.code`), when it sent one.
        kind: Option<String>,
        request_id: Option<String>,
    },

    /// The server reported an error inside a successful (200) response, e.g. an
    /// `{"error": {...}}` event in the middle of a stream.
    #[error("llm server reported an error in its reply{}: {message}{}",
        .kind.as_deref().map(|k| format!(" ({k})")).unwrap_or_default(),
        request_id_suffix(.request_id.as_deref()))]
    InReply {
        message: String,
        kind: Option<String>,
        request_id: Option<String>,
    },

    /// An attempt ran past a timeout: `what` is `connect` or `response` (the per-attempt total).
    #[error("llm {what} timed out after {}{}", secs(*.after), timeout_fix(.what))]
    Timeout { what: String, after: Duration },

    /// The connection failed or broke (refused, reset, closed without a reply, DNS…).
    #[error("llm transport error: {0}")]
    Transport(String),

    /// The reply is not what an OpenAI-compatible server sends; the message says what was
    /// wrong and quotes the start of the body. `retryable` marks the transient kinds (a
    /// truncated stream, empty content) as opposed to a server or url that is simply wrong.
    #[error("llm reply malformed: {message}")]
    Protocol { message: String, retryable: bool },

    /// The server asked to wait longer than `max_retry_hint` before retrying.
    #[error("llm server asked to retry after {}, more than the limit of {}{}; giving up (try again later, or raise max_retry_hint)",
        secs(*.hint), secs(*.limit), request_id_suffix(.request_id.as_deref()))]
    RetryHintTooLong {
        hint: Duration,
        limit: Duration,
        request_id: Option<String>,
    },

    /// Every attempt failed with a retryable error; `last` is the last of them.
    #[error("llm call gave up after {attempts} attempt{}: {last}", if *.attempts == 1 { "" } else { "s" })]
    GaveUp { attempts: u32, last: Box<LlmError> },
}

impl LlmError {
    /// A protocol error that a retry will not fix.
    pub fn protocol(message: impl Into<String>) -> LlmError {
        LlmError::Protocol {
            message: message.into(),
            retryable: false,
        }
    }

    /// A protocol error that may be transient (truncated stream, empty content).
    pub fn protocol_transient(message: impl Into<String>) -> LlmError {
        LlmError::Protocol {
            message: message.into(),
            retryable: true,
        }
    }

    /// Whether another attempt may succeed: timeouts, transport errors, HTTP 408, 409, 429
    /// and 5xx, transient protocol errors, and server-side errors reported in a reply.
    pub fn is_retryable(&self) -> bool {
        match self {
            LlmError::Timeout { .. } | LlmError::Transport(_) => true,
            LlmError::Status { status, .. } => retryable_status(*status),
            LlmError::Protocol { retryable, .. } => *retryable,
            LlmError::InReply { kind, .. } => !kind.as_deref().is_some_and(is_client_fault_kind),
            LlmError::Config(_) | LlmError::RetryHintTooLong { .. } | LlmError::GaveUp { .. } => {
                false
            }
        }
    }

    /// The server's request id, when the error carries one.
    pub fn request_id(&self) -> Option<&str> {
        match self {
            LlmError::Status { request_id, .. }
            | LlmError::InReply { request_id, .. }
            | LlmError::RetryHintTooLong { request_id, .. } => request_id.as_deref(),
            LlmError::GaveUp { last, .. } => last.request_id(),
            _ => None,
        }
    }
}

/// HTTP statuses worth retrying: 408, 409, 429 and 5xx.
pub fn retryable_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429) || (500..=599).contains(&status)
}

fn is_client_fault_kind(kind: &str) -> bool {
    let k = kind.to_ascii_lowercase();
    [
        "invalid",
        "auth",
        "permission",
        "not_found",
        "context_length",
    ]
    .iter()
    .any(|p| k.contains(p))
}

fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 1.0 && s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{s:.3} s")
    }
}

fn request_id_suffix(id: Option<&str>) -> String {
    id.map(|id| format!(" [request id {id}]"))
        .unwrap_or_default()
}

fn timeout_fix(what: &str) -> &'static str {
    match what {
        "connect" => " (is the server at METAINFER_LLM_BASE_URL up? raise METAINFER_LLM_CONNECT_TIMEOUT_S if it is slow to accept)",
        _ => " (the server accepted but did not finish in time; raise METAINFER_LLM_TIMEOUT_S or ask for fewer tokens)",
    }
}

fn status_message(
    status: u16,
    message: &str,
    kind: Option<&str>,
    request_id: Option<&str>,
) -> String {
    let kind = kind.map(|k| format!(" ({k})")).unwrap_or_default();
    let fix = match status {
        401 | 403 => " (check METAINFER_LLM_API_KEY)",
        404 => " (check METAINFER_LLM_BASE_URL, requests go to {base_url}/chat/completions, and METAINFER_LLM_MODEL)",
        413 => " (the prompt is too large for this server)",
        _ => "",
    };
    format!(
        "llm server answered http {status}{kind}: {message}{fix}{}",
        request_id_suffix(request_id)
    )
}
