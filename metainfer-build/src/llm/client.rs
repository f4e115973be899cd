//! [`Client`]: one chat completion over ureq, with timeouts and retries.

use super::error::LlmError;
use super::reply::{error_body, parse_completion, ReplyParts, StreamState};
use super::retry::{backoff, retry_hint};
use super::sse::SseParser;
use super::{Attempt, ChatReply, ChatRequest, LlmConfig};
use std::io::{self, Read};
use std::time::{Duration, Instant};

/// The most of a successful body read before giving up (a chat reply is far smaller).
const MAX_BODY: u64 = 32 << 20;
/// The most of an error body read for its message.
const MAX_ERROR_BODY: u64 = 64 << 10;

/// A chat-completions client for one [`LlmConfig`].
pub struct Client {
    cfg: LlmConfig,
    agent: ureq::Agent,
}

/// What one HTTP attempt produced.
struct Outcome {
    status: Option<u16>,
    request_id: Option<String>,
    hint: Option<Duration>,
    result: Result<ReplyParts, LlmError>,
}

impl Client {
    pub fn new(cfg: LlmConfig) -> Client {
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(cfg.connect_timeout)
            .timeout(cfg.total_timeout)
            .redirects(0)
            .user_agent(concat!("metainfer-build/", env!("CARGO_PKG_VERSION")))
            .build();
        Client { cfg, agent }
    }

    pub fn config(&self) -> &LlmConfig {
        &self.cfg
    }

    /// One chat completion, with retries. `on_delta` receives each streamed content piece as
    /// it arrives (with `stream = false`, once with the whole content). When an attempt fails
    /// mid-stream and is retried, the pieces it delivered are not taken back: the retry's
    /// pieces follow them; the reply's `content` is the successful attempt's alone.
    pub fn chat(
        &self,
        req: &ChatRequest,
        on_delta: &mut dyn FnMut(&str),
    ) -> Result<ChatReply, LlmError> {
        let body = self.request_body(req);
        let started = Instant::now();
        let mut attempts = Vec::new();
        let mut retry = 0u32;
        loop {
            let t0 = Instant::now();
            let out = self.attempt(&body, on_delta);
            let elapsed_ms = ms(t0.elapsed());
            let request_id = out
                .request_id
                .clone()
                .or_else(|| out.result.as_ref().ok().and_then(|p| p.id.clone()));
            attempts.push(Attempt {
                status: out.status,
                request_id: request_id.clone(),
                elapsed_ms,
                error: out.result.as_ref().err().map(|e| e.to_string()),
            });
            let err = match out.result {
                Ok(parts) => {
                    return Ok(ChatReply {
                        content: parts.content,
                        model: parts.model.unwrap_or_else(|| self.cfg.model.clone()),
                        request_id,
                        finish_reason: parts.finish_reason,
                        usage: parts.usage,
                        elapsed_ms: ms(started.elapsed()),
                        attempts,
                    })
                }
                Err(e) => e,
            };
            if !err.is_retryable() {
                return Err(err);
            }
            if retry >= self.cfg.max_retries {
                return Err(LlmError::GaveUp {
                    attempts: retry + 1,
                    last: Box::new(err),
                });
            }
            let delay = match out.hint {
                Some(hint) if hint > self.cfg.max_retry_hint => {
                    return Err(LlmError::RetryHintTooLong {
                        hint,
                        limit: self.cfg.max_retry_hint,
                        request_id,
                    });
                }
                Some(hint) => hint,
                None => backoff(retry, self.cfg.backoff_base, self.cfg.backoff_max),
            };
            std::thread::sleep(delay);
            retry += 1;
        }
    }

    fn request_body(&self, req: &ChatRequest) -> String {
        let mut body = serde_json::json!({
            "model": self.cfg.model,
            "messages": req.messages,
            "stream": self.cfg.stream,
        });
        let obj = body.as_object_mut().expect("a json object");
        if self.cfg.stream {
            obj.insert(
                "stream_options".into(),
                serde_json::json!({ "include_usage": true }),
            );
        }
        if let Some(n) = req.max_tokens {
            obj.insert("max_tokens".into(), n.into());
        }
        if let Some(t) = req.temperature {
            obj.insert("temperature".into(), f64::from(t).into());
        }
        if !req.stop.is_empty() {
            obj.insert("stop".into(), req.stop.clone().into());
        }
        if let Some(s) = req.seed {
            obj.insert("seed".into(), s.into());
        }
        if let Some(p) = req.repeat_penalty {
            obj.insert("repeat_penalty".into(), f64::from(p).into());
        }
        body.to_string()
    }

