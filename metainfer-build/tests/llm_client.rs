//! The llm client against a scripted loopback server: success, streaming, retries, hints,
//! timeouts, garbage replies, config.

mod support;

use metainfer_build::llm::{ChatMessage, ChatRequest, Client, LlmConfig, LlmError, Usage};
use std::time::{Duration, Instant};
use support::scripted_http::{
    chat_json, chat_sse, error_json, split_pieces, sse_events, ScriptedServer, Step, MODEL,
};

fn cfg(server: &ScriptedServer) -> LlmConfig {
    let mut c = LlmConfig::new(server.base_url(), "test-model");
    c.backoff_base = Duration::from_millis(1);
    c.backoff_max = Duration::from_millis(5);
    c.connect_timeout = Duration::from_secs(2);
    c.total_timeout = Duration::from_secs(5);
    c
}

fn request() -> ChatRequest {
    ChatRequest {
        messages: vec![
            ChatMessage::system("you write rust"),
            ChatMessage::user("fn add"),
        ],
        max_tokens: Some(64),
        temperature: Some(0.0),
        stop: vec!["```\n".into()],
        seed: Some(7),
        repeat_penalty: None,
    }
}

fn chat(
    c: LlmConfig,
) -> (
    Result<metainfer_build::llm::ChatReply, LlmError>,
    Vec<String>,
) {
    let mut deltas = Vec::new();
    let r = Client::new(c).chat(&request(), &mut |d| deltas.push(d.to_string()));
    (r, deltas)
}

fn sse(chunks: Vec<Vec<u8>>) -> Step {
    Step::Sse {
        headers: vec![],
        chunks: chunks.into_iter().map(|c| (c, Duration::ZERO)).collect(),
    }
}

