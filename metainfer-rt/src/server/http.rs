//! HTTP/1.1 on one connection: the request head and body, routing, responses, the error
//! envelope, lingering close, and the "is the client still there" check.

use super::metrics::{self, Outcome};
use super::{api, CountGuard, Shared};
use crate::serde_json::{json, Value};
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Largest request head (request line + headers).
const MAX_HEAD: usize = 16 * 1024;

/// An error response: the status and the OpenAI error envelope.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub status: u16,
    pub kind: &'static str,
    pub message: String,
    pub param: Option<String>,
    pub code: Option<&'static str>,
    /// Extra response headers (e.g. `allow`, `retry-after`).
    pub headers: Vec<(&'static str, String)>,
}

impl ApiError {
    pub fn new(status: u16, kind: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            kind,
            message: message.into(),
            param: None,
            code: None,
            headers: Vec::new(),
        }
    }
    /// 400 invalid_request_error.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(400, "invalid_request_error", message)
    }
    pub fn param(mut self, p: impl Into<String>) -> Self {
        self.param = Some(p.into());
        self
    }
    pub fn code(mut self, c: &'static str) -> Self {
        self.code = Some(c);
        self
    }
    pub fn header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }
    pub fn body(&self) -> Value {
        json!({"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}})
    }
}

/// A parsed request head.
pub(crate) struct Head {
    pub method: String,
    /// The path without the query string.
    pub path: String,
    /// Names lowercased.
    pub headers: Vec<(String, String)>,
    /// HTTP/1.1 without `connection: close`: the client may send another request.
    pub keep_alive: bool,
}

impl Head {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One connection: the stream and the request id its response carries.
pub(crate) struct Conn {
    pub stream: TcpStream,
    pub request_id: String,
    /// Whether a status line has been written.
    pub responded: bool,
    pub status: u16,
    /// The response says `connection: keep-alive` (a length-delimited one to a client that
    /// allows it); an event stream, an error and a request with bytes after its body close.
    pub keep_alive: bool,
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

impl Conn {
    fn write_head(
        &mut self,
        status: u16,
        content_type: &str,
        len: Option<usize>,
        extra: &[(&'static str, String)],
    ) -> io::Result<()> {
        let mut h = format!(
            "HTTP/1.1 {status} {}\r\ncontent-type: {content_type}\r\n",
            reason(status)
        );
        if let Some(n) = len {
            h.push_str(&format!("content-length: {n}\r\n"));
        }
        for (k, v) in extra {
            h.push_str(&format!("{k}: {v}\r\n"));
        }
        self.keep_alive &= len.is_some() && status < 400;
        h.push_str(&format!(
            "x-request-id: {}\r\nconnection: {}\r\n\r\n",
            self.request_id,
            if self.keep_alive {
                "keep-alive"
            } else {
                "close"
            }
        ));
        self.responded = true;
        self.status = status;
        self.stream.write_all(h.as_bytes())
    }

    /// A complete JSON response.
    pub fn send_json(&mut self, status: u16, body: &Value, extra: &[(&'static str, String)]) {
        let bytes = body.to_string().into_bytes();
        if self
            .write_head(status, "application/json", Some(bytes.len()), extra)
            .is_ok()
        {
            let _ = self.stream.write_all(&bytes);
            let _ = self.stream.flush();
        }
    }

    /// A complete response with a body of another type.
    pub fn send_text(&mut self, status: u16, content_type: &'static str, body: &str) {
        if self
            .write_head(status, content_type, Some(body.len()), &[])
            .is_ok()
        {
            let _ = self.stream.write_all(body.as_bytes());
            let _ = self.stream.flush();
        }
    }

    pub fn send_error(&mut self, e: &ApiError) {
        self.send_json(e.status, &e.body(), &e.headers);
    }

    /// The status line and headers of an event stream.
    pub fn start_sse(&mut self) -> io::Result<()> {
        self.write_head(
            200,
            "text/event-stream",
            None,
            &[("cache-control", "no-cache".into())],
        )
    }

    /// One `data: …` event.
    pub fn sse(&mut self, data: &str) -> io::Result<()> {
        self.stream
            .write_all(format!("data: {data}\n\n").as_bytes())?;
        self.stream.flush()
    }

    /// Whether the client closed the connection or it failed (a nonblocking peek sees
    /// end-of-stream or an error). Bytes waiting to be read mean the client is still there.
    pub fn peer_gone(&self) -> bool {
        if self.stream.set_nonblocking(true).is_err() {
            return true;
        }
        let mut b = [0u8; 1];
        let gone = match self.stream.peek(&mut b) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => false,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => false,
            Err(_) => true,
        };
        let _ = self.stream.set_nonblocking(false);
        gone
    }
}

/// The client's `x-request-id` when it is a short token, else a fresh one.
fn request_id(head: Option<&Head>) -> String {
    if let Some(id) = head.and_then(|h| h.header("x-request-id")) {
        if (1..=128).contains(&id.len())
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
        {
            return id.to_string();
        }
    }
    format!("req-{:016x}", crate::random_u64())
}

/// Reads the request head; `Ok(None)` when the connection closed or failed before one came
/// (nothing to answer). Returns the head and the body bytes read with it.
fn read_head(
    stream: &mut TcpStream,
    deadline: &mut Deadline,
) -> Result<Option<(Head, Vec<u8>)>, ApiError> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        if !buf.is_empty() {
            deadline.arm(stream)?;
        }
        let n = match stream.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) && !buf.is_empty() =>
            {
                return Err(Deadline::expired("head"));
            }
            Err(_) => return Ok(None),
        };
        if n == 0 {
            if buf.is_empty() {
                return Ok(None);
            }
            return Err(ApiError::invalid(
                "the connection closed in the middle of the request head",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
        deadline.start();
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf) {
            Ok(httparse::Status::Complete(len)) => {
                let target = req.path.unwrap_or("/");
                let path = target.split(['?', '#']).next().unwrap_or("/").to_string();
                let close = req.headers.iter().any(|h| {
                    h.name.eq_ignore_ascii_case("connection")
                        && String::from_utf8_lossy(h.value)
                            .split(',')
                            .any(|t| t.trim().eq_ignore_ascii_case("close"))
                });
                let head = Head {
                    keep_alive: req.version == Some(1) && !close,
                    method: req.method.unwrap_or("").to_string(),
                    path,
                    headers: req
                        .headers
                        .iter()
                        .map(|h| {
                            (
                                h.name.to_ascii_lowercase(),
                                String::from_utf8_lossy(h.value).trim().to_string(),
                            )
                        })
                        .collect(),
                };
                return Ok(Some((head, buf[len..].to_vec())));
            }
            Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
                return Err(ApiError::new(
                    431,
                    "invalid_request_error",
                    format!("the request head is over {MAX_HEAD} bytes"),
                ));
            }
            Ok(httparse::Status::Partial) => {}
            Err(httparse::Error::TooManyHeaders) => {
                return Err(ApiError::new(
                    431,
                    "invalid_request_error",
                    "the request has more than 64 headers",
                ));
            }
            Err(e) => return Err(ApiError::invalid(format!("malformed HTTP request: {e}"))),
        }
    }
}

/// Reads the body the head announces (Content-Length only), refusing it before reading when
/// it is over the limit.
fn read_body(
    conn: &mut Conn,
    head: &Head,
    mut body: Vec<u8>,
    max: usize,
    deadline: &mut Deadline,
) -> Result<Vec<u8>, ApiError> {
    if let Some(te) = head.header("transfer-encoding") {
        return Err(ApiError::new(
            411,
            "invalid_request_error",
            format!("request bodies with transfer-encoding ({te}) are not supported; send the body with a content-length header"),
        ));
    }
    let mut len: Option<usize> = None;
    for (_, v) in head.headers.iter().filter(|(n, _)| n == "content-length") {
        let n: usize = v
            .parse()
            .map_err(|_| ApiError::invalid(format!("content-length '{v}' is not a number")))?;
        if len.is_some_and(|l| l != n) {
            return Err(ApiError::invalid(
                "the request has conflicting content-length headers",
            ));
        }
        len = Some(n);
    }
    let len = len.unwrap_or(0);
    if len > max {
        return Err(ApiError::new(
            413,
            "invalid_request_error",
            format!("the request body is {len} bytes, over this server's limit of {max} bytes"),
        ));
    }
    if body.len() >= len {
        // bytes after the body (a pipelined request) are not kept: the connection closes
        conn.keep_alive &= body.len() == len;
        body.truncate(len);
        return Ok(body);
    }
    if head
        .header("expect")
        .is_some_and(|e| e.eq_ignore_ascii_case("100-continue"))
    {
        let _ = conn.stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
    }
    let mut have = body.len();
    body.resize(len, 0);
    while have < len {
        deadline.arm(&conn.stream)?;
        match conn.stream.read(&mut body[have..]) {
            Ok(0) => {
                return Err(ApiError::invalid(format!(
                    "the connection closed after {have} of the {len}-byte request body"
                )))
            }
            Ok(n) => have += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(Deadline::expired("body"))
            }
            Err(e) => {
                return Err(ApiError::invalid(format!(
                    "could not read the {len}-byte request body: {e}"
                )))
            }
        }
    }
    Ok(body)
}

/// The time a request has from its first byte to its last (`request_timeout`): each read waits
/// at most what is left of it (and at most `io_timeout`).
pub(crate) struct Deadline {
    limit: Option<Duration>,
    io: Option<Duration>,
    end: Option<Instant>,
}

impl Deadline {
    pub(crate) fn new(limit: Duration, io: Option<Duration>) -> Deadline {
        let limit = Some(limit).filter(|t| !t.is_zero());
        Deadline {
            limit,
            io,
            end: None,
        }
    }

    /// The request's first byte came: the clock starts (once).
    fn start(&mut self) {
        if self.end.is_none() {
            self.end = self.limit.map(|l| Instant::now() + l);
        }
    }

    /// Sets the stream's read timeout to what is left; 408 when nothing is.
    fn arm(&mut self, stream: &TcpStream) -> Result<(), ApiError> {
        self.start();
        let Some(end) = self.end else { return Ok(()) };
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Deadline::expired("request"));
        }
        let t = self.io.map_or(left, |io| io.min(left));
        let _ = stream.set_read_timeout(Some(t));
        Ok(())
    }

    fn expired(what: &str) -> ApiError {
        ApiError::new(
            408,
            "invalid_request_error",
            format!("timed out reading the request {what}: send the whole request within the server's request timeout"),
        )
    }
}

