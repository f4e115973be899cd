//! A scripted loopback HTTP server for tests (std::net only).
//!
//! [`ScriptedServer::start`] binds `127.0.0.1:0` and answers the incoming requests, in order,
//! with the given [`Step`]s, each connection on its own thread (so a [`Step::Hang`] does not
//! block the next request); once the script runs out it answers 500 "script exhausted". Every
//! response closes its connection. [`ScriptedServer::requests`] returns what it received.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// How to answer one request.
pub enum Step {
    /// A `Content-Length` response. `Content-Type: application/json` unless `headers` set one.
    Json {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// A 200 `text/event-stream` response, chunked: each chunk is written (as one HTTP chunk)
    /// after its delay. The byte split is whatever the chunks say, events may straddle them.
    Sse {
        headers: Vec<(String, String)>,
        chunks: Vec<(Vec<u8>, Duration)>,
    },
    /// Read the request, then say nothing for this long, then close.
    Hang(Duration),
    /// Read the request, close without a response.
    Close,
    /// Read the request, write these bytes verbatim, close (for broken HTTP).
    Raw(Vec<u8>),
}

/// One request as received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Recorded {
    /// The first header of that name, compared case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON (panics when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("request body is not json ({e}): {}", self.body))
    }
}

struct Shared {
    steps: Mutex<VecDeque<Step>>,
    requests: Mutex<Vec<Recorded>>,
    stop: AtomicBool,
}

/// See the module docs. Dropping it stops accepting connections.
pub struct ScriptedServer {
    port: u16,
    shared: Arc<Shared>,
}

impl ScriptedServer {
    pub fn start(steps: Vec<Step>) -> ScriptedServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().expect("local addr").port();
        let shared = Arc::new(Shared {
            steps: Mutex::new(steps.into()),
            requests: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
        });
        let accept_shared = Arc::clone(&shared);
        thread::spawn(move || {
            for conn in listener.incoming() {
                if accept_shared.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let shared = Arc::clone(&accept_shared);
                thread::spawn(move || serve(conn, &shared));
            }
        });
        ScriptedServer { port, shared }
    }

    /// `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// The requests received so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// How many steps are left unserved.
    pub fn steps_left(&self) -> usize {
        self.shared.steps.lock().unwrap().len()
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port)); // wake the accept loop
    }
}

fn serve(conn: TcpStream, shared: &Shared) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(match conn.try_clone() {
        Ok(c) => c,
        Err(_) => return,
    });
    let Some(request) = read_request(&mut reader) else {
        return;
    };
    if shared.stop.load(Ordering::SeqCst) {
        return;
    }
    // Record and take the step under one lock, so the n-th recorded request got the n-th step.
    let step = {
        let mut requests = shared.requests.lock().unwrap();
        requests.push(request);
        shared.steps.lock().unwrap().pop_front()
    };
    let mut conn = conn;
    let step = step.unwrap_or_else(|| Step::Json {
        status: 500,
        headers: vec![],
        body: "script exhausted".into(),
    });
    let _ = answer(&mut conn, step);
    let _ = conn.flush();
    let _ = conn.shutdown(Shutdown::Both);
}

fn read_request(reader: &mut impl BufRead) -> Option<Recorded> {
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end_matches(['\r', '\n']);
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    let len = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).ok()?;
    Some(Recorded {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        408 => "Request Timeout",
        409 => "Conflict",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Whatever",
    }
}

fn head(status: u16, defaults: &[(&str, String)], headers: &[(String, String)]) -> String {
    let mut out = format!(
        "HTTP/1.1 {status} {}\r\nConnection: close\r\n",
        reason(status)
    );
    for (k, v) in defaults {
        if !headers.iter().any(|(h, _)| h.eq_ignore_ascii_case(k)) {
            out.push_str(&format!("{k}: {v}\r\n"));
        }
    }
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    out
}