#[test]
fn success_without_streaming() {
    let server = ScriptedServer::start(vec![chat_json("fn add(a: i32, b: i32) -> i32 { a + b }")]);
    let mut c = cfg(&server);
    c.stream = false;
    let (r, deltas) = chat(c);
    let r = r.unwrap();
    assert_eq!(r.content, "fn add(a: i32, b: i32) -> i32 { a + b }");
    assert_eq!(deltas, vec![r.content.clone()]);
    assert_eq!(r.model, MODEL);
    assert_eq!(r.finish_reason.as_deref(), Some("stop"));
    assert_eq!(
        r.usage,
        Some(Usage {
            prompt_tokens: 11,
            completion_tokens: r.content.chars().count() as u64
        })
    );
    assert!(r
        .request_id
        .as_deref()
        .unwrap()
        .starts_with("req-scripted-"));
    assert_eq!(r.attempts.len(), 1);
    assert_eq!(r.attempts[0].status, Some(200));
    assert_eq!(r.attempts[0].request_id, r.request_id);
    assert!(r.attempts[0].error.is_none());

    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(
        (reqs[0].method.as_str(), reqs[0].path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert!(reqs[0].header("authorization").is_none());
    let body = reqs[0].json();
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["stream"], false);
    assert!(body.get("stream_options").is_none());
    assert_eq!(
        body["messages"][0],
        serde_json::json!({"role": "system", "content": "you write rust"})
    );
    assert_eq!(body["messages"][1]["role"], "user");
    assert_eq!(
        (body["max_tokens"].as_u64(), body["seed"].as_u64()),
        (Some(64), Some(7))
    );
    assert_eq!(body["temperature"], 0.0);
    assert_eq!(body["stop"], serde_json::json!(["```\n"]));
    assert!(
        body.get("repeat_penalty").is_none(),
        "llama.cpp's extension only when set"
    );
}

#[test]
fn success_streaming_delivers_deltas_in_order_and_usage() {
    let content = "fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n";
    let server = ScriptedServer::start(vec![chat_sse(content, 6)]);
    let (r, deltas) = chat(cfg(&server));
    let r = r.unwrap();
    assert_eq!(r.content, content);
    assert_eq!(deltas, split_pieces(content, 6));
    assert_eq!(deltas.len(), 6);
    assert_eq!(
        r.usage,
        Some(Usage {
            prompt_tokens: 11,
            completion_tokens: content.chars().count() as u64
        })
    );
    assert_eq!(r.finish_reason.as_deref(), Some("stop"));
    assert_eq!(r.model, MODEL);
    assert!(r
        .request_id
        .as_deref()
        .unwrap()
        .starts_with("req-scripted-"));
    let body = server.requests()[0].json();
    assert_eq!(body["stream"], true);
    assert_eq!(
        body["stream_options"],
        serde_json::json!({"include_usage": true})
    );
    assert_eq!(
        server.requests()[0].header("accept"),
        Some("text/event-stream")
    );
}

#[test]
fn streaming_survives_events_split_at_odd_bytes() {
    let content = "h\u{e9}llo \u{1F600} w\u{f6}rld";
    let mut text: String = sse_events(content, 4, "chatcmpl-split").concat();
    text = text.replace("\n\n", "\r\n\r\n"); // mixed line endings: \r\n between events, \n nowhere else
    text.insert_str(0, ": keep-alive\n\nevent: message\nid: 1\n");
    let bytes = text.into_bytes();
    // 3-byte chunks: splits inside "data:", inside multi-byte chars and between \r and \n.
    let chunks: Vec<(Vec<u8>, Duration)> = bytes
        .chunks(3)
        .map(|c| (c.to_vec(), Duration::from_micros(200)))
        .collect();
    let server = ScriptedServer::start(vec![Step::Sse {
        headers: vec![],
        chunks,
    }]);
    let (r, deltas) = chat(cfg(&server));
    let r = r.unwrap();
    assert_eq!(r.content, content);
    assert_eq!(deltas.concat(), content);
    assert_eq!(
        r.request_id.as_deref(),
        Some("chatcmpl-split"),
        "no header: the body id"
    );
}

#[test]
fn multi_line_data_events_are_joined() {
    let event = "data: {\"id\":\"x\",\ndata: \"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\n";
    let server = ScriptedServer::start(vec![sse(vec![event.into(), b"data: [DONE]\n\n".to_vec()])]);
    let (r, _) = chat(cfg(&server));
    assert_eq!(r.unwrap().content, "ok");
}

#[test]
fn rate_limited_with_retry_after_ms_then_success() {
    let server = ScriptedServer::start(vec![
        error_json(
            429,
            "slow down",
            "rate_limit_error",
            vec![
                ("retry-after-ms".into(), "120.5".into()),
                ("x-request-id".into(), "rl-1".into()),
            ],
        ),
        chat_sse("fine", 2),
    ]);
    let t0 = Instant::now();
    let (r, _) = chat(cfg(&server));
    let r = r.unwrap();
    assert!(
        t0.elapsed() >= Duration::from_millis(120),
        "the hint was honoured: {:?}",
        t0.elapsed()
    );
    assert_eq!(r.content, "fine");
    assert_eq!(r.attempts.len(), 2);
    assert_eq!(r.attempts[0].status, Some(429));
    assert_eq!(r.attempts[0].request_id.as_deref(), Some("rl-1"));
    assert!(r.attempts[0]
        .error
        .as_deref()
        .unwrap()
        .contains("slow down"));
    assert_eq!(r.attempts[1].status, Some(200));
    assert!(r.attempts[1]
        .request_id
        .as_deref()
        .unwrap()
        .starts_with("req-scripted-"));
    assert_eq!(r.request_id, r.attempts[1].request_id);
    assert!(r.elapsed_ms >= 120);
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn unavailable_twice_then_success() {
    let server = ScriptedServer::start(vec![
        error_json(503, "overloaded", "server_error", vec![]),
        Step::Json {
            status: 502,
            headers: vec![("retry-after".into(), "Wed, 21 Oct 2015 07:28:00 GMT".into())],
            body: "<html>bad gateway</html>".into(),
        },
        chat_json("third time"),
    ]);
    let (r, _) = chat(cfg(&server));
    let r = r.unwrap();
    assert_eq!(r.content, "third time");
    let statuses: Vec<_> = r.attempts.iter().map(|a| a.status).collect();
    assert_eq!(statuses, vec![Some(503), Some(502), Some(200)]);
    assert!(r.attempts[1]
        .error
        .as_deref()
        .unwrap()
        .contains("bad gateway"));
}

#[test]
fn retry_hint_too_long_gives_up_at_once() {
    let server = ScriptedServer::start(vec![
        error_json(
            429,
            "quota",
            "rate_limit_error",
            vec![
                ("retry-after".into(), "120".into()),
                ("x-request-id".into(), "rl-9".into()),
            ],
        ),
        chat_json("never"),
    ]);
    let t0 = Instant::now();
    let (r, _) = chat(cfg(&server));
    assert!(t0.elapsed() < Duration::from_secs(2));
    match r.unwrap_err() {
        LlmError::RetryHintTooLong {
            hint,
            limit,
            request_id,
        } => {
            assert_eq!(hint, Duration::from_secs(120));
            assert_eq!(limit, Duration::from_secs(60));
            assert_eq!(request_id.as_deref(), Some("rl-9"));
        }
        e => panic!("{e:?}"),
    }
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn bad_request_fails_at_once_with_the_servers_message() {
    let server = ScriptedServer::start(vec![
        error_json(
            400,
            "max_tokens is too large: 99999",
            "invalid_request_error",
            vec![("x-request-id".into(), "br-1".into())],
        ),
        chat_json("never"),
    ]);
    let (r, deltas) = chat(cfg(&server));
    let e = r.unwrap_err();
    assert!(
        matches!(&e, LlmError::Status { status: 400, kind: Some(k), .. } if k == "invalid_request_error"),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("max_tokens is too large: 99999")
            && msg.contains("400")
            && msg.contains("br-1"),
        "{msg}"
    );
    assert!(!e.is_retryable());
    assert!(deltas.is_empty());
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn not_found_and_unauthorized_say_what_to_check() {
    let server = ScriptedServer::start(vec![Step::Json {
        status: 404,
        headers: vec![],
        body: "{\"detail\":\"Not Found\"}".into(),
    }]);
    let e = chat(cfg(&server)).0.unwrap_err();
    assert!(
        e.to_string().contains("Not Found") && e.to_string().contains("METAINFER_LLM_BASE_URL"),
        "{e}"
    );
    let server = ScriptedServer::start(vec![error_json(
        401,
        "invalid api key",
        "authentication_error",
        vec![],
    )]);
    let e = chat(cfg(&server)).0.unwrap_err();
    assert!(
        e.to_string().contains("invalid api key")
            && e.to_string().contains("METAINFER_LLM_API_KEY"),
        "{e}"
    );
}

#[test]
fn hanging_server_times_out_and_is_retried_then_gives_up() {
    let server =
        ScriptedServer::start((0..3).map(|_| Step::Hang(Duration::from_secs(4))).collect());
    let mut c = cfg(&server);
    c.total_timeout = Duration::from_millis(700);
    c.max_retries = 2;
    let t0 = Instant::now();
    let e = chat(c).0.unwrap_err();
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(2000) && took < Duration::from_secs(4),
        "{took:?}"
    );
    match &e {
        LlmError::GaveUp { attempts: 3, last } => {
            assert!(
                matches!(**last, LlmError::Timeout { ref what, after } if what == "response" && after == Duration::from_millis(700)),
                "{last:?}"
            )
        }
        e => panic!("{e:?}"),
    }
    assert!(e.to_string().contains("timed out"), "{e}");
    assert_eq!(server.requests().len(), 3);
}

#[test]
fn stream_stalling_midway_times_out() {
    let events = sse_events("a slow reply", 3, "stall");
    let chunks = vec![
        (events[0].clone().into_bytes(), Duration::ZERO),
        (events[1].clone().into_bytes(), Duration::ZERO),
        (events[2].clone().into_bytes(), Duration::from_secs(5)),
    ];
    let server = ScriptedServer::start(vec![Step::Sse {
        headers: vec![],
        chunks,
    }]);
    let mut c = cfg(&server);
    c.total_timeout = Duration::from_millis(800);
    c.max_retries = 0;
    let t0 = Instant::now();
    let (r, deltas) = chat(c);
    assert!(
        t0.elapsed() < Duration::from_millis(2500),
        "{:?}",
        t0.elapsed()
    );
    match r.unwrap_err() {
        LlmError::GaveUp { attempts: 1, last } => {
            assert!(matches!(*last, LlmError::Timeout { .. }), "{last:?}")
        }
        e => panic!("{e:?}"),
    }
    assert_eq!(deltas.len(), 1, "the piece before the stall was delivered");
}

#[test]
fn connection_closed_without_reply_is_retried() {
    let server = ScriptedServer::start(vec![
        Step::Close,
        Step::Raw(b"HTTP/1.1 20".to_vec()),
        chat_json("after close"),
    ]);
    let (r, _) = chat(cfg(&server));
    let r = r.unwrap();
    assert_eq!(r.content, "after close");
    assert_eq!(r.attempts.len(), 3);
    assert!(r.attempts[0].status.is_none() && r.attempts[0].error.is_some());
    assert!(r.attempts[1].status.is_none() && r.attempts[1].error.is_some());
}

#[test]
fn connection_refused_is_retried_then_gives_up() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut c = LlmConfig::new(format!("http://127.0.0.1:{port}/v1"), "m");
    c.backoff_base = Duration::from_millis(1);
    c.max_retries = 2;
    let e = chat(c).0.unwrap_err();
    match &e {
        LlmError::GaveUp { attempts: 3, last } => {
            assert!(matches!(**last, LlmError::Transport(_)), "{last:?}")
        }
        e => panic!("{e:?}"),
    }
}

#[test]
fn garbage_sse_line_is_a_protocol_error() {
    let server = ScriptedServer::start(vec![
        sse(vec![b"data: <html>oops</html>\n\n".to_vec()]),
        chat_sse("never", 1),
    ]);
    let e = chat(cfg(&server)).0.unwrap_err();
    assert!(
        matches!(
            e,
            LlmError::Protocol {
                retryable: false,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string().contains("not json") && e.to_string().contains("<html>oops"),
        "{e}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn truncated_json_event_is_a_protocol_error() {
    let server = ScriptedServer::start(vec![sse(vec![
        b"data: {\"choices\":[{\"delta\":{\"content\":\"a\n\ndata: [DONE]\n\n".to_vec(),
    ])]);
    let e = chat(cfg(&server)).0.unwrap_err();
    assert!(
        matches!(e, LlmError::Protocol { .. })
            && e.to_string().contains("stream event 1 is not json"),
        "{e}"
    );
}

#[test]
fn stream_ending_without_done_is_retried_then_reported() {
    let cut = |n: usize| {
        let ev = sse_events("cut short", 3, "cut");
        sse(ev[..n]
            .iter()
            .map(|e| e.clone().into_bytes())
            .chain([b"data: {\"choi".to_vec()])
            .collect())
    };
    let server = ScriptedServer::start(vec![cut(2), cut(3)]);
    let mut c = cfg(&server);
    c.max_retries = 1;
    let (r, _) = chat(c);
    let e = r.unwrap_err();
    match &e {
        LlmError::GaveUp { attempts: 2, last } => assert!(
            matches!(
                **last,
                LlmError::Protocol {
                    retryable: true,
                    ..
                }
            ),
            "{last:?}"
        ),
        e => panic!("{e:?}"),
    }
    assert!(
        e.to_string().contains("stream ended early") && e.to_string().contains("cut off"),
        "{e}"
    );

    let server = ScriptedServer::start(vec![cut(2), chat_sse("whole", 2)]);
    assert_eq!(chat(cfg(&server)).0.unwrap().content, "whole");
}

#[test]
fn error_event_inside_the_stream_is_an_error() {
    let ev = sse_events("partial", 2, "err");
    let server = ScriptedServer::start(vec![sse(vec![
        ev[0].clone().into_bytes(),
        ev[1].clone().into_bytes(),
        b"data: {\"error\":{\"message\":\"context length exceeded\",\"type\":\"invalid_request_error\"}}\n\n".to_vec(),
    ])]);
    let e = chat(cfg(&server)).0.unwrap_err();
    assert!(
        matches!(&e, LlmError::InReply { message, .. } if message == "context length exceeded"),
        "{e:?}"
    );
    assert!(!e.is_retryable());
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn html_body_is_a_protocol_error() {
    let html = "<!DOCTYPE html><html><head><title>Welcome to nginx!</title></head><body>hello</body></html>";
    for stream in [true, false] {
        let server = ScriptedServer::start(vec![Step::Json {
            status: 200,
            headers: vec![("Content-Type".into(), "text/html".into())],
            body: html.into(),
        }]);
        let mut c = cfg(&server);
        c.stream = stream;
        let e = chat(c).0.unwrap_err();
        assert!(
            matches!(
                e,
                LlmError::Protocol {
                    retryable: false,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(
            e.to_string().contains("Welcome to nginx") && e.to_string().contains("not json"),
            "{e}"
        );
    }
}

#[test]
fn json_without_choices_or_content_is_a_protocol_error() {
    let server = ScriptedServer::start(vec![Step::Json {
        status: 200,
        headers: vec![],
        body: "{\"object\":\"list\",\"data\":[]}".into(),
    }]);
    let e = chat(cfg(&server)).0.unwrap_err();
    assert!(
        e.to_string().contains("no \"choices\"") && e.to_string().contains("\"object\""),
        "{e}"
    );

    let empty = "{\"id\":\"e\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":\"stop\"}]}";
    let server = ScriptedServer::start(vec![
        Step::Json {
            status: 200,
            headers: vec![],
            body: empty.into(),
        },
        chat_json("now some"),
    ]);
    let r = chat(cfg(&server)).0.unwrap();
    assert_eq!(r.content, "now some");
    assert!(r.attempts[0]
        .error
        .as_deref()
        .unwrap()
        .contains("no content"));
}

#[test]
fn server_ignoring_stream_still_works() {
    let server = ScriptedServer::start(vec![chat_json("plain json")]);
    let (r, deltas) = chat(cfg(&server));
    assert_eq!(r.unwrap().content, "plain json");
    assert_eq!(deltas, vec!["plain json".to_string()]);
}

#[test]
fn authorization_header_sent_when_api_key_set() {
    let server = ScriptedServer::start(vec![chat_json("ok")]);
    let mut c = cfg(&server);
    c.api_key = Some("sk-test-123".into());
    chat(c).0.unwrap();
    assert_eq!(
        server.requests()[0].header("Authorization"),
        Some("Bearer sk-test-123")
    );
    assert_eq!(
        server.requests()[0].header("content-type"),
        Some("application/json")
    );
}

#[test]
fn exhausted_script_answers_500() {
    let server = ScriptedServer::start(vec![]);
    let mut c = cfg(&server);
    c.max_retries = 1;
    let e = chat(c).0.unwrap_err();
    assert!(
        e.to_string().contains("script exhausted") && e.to_string().contains("500"),
        "{e}"
    );
    assert_eq!(server.requests().len(), 2);
}

mod config {
    use super::*;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn nothing_configured_is_none() {
        assert!(LlmConfig::from_vars(vars(&[])).unwrap().is_none());
    }

    #[test]
    fn missing_model_names_the_variable() {
        let e = LlmConfig::from_vars(vars(&[(
            "METAINFER_LLM_BASE_URL",
            "http://127.0.0.1:8080/v1",
        )]))
        .unwrap_err();
        assert!(matches!(e, LlmError::Config(_)));
        assert!(e.to_string().contains("METAINFER_LLM_MODEL"), "{e}");
    }

    #[test]
    fn bad_number_names_the_variable() {
        let e = LlmConfig::from_vars(vars(&[
            ("METAINFER_LLM_BASE_URL", "http://127.0.0.1:8080/v1"),
            ("METAINFER_LLM_MODEL", "m"),
            ("METAINFER_LLM_TIMEOUT_S", "ten"),
        ]))
        .unwrap_err();
        assert!(
            e.to_string().contains("METAINFER_LLM_TIMEOUT_S") && e.to_string().contains("\"ten\""),
            "{e}"
        );
        let e = LlmConfig::from_vars(vars(&[
            ("METAINFER_LLM_BASE_URL", "http://127.0.0.1:8080/v1"),
            ("METAINFER_LLM_MODEL", "m"),
            ("METAINFER_LLM_CONNECT_TIMEOUT_S", "0"),
        ]))
        .unwrap_err();
        assert!(
            e.to_string().contains("METAINFER_LLM_CONNECT_TIMEOUT_S"),
            "{e}"
        );
    }

    #[test]
    fn url_without_scheme_is_rejected() {
        let e = LlmConfig::from_vars(vars(&[
            ("METAINFER_LLM_BASE_URL", "localhost:8080/v1"),
            ("METAINFER_LLM_MODEL", "m"),
        ]))
        .unwrap_err();
        assert!(
            e.to_string().contains("METAINFER_LLM_BASE_URL") && e.to_string().contains("http://"),
            "{e}"
        );
    }

    #[test]
    fn file_with_env_override() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("llm.toml");
        std::fs::write(
            &path,
            "base_url = \"https://llm.example/v1/\"\nmodel = \"from-file\"\napi_key = \"sk-file\"\ntimeout_s = 90\nconnect_timeout_s = 2.5\nmax_retries = 2\nstream = false\n",
        )
        .unwrap();
        let p = path.to_str().unwrap();
        let c = LlmConfig::from_vars(vars(&[("METAINFER_LLM_CONFIG", p)]))
            .unwrap()
            .unwrap();
        assert_eq!(
            (c.base_url.as_str(), c.model.as_str(), c.api_key.as_deref()),
            ("https://llm.example/v1", "from-file", Some("sk-file"))
        );
        assert_eq!(
            (c.total_timeout, c.connect_timeout),
            (Duration::from_secs(90), Duration::from_millis(2500))
        );
        assert_eq!((c.max_retries, c.stream), (2, false));

        let c = LlmConfig::from_vars(vars(&[
            ("METAINFER_LLM_CONFIG", p),
            ("METAINFER_LLM_MODEL", "from-env"),
            ("METAINFER_LLM_STREAM", "1"),
            ("METAINFER_LLM_MAX_RETRIES", "0"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            (c.model.as_str(), c.stream, c.max_retries),
            ("from-env", true, 0)
        );
        assert_eq!(c.base_url, "https://llm.example/v1");
    }

    #[test]
    fn file_errors_name_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("llm.toml");
        let p = path.to_str().unwrap().to_string();
        let load = |text: &str| {
            std::fs::write(&path, text).unwrap();
            LlmConfig::from_vars(vars(&[("METAINFER_LLM_CONFIG", &p)]))
                .unwrap_err()
                .to_string()
        };
        let e = load("base_url = \"http://x/v1\"\nmodel = \"m\"\ntemperature = 0.2\n");
        assert!(
            e.contains("unknown key \"temperature\"") && e.contains("max_retries"),
            "{e}"
        );
        let e = load("base_url = \"http://x/v1\"\nmodel = \"m\"\ntimeout_s = \"soon\"\n");
        assert!(e.contains("timeout_s in") && e.contains(&p), "{e}");
        let e = load("model = \"m\"\n");
        assert!(
            e.contains("base_url") && e.contains("METAINFER_LLM_BASE_URL"),
            "{e}"
        );
        let e = load("base_url = \"http://x/v1\"\n");
        assert!(e.contains("METAINFER_LLM_MODEL"), "{e}");
        let e = load("base_url = [\n");
        assert!(e.contains("not valid toml"), "{e}");
        let e = LlmConfig::from_vars(vars(&[("METAINFER_LLM_CONFIG", "/nonexistent/llm.toml")]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/nonexistent/llm.toml") && e.contains("METAINFER_LLM_CONFIG"),
            "{e}"
        );
    }
}