/// Ends the connection: our side is shut for writing (the client sees the end of a
/// close-delimited body), then whatever the client still sends is read and dropped for a
/// moment, so that closing with unread data does not reset the connection under the response.
/// A client cut off at the request deadline (408) gets a short moment only: it is not sending
/// a request any more, just holding a connection.
fn linger_close(stream: TcpStream, status: u16) {
    let _ = stream.shutdown(Shutdown::Write);
    let moment = if status == 408 { 200 } else { 2000 };
    let deadline = Instant::now() + Duration::from_millis(moment);
    let mut s = stream;
    let mut buf = [0u8; 8192];
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        if left.is_zero() || s.set_read_timeout(Some(left)).is_err() {
            break;
        }
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
}

/// What the access log line reports beyond method, path and status.
#[derive(Default)]
pub(crate) struct LogExtra {
    pub text: String,
    /// A generation request (chat or completions), counted in /metrics when answered.
    pub generation: bool,
    /// The generation stopped early: the client left or the server shut down.
    pub cancelled: bool,
}

/// Too many open connections: a quick 503 from the accept loop.
pub(crate) fn refuse_overloaded(stream: TcpStream, shared: &Shared) {
    let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
    let mut conn = Conn {
        stream,
        request_id: request_id(None),
        responded: false,
        status: 0,
        keep_alive: false,
    };
    let e = ApiError::new(
        503,
        "server_error",
        format!(
            "the server has {} connections open, its limit; retry later",
            shared.cfg.max_connections
        ),
    )
    .header("retry-after", "1");
    conn.send_error(&e);
    shared.metrics.request(Outcome::Rejected);
    if shared.cfg.log {
        eprintln!(
            "[metainfer-server] {} - - 503 (too many connections)",
            conn.request_id
        );
    }
    let _ = conn.stream.shutdown(Shutdown::Both);
}