fn answer(conn: &mut TcpStream, step: Step) -> std::io::Result<()> {
    match step {
        Step::Json {
            status,
            headers,
            body,
        } => {
            let defaults = [("Content-Type", "application/json".to_string())];
            let mut out = head(status, &defaults, &headers).into_bytes();
            // Content-Length is always ours: it must match the body.
            let at = out.len() - 2;
            out.splice(
                at..at,
                format!("Content-Length: {}\r\n", body.len()).into_bytes(),
            );
            out.extend_from_slice(body.as_bytes());
            conn.write_all(&out)
        }
        Step::Sse { headers, chunks } => {
            let defaults = [
                ("Content-Type", "text/event-stream".to_string()),
                ("Cache-Control", "no-cache".to_string()),
            ];
            let mut h = head(200, &defaults, &headers);
            h.insert_str(h.len() - 2, "Transfer-Encoding: chunked\r\n");
            conn.write_all(h.as_bytes())?;
            conn.flush()?;
            for (bytes, delay) in chunks {
                thread::sleep(delay);
                if bytes.is_empty() {
                    continue; // an empty chunk would end the body
                }
                conn.write_all(format!("{:x}\r\n", bytes.len()).as_bytes())?;
                conn.write_all(&bytes)?;
                conn.write_all(b"\r\n")?;
                conn.flush()?;
            }
            conn.write_all(b"0\r\n\r\n")
        }
        Step::Hang(d) => {
            thread::sleep(d);
            Ok(())
        }
        Step::Close => Ok(()),
        Step::Raw(bytes) => conn.write_all(&bytes),
    }
}

static NEXT_ID: AtomicUsize = AtomicUsize::new(1);

/// A fresh request id, `req-scripted-N`.
pub fn next_request_id() -> String {
    format!("req-scripted-{}", NEXT_ID.fetch_add(1, Ordering::SeqCst))
}

/// The model id the helpers report.
pub const MODEL: &str = "scripted-model";

/// Token counts the helpers report: prompt 11, completion = content chars.
pub fn usage_of(content: &str) -> (u64, u64) {
    (11, content.chars().count() as u64)
}

/// A 200 `chat.completion` with that content, usage, an `id` and an `x-request-id` header.
pub fn chat_json(content: &str) -> Step {
    let rid = next_request_id();
    let (p, c) = usage_of(content);
    let body = serde_json::json!({
        "id": format!("chatcmpl-{rid}"),
        "object": "chat.completion",
        "created": 0,
        "model": MODEL,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c},
    });
    Step::Json {
        status: 200,
        headers: vec![("x-request-id".into(), rid)],
        body: body.to_string(),
    }
}

/// The SSE events (as text, each ending in a blank line) of a streamed reply: a role chunk,
/// `pieces` content deltas, a finish chunk, a usage chunk and `[DONE]`.
pub fn sse_events(content: &str, pieces: usize, id: &str) -> Vec<String> {
    let chunk = |choices: serde_json::Value, usage: serde_json::Value| {
        let v = serde_json::json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": MODEL, "choices": choices, "usage": usage});
        format!("data: {v}\n\n")
    };
    let mut events = vec![chunk(
        serde_json::json!([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]),
        serde_json::Value::Null,
    )];
    for piece in split_pieces(content, pieces) {
        events.push(chunk(
            serde_json::json!([{"index": 0, "delta": {"content": piece}, "finish_reason": null}]),
            serde_json::Value::Null,
        ));
    }
    events.push(chunk(
        serde_json::json!([{"index": 0, "delta": {}, "finish_reason": "stop"}]),
        serde_json::Value::Null,
    ));
    let (p, c) = usage_of(content);
    events.push(chunk(
        serde_json::json!([]),
        serde_json::json!({"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}),
    ));
    events.push("data: [DONE]\n\n".to_string());
    events
}

/// `content` split into `pieces` (at least 1) runs of about equal numbers of chars.
pub fn split_pieces(content: &str, pieces: usize) -> Vec<String> {
    let chars: Vec<char> = content.chars().collect();
    let pieces = pieces.max(1).min(chars.len().max(1));
    let per = chars.len().div_ceil(pieces).max(1);
    chars.chunks(per).map(|c| c.iter().collect()).collect()
}

/// The same reply as [`chat_json`], streamed: one HTTP chunk per event.
pub fn chat_sse(content: &str, pieces: usize) -> Step {
    let rid = next_request_id();
    let events = sse_events(content, pieces, &format!("chatcmpl-{rid}"));
    Step::Sse {
        headers: vec![("x-request-id".into(), rid)],
        chunks: events
            .into_iter()
            .map(|e| (e.into_bytes(), Duration::ZERO))
            .collect(),
    }
}

/// A JSON error response in the OpenAI shape, `{"error": {"message", "type", "code"}}`.
pub fn error_json(status: u16, message: &str, kind: &str, headers: Vec<(String, String)>) -> Step {
    let body = serde_json::json!({"error": {"message": message, "type": kind, "code": null}});
    Step::Json {
        status,
        headers,
        body: body.to_string(),
    }
}