    fn attempt(&self, body: &str, on_delta: &mut dyn FnMut(&str)) -> Outcome {
        let deadline = Instant::now() + self.cfg.total_timeout;
        let mut request = self
            .agent
            .post(&self.cfg.endpoint())
            .set("Content-Type", "application/json")
            .set(
                "Accept",
                if self.cfg.stream {
                    "text/event-stream"
                } else {
                    "application/json"
                },
            );
        if let Some(key) = &self.cfg.api_key {
            request = request.set("Authorization", &format!("Bearer {key}"));
        }
        let fail = |status, request_id, hint, e| Outcome {
            status,
            request_id,
            hint,
            result: Err(e),
        };
        let response = match request.send_string(body) {
            Ok(r) => r,
            Err(ureq::Error::Status(status, r)) => {
                let request_id = header_request_id(&r);
                let hint = retry_hint(r.header("retry-after-ms"), r.header("retry-after"));
                let text = read_capped(r.into_reader(), MAX_ERROR_BODY)
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default();
                let (message, kind) = error_body(&text);
                let e = LlmError::Status {
                    status,
                    message,
                    kind,
                    request_id: request_id.clone(),
                };
                return fail(Some(status), request_id, hint, e);
            }
            Err(ureq::Error::Transport(t)) => {
                return fail(None, None, None, self.transport_error(t))
            }
        };
        let status = response.status();
        let request_id = header_request_id(&response);
        if !(200..300).contains(&status) {
            let message = match response.header("location") {
                Some(to) => format!("redirected to {to}: set the base url so that {{base_url}}/chat/completions is the final url"),
                None => format!("unexpected status {status} {}", response.status_text()),
            };
            let e = LlmError::Status {
                status,
                message,
                kind: None,
                request_id: request_id.clone(),
            };
            return fail(Some(status), request_id, None, e);
        }
        let is_sse = response
            .content_type()
            .eq_ignore_ascii_case("text/event-stream");
        let reader = response.into_reader();
        let result = if is_sse {
            self.read_stream(reader, deadline, request_id.as_deref(), on_delta)
        } else {
            self.read_whole(reader, request_id.as_deref(), on_delta)
        };
        Outcome {
            status: Some(status),
            request_id,
            hint: None,
            result,
        }
    }

    /// A `text/event-stream` body, piece by piece, with a deadline check between reads (the
    /// agent's own deadline also bounds each read).
    fn read_stream(
        &self,
        mut reader: impl Read,
        deadline: Instant,
        request_id: Option<&str>,
        on_delta: &mut dyn FnMut(&str),
    ) -> Result<ReplyParts, LlmError> {
        let mut parser = SseParser::new();
        let mut state = StreamState::new();
        let mut buf = vec![0u8; 16 << 10];
        loop {
            if Instant::now() >= deadline {
                return Err(self.response_timeout());
            }
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.io_error(e)),
            };
            for event in parser.push(&buf[..n]) {
                if state.on_data(&event.data, request_id, on_delta)? {
                    return state.finish(false);
                }
            }
        }
        state.finish(parser.is_mid_event())
    }

    /// A whole body: a `chat.completion` object, or an event stream sent with another
    /// content type.
    fn read_whole(
        &self,
        reader: impl Read,
        request_id: Option<&str>,
        on_delta: &mut dyn FnMut(&str),
    ) -> Result<ReplyParts, LlmError> {
        let bytes = read_capped(reader, MAX_BODY + 1).map_err(|e| self.io_error(e))?;
        if bytes.len() as u64 > MAX_BODY {
            return Err(LlmError::protocol(format!(
                "the reply body is larger than {} MiB",
                MAX_BODY >> 20
            )));
        }
        let text = String::from_utf8_lossy(&bytes);
        if text.trim_start().starts_with("data:") {
            let mut parser = SseParser::new();
            let mut state = StreamState::new();
            let mut events = parser.push(&bytes);
            events.extend(parser.push(b"\n\n"));
            for event in events {
                if state.on_data(&event.data, request_id, on_delta)? {
                    break;
                }
            }
            return state.finish(false);
        }
        let parts = parse_completion(&text, request_id)?;
        on_delta(&parts.content);
        Ok(parts)
    }

    fn response_timeout(&self) -> LlmError {
        LlmError::Timeout {
            what: "response".into(),
            after: self.cfg.total_timeout,
        }
    }

    fn io_error(&self, e: io::Error) -> LlmError {
        if matches!(
            e.kind(),
            io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
        ) {
            self.response_timeout()
        } else {
            LlmError::Transport(format!(
                "reading the reply from {}: {e}",
                self.cfg.endpoint()
            ))
        }
    }

    fn transport_error(&self, t: ureq::Transport) -> LlmError {
        use ureq::ErrorKind as K;
        let kind = t.kind();
        if is_timeout(&t) {
            return match kind {
                K::ConnectionFailed | K::Dns => LlmError::Timeout {
                    what: "connect".into(),
                    after: self.cfg.connect_timeout,
                },
                _ => self.response_timeout(),
            };
        }
        match kind {
            K::InvalidUrl | K::UnknownScheme | K::InsecureRequestHttpsOnly | K::InvalidProxyUrl | K::BadHeader | K::ProxyUnauthorized => {
                LlmError::Config(format!("cannot send a request to {}: {t} (check METAINFER_LLM_BASE_URL and METAINFER_LLM_API_KEY)", self.cfg.endpoint()))
            }
            _ => LlmError::Transport(t.to_string()),
        }
    }
}

fn is_timeout(t: &ureq::Transport) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(t);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<io::Error>() {
            if matches!(
                io.kind(),
                io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
            ) {
                return true;
            }
        }
        cur = e.source();
    }
    false
}

fn header_request_id(r: &ureq::Response) -> Option<String> {
    r.header("x-request-id")
        .or_else(|| r.header("request-id"))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn read_capped(reader: impl Read, cap: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    reader.take(cap).read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