enum Route {
    Models,
    Model(String),
    Chat,
    Completions,
    Health,
    Metrics,
}

/// The route of a path, and the method it takes.
fn route(path: &str) -> Option<(Route, &'static str)> {
    let p = path
        .strip_prefix("/v1")
        .filter(|r| r.starts_with('/'))
        .unwrap_or(path);
    let p = if p.len() > 1 {
        p.trim_end_matches('/')
    } else {
        p
    };
    Some(match p {
        "/models" => (Route::Models, "GET"),
        "/chat/completions" => (Route::Chat, "POST"),
        "/completions" => (Route::Completions, "POST"),
        "/health" => (Route::Health, "GET"),
        "/metrics" => (Route::Metrics, "GET"),
        _ => match p.strip_prefix("/models/") {
            Some(id) if !id.is_empty() => (Route::Model(id.to_string()), "GET"),
            _ => return None,
        },
    })
}

/// Serves the requests of a connection: one, or several while the client keeps it alive
/// (each waits at most `keep_alive` for its first byte).
pub(crate) fn handle_connection(stream: TcpStream, shared: &Arc<Shared>) {
    let timeout = Some(shared.cfg.io_timeout).filter(|t| !t.is_zero());
    let _ = stream.set_write_timeout(timeout);
    let _ = stream.set_nodelay(true);
    let mut conn = Conn {
        stream,
        request_id: String::new(),
        responded: false,
        status: 0,
        keep_alive: false,
    };
    for n in 0.. {
        let idle = if n == 0 {
            timeout
        } else {
            Some(shared.cfg.keep_alive)
        };
        let _ = conn.stream.set_read_timeout(idle);
        (conn.responded, conn.status) = (false, 0);
        if !serve_one(&mut conn, shared, timeout) || shared.shutdown.load(Ordering::SeqCst) {
            break;
        }
    }
    linger_close(conn.stream, conn.status);
}

/// Reads and answers one request; whether the connection stays open for another.
fn serve_one(conn: &mut Conn, shared: &Arc<Shared>, timeout: Option<Duration>) -> bool {
    let t0 = Instant::now();
    let mut deadline = Deadline::new(shared.cfg.request_timeout, timeout);
    let head = read_head(&mut conn.stream, &mut deadline);
    let mut extra = LogExtra::default();
    let (method, path) = match head {
        Ok(None) => return false,
        Err(e) => {
            conn.request_id = request_id(None);
            conn.keep_alive = false;
            extra.text = format!(" {}", e.message);
            conn.send_error(&e);
            ("-".to_string(), "-".to_string())
        }
        Ok(Some((head, rest))) => {
            conn.request_id = request_id(Some(&head));
            conn.keep_alive = head.keep_alive && !shared.cfg.keep_alive.is_zero();
            let r = serve(conn, shared, &head, rest, &mut extra, &mut deadline);
            if let Err(e) = r {
                if extra.text.is_empty() {
                    extra.text = format!(" {}", e.message);
                }
                if !conn.responded {
                    conn.send_error(&e);
                }
            }
            (head.method, head.path)
        }
    };
    if extra.generation {
        shared.metrics.request(match conn.status {
            _ if extra.cancelled => Outcome::Cancelled,
            200 => Outcome::Ok,
            429 | 503 => Outcome::Rejected,
            _ => Outcome::Error,
        });
    }
    if shared.cfg.log {
        let status = if conn.responded {
            conn.status.to_string()
        } else {
            "-".into()
        };
        eprintln!(
            "[metainfer-server] {} {method} {path} {status} {:.0}ms{}",
            conn.request_id,
            t0.elapsed().as_secs_f64() * 1e3,
            extra.text
        );
    }
    conn.responded && conn.keep_alive
}

fn serve(
    conn: &mut Conn,
    shared: &Arc<Shared>,
    head: &Head,
    rest: Vec<u8>,
    extra: &mut LogExtra,
    deadline: &mut Deadline,
) -> Result<(), ApiError> {
    let Some((route, method)) = route(&head.path) else {
        return Err(
            ApiError::invalid(format!("unknown route: {} {}", head.method, head.path))
                .code("not_found")
                .status(404),
        );
    };
    if head.method != method {
        return Err(ApiError::new(
            405,
            "invalid_request_error",
            format!("{} takes {method}, not {}", head.path, head.method),
        )
        .code("method_not_allowed")
        .header("allow", method));
    }
    match route {
        Route::Models => {
            conn.send_json(
                200,
                &json!({"object": "list", "data": [api::model_object(shared)]}),
                &[],
            );
            Ok(())
        }
        Route::Model(id) => {
            if id != shared.model_id {
                return Err(ApiError::invalid(format!(
                    "the model '{id}' does not exist; this server serves '{}'",
                    shared.model_id
                ))
                .param("model")
                .code("model_not_found")
                .status(404));
            }
            conn.send_json(200, &api::model_object(shared), &[]);
            Ok(())
        }
        Route::Health => {
            conn.send_json(200, &json!({"status": "ok"}), &[]);
            Ok(())
        }
        Route::Metrics => {
            let text = metrics::render(shared);
            conn.send_text(200, "text/plain; version=0.0.4; charset=utf-8", &text);
            Ok(())
        }
        Route::Chat | Route::Completions => {
            extra.generation = true;
            let body = read_body(conn, head, rest, shared.cfg.max_body_bytes, deadline)?;
            let v = parse_json(&body)?;
            let chat = matches!(route, Route::Chat);
            let req = api::parse_request(&v, chat, shared)?;
            let Some(_admitted) = admit(shared) else {
                return Err(ApiError::new(
                    429,
                    "rate_limit_error",
                    format!(
                        "the server is busy: {} requests are already running or waiting for the engine; retry later",
                        shared.cfg.max_concurrent
                    ),
                )
                .code("rate_limit_exceeded")
                .header("retry-after", "1"));
            };
            api::generate(conn, shared, req, extra)
        }
    }
}

impl ApiError {
    pub fn status(mut self, s: u16) -> Self {
        self.status = s;
        self
    }
}

fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(ApiError::invalid(
            "the request body is empty; send a JSON object",
        ));
    }
    let v: Value = crate::serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid(format!("the request body is not valid JSON: {e}")))?;
    if !v.is_object() {
        return Err(ApiError::invalid("the request body must be a JSON object"));
    }
    Ok(v)
}

/// Admits a generation request unless `max_concurrent` are admitted already.
fn admit(shared: &Arc<Shared>) -> Option<CountGuard> {
    let max = shared.cfg.max_concurrent;
    shared
        .admitted
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
            (n < max).then_some(n + 1)
        })
        .ok()
        .map(|_| CountGuard(shared.clone(), |s| &s.admitted))
}
