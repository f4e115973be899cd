//! `demo-engine serve` end to end: the real binary on a free port with the tiny committed model,
//! driven by a real HTTP client (ureq), and by the official python `openai` client when it is
//! installed.

mod common;
use metainfer::rt::serde_json::{self, json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The server process; killed when dropped.
struct Served {
    child: Child,
    /// `http://ADDR/v1`
    base: String,
    /// stderr lines after the "listening on" line.
    log: Arc<Mutex<Vec<String>>>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    fn start(extra: &[&str]) -> Served {
        Served::start_model(
            &common::tiny_model(),
            &[&["--threads", "1"], extra].concat(),
        )
    }

    fn start_model(model: &std::path::Path, extra: &[&str]) -> Served {
        let mut child = Command::new(env!("CARGO_BIN_EXE_demo-engine"))
            .args(["serve", "--model"])
            .arg(model)
            .args(["--port", "0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot start demo-engine");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let log = Arc::new(Mutex::new(Vec::new()));
        let log2 = log.clone();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                match (&tx, line.strip_prefix("listening on ")) {
                    (Some(t), Some(url)) => {
                        let _ = t.send(Ok(url.to_string()));
                        tx = None;
                    }
                    (Some(t), None) if line.starts_with("error") => {
                        let _ = t.send(Err(line));
                    }
                    _ => log2.lock().unwrap().push(line),
                }
            }
        });
        let mut served = Served {
            child,
            base: String::new(),
            log,
        };
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(Ok(url)) => served.base = url,
            Ok(Err(e)) => panic!("demo-engine serve failed: {e}"),
            Err(_) => panic!("demo-engine serve printed no 'listening on' line"),
        }
        assert!(
            served.base.starts_with("http://127.0.0.1:") && served.base.ends_with("/v1"),
            "{}",
            served.base
        );
        served
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let agent = ureq::AgentBuilder::new()
            .timeout(Duration::from_secs(60))
            .build();
        let r = match agent.post(&self.url(path)).send_json(body) {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(e) => panic!("transport error: {e}"),
        };
        assert!(r.header("x-request-id").is_some());
        (r.status(), r.into_json().unwrap())
    }
}

#[test]
fn completions_are_deterministic_when_greedy() {
    let s = Served::start(&[]);
    let models: Value = ureq::get(&s.url("/models"))
        .call()
        .unwrap()
        .into_json()
        .unwrap();
    assert_eq!(models["data"][0]["id"], "tiny-qwen2");
    let ctx = models["data"][0]["context_length"].as_u64().unwrap();
    assert!(ctx > 16, "{models}");

    let req = json!({"model": "tiny-qwen2", "prompt": "hello world", "max_tokens": 8, "temperature": 0, "ignore_eos": true});
    let (st, a) = s.post("/completions", req.clone());
    assert_eq!(st, 200, "{a}");
    let (st, b) = s.post("/completions", req);
    assert_eq!(st, 200, "{b}");
    let text = a["choices"][0]["text"].as_str().unwrap();
    assert!(!text.is_empty(), "{a}");
    assert_eq!(
        a["choices"][0]["text"], b["choices"][0]["text"],
        "greedy output differs between two calls"
    );
    assert_eq!(a["choices"][0]["finish_reason"], "length");
    assert_eq!(a["model"], "tiny-qwen2");
    assert!(a["id"].as_str().unwrap().starts_with("cmpl-"));
    assert_ne!(a["id"], b["id"]);
    let u = &a["usage"];
    assert_eq!(u["completion_tokens"], 8);
    assert!(u["prompt_tokens"].as_u64().unwrap() >= 2, "{u}");
    assert_eq!(
        u["total_tokens"].as_u64(),
        Some(u["prompt_tokens"].as_u64().unwrap() + 8)
    );
    assert_eq!(
        a["usage"], b["usage"],
        "the second call's prompt came from the KV cache but usage counts all of it"
    );

    // too long for the context: 400 context_length_exceeded
    let (st, e) = s.post(
        "/completions",
        json!({"prompt": "hello", "max_tokens": ctx}),
    );
    assert_eq!(st, 400, "{e}");
    assert_eq!(e["error"]["code"], "context_length_exceeded");

    // the request log
    let t0 = Instant::now();
    while !s
        .log
        .lock()
        .unwrap()
        .iter()
        .any(|l| l.contains("POST /v1/completions 200"))
    {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "no request log line: {:?}",
            s.log.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Continuous batching on the real model: eight greedy requests served together get the
/// tokens each gets alone (the engine's steps are bitwise per sequence; a step shared with
/// others runs every token through the four-token kernels, a step alone through forward's,
/// which agree to about 2% of the logit scale, and here on every token).
#[test]
fn requests_served_together_get_their_tokens_alone() {
    let Some(model) = common::real_model() else {
        return;
    };
    let s = Served::start_model(&model, &["--threads", "2", "--engine", "avx2", "--quiet"]);
    let prompts = [
        "def quicksort(arr):\n",
        "fn fibonacci(n: u64) -> u64 {\n",
        "# Print the sum of a CSV column\nimport csv\n",
        "SELECT name, COUNT(*) FROM orders\n",
        "class LRUCache:\n    def __init__(self, capacity):\n",
        "#include <stdio.h>\nint main(void) {\n",
        "async function fetchJson(url) {\n",
        "package main\n\nimport \"fmt\"\n",
    ];
    let req =
        |p: &str| json!({"prompt": p, "max_tokens": 48, "temperature": 0, "ignore_eos": true});
    let text = |(st, v): (u16, Value)| {
        assert_eq!(st, 200, "{v}");
        v["choices"][0]["text"].as_str().unwrap().to_string()
    };
    let alone: Vec<String> = prompts
        .iter()
        .map(|p| text(s.post("/completions", req(p))))
        .collect();
    let t0 = Instant::now();
    let together: Vec<String> = std::thread::scope(|sc| {
        let hs: Vec<_> = prompts
            .iter()
            .map(|p| sc.spawn(|| s.post("/completions", req(p))))
            .collect();
        hs.into_iter().map(|h| text(h.join().unwrap())).collect()
    });
    println!(
        "8 requests of 48 tokens together in {:.2}s",
        t0.elapsed().as_secs_f64()
    );
    for ((p, a), t) in prompts.iter().zip(&alone).zip(&together) {
        assert_eq!(
            a, t,
            "{p:?}: served beside seven others it gets other tokens than alone"
        );
    }
}

#[test]
fn chat_with_the_fixture_template() {
    let s = Served::start(&["--quiet"]);
    let msgs = json!([{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hi."}]);
    let (st, v) = s.post(
        "/chat/completions",
        json!({"messages": msgs, "max_tokens": 6, "temperature": 0, "ignore_eos": true}),
    );
    assert_eq!(st, 200, "{v}");
    let c = &v["choices"][0];
    assert_eq!(c["message"]["role"], "assistant");
    assert!(!c["message"]["content"].as_str().unwrap().is_empty(), "{v}");
    assert_eq!(c["finish_reason"], "length");
    assert_eq!(v["usage"]["completion_tokens"], 6);
    // the rendered template is longer than the two messages' words
    assert!(v["usage"]["prompt_tokens"].as_u64().unwrap() > 8, "{v}");

    // streamed: role first, pieces, finish, usage, [DONE]
    let body = json!({"messages": msgs, "max_tokens": 6, "temperature": 0, "ignore_eos": true, "stream": true,
                      "stream_options": {"include_usage": true}});
    let r = ureq::post(&s.url("/chat/completions"))
        .send_json(body)
        .unwrap();
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let text = r.into_string().unwrap();
    let events: Vec<&str> = text
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| e.strip_prefix("data: ").unwrap())
        .collect();
    assert_eq!(*events.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["completion_tokens"], 6);
    assert_eq!(
        chunks[chunks.len() - 2]["choices"][0]["finish_reason"],
        "length"
    );
    let streamed: String = chunks
        .iter()
        .filter_map(|c| c["choices"].get(0)?["delta"]["content"].as_str())
        .collect();
    assert!(!streamed.is_empty());

    // /metrics counts both requests and their tokens
    let m = ureq::get(&s.url("/metrics"))
        .call()
        .unwrap()
        .into_string()
        .unwrap();
    let value = |series: &str| {
        m.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no {series} in {m}"))
    };
    let model = v["model"].as_str().unwrap();
    let ok = format!("metainfer_requests_total{{model=\"{model}\",outcome=\"ok\"}}");
    assert_eq!(value(&ok), 2.0, "{m}");
    let generated = format!("metainfer_generated_tokens_total{{model=\"{model}\"}}");
    assert_eq!(value(&generated), 12.0, "{m}");
    let prompt = format!("metainfer_prompt_tokens_total{{model=\"{model}\"}}");
    assert!(value(&prompt) > 8.0, "{m}");
}

#[test]
fn chat_template_kwargs_from_the_server_and_the_request() {
    // tiny-qwen3 carries Qwen3's template: enable_thinking = false adds an empty think block to
    // the generation prompt. The server's --chat-template-kwargs turn it off for every request,
    // a request's own turn it back on; usage.prompt_tokens counts what each rendered.
    let tiny = common::tiny_qwen3();
    let s = Served::start_model(
        &tiny,
        &[
            "--threads",
            "1",
            "--quiet",
            "--chat-template-kwargs",
            r#"{"enable_thinking": false}"#,
            "--reasoning-format",
            "deepseek",
        ],
    );
    let msgs = [metainfer::Message::user("Say hi.")];
    let m = demo_engine::load(&tiny, demo_engine::Which::Generic).unwrap();
    let count = |thinking: bool| {
        let mut kw = metainfer::TemplateKwargs::new();
        kw.insert("enable_thinking".into(), json!(thinking));
        let text = m.render_chat_with(&msgs, true, &kw).unwrap();
        assert_eq!(text.contains("<think>"), !thinking, "{text:?}");
        m.encode(&text).len() as u64
    };
    let (off, on) = (count(false), count(true));
    assert!(off > on, "the empty think block adds tokens: {off} vs {on}");
    let body = |kw: Value| {
        json!({"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 2, "temperature": 0,
               "chat_template_kwargs": kw})
    };
    let (st, v) = s.post("/chat/completions", body(Value::Null));
    assert_eq!(
        (st, v["usage"]["prompt_tokens"].as_u64()),
        (200, Some(off)),
        "{v}"
    );
    // --reasoning-format deepseek: the message carries reasoning_content (empty here: the tiny
    // model's noise does not open with <think>; rt's server tests split a real block)
    assert!(
        v["choices"][0]["message"]["reasoning_content"].is_string(),
        "{v}"
    );
    let (st, v) = s.post("/chat/completions", body(json!({"enable_thinking": true})));
    assert_eq!(
        (st, v["usage"]["prompt_tokens"].as_u64()),
        (200, Some(on)),
        "{v}"
    );
    for bad in [json!("enable_thinking"), json!({"messages": []})] {
        let (st, v) = s.post("/chat/completions", body(bad.clone()));
        assert_eq!(st, 400, "{bad}: {v}");
        assert_eq!(v["error"]["param"], "chat_template_kwargs", "{v}");
    }
    // the CLI refuses a value that is not a JSON object, before loading anything
    let out = Command::new(env!("CARGO_BIN_EXE_demo-engine"))
        .args(["serve", "--model"])
        .arg(&tiny)
        .args(["--chat-template-kwargs", "enable_thinking=false"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("--chat-template-kwargs") && err.contains("not JSON"),
        "{err}"
    );
}

#[test]
fn a_template_file_that_opens_the_think_block_makes_the_reply_reasoning() {
    // Qwen3 Thinking-2507's and DeepSeek-R1's generation prompts open the think block
    // themselves, so the reply starts inside it. --chat-template-file gives tiny-qwen3 such a
    // template; with --reasoning-format deepseek the reply up to </think> is reasoning_content.
    let tiny = common::tiny_qwen3();
    let dir = tempfile::tempdir().unwrap();
    let template = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}";
    let file = dir.path().join("thinking.jinja");
    std::fs::write(&file, template).unwrap();
    let msgs = [metainfer::Message::user("Say hi.")];
    let mut m = demo_engine::load(&tiny, demo_engine::Which::Generic).unwrap();
    m.set_chat_template(template).unwrap();
    let prompt = m.render_chat(&msgs, true).unwrap();
    assert!(prompt.ends_with("<think>\n"), "{prompt:?}");
    let ids = m.encode(&prompt);
    let p = metainfer::GenParams::greedy(8);
    let want = m.generate_ids(&ids, &p, &mut |_, _| true).unwrap().0;
    let want = m.decode(&want);
    let (r, c) = want.split_once("</think>").unwrap_or((want.as_str(), ""));
    let (want_r, want_c) = (r.trim_matches('\n'), c.trim_start_matches('\n'));
    assert!(
        !want_r.is_empty(),
        "the tiny model wrote something: {want:?}"
    );

    let s = Served::start_model(
        &tiny,
        &[
            "--threads",
            "1",
            "--quiet",
            "--engine",
            "generic",
            "--reasoning-format",
            "deepseek",
            "--chat-template-file",
            file.to_str().unwrap(),
        ],
    );
    let body = json!({"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 8, "temperature": 0});
    let (st, v) = s.post("/chat/completions", body);
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        v["usage"]["prompt_tokens"].as_u64(),
        Some(ids.len() as u64),
        "{v}"
    );
    let msg = &v["choices"][0]["message"];
    assert_eq!(
        (msg["reasoning_content"].as_str(), msg["content"].as_str()),
        (Some(want_r), Some(want_c)),
        "{v}"
    );

    // a template that does not compile, or no file at all: the CLI says which and stops
    let bad = dir.path().join("bad.jinja");
    std::fs::write(&bad, "{% for m in %}").unwrap();
    for (path, says) in [
        (bad.clone(), "does not compile"),
        (
            dir.path().join("missing.jinja"),
            "cannot read the chat template",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_demo-engine"))
            .args(["serve", "--port", "0", "--model"])
            .arg(&tiny)
            .arg("--chat-template-file")
            .arg(&path)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(says) && err.contains(path.to_str().unwrap()),
            "{err}"
        );
    }
}

#[test]
fn client_leaving_mid_stream_cancels() {
    let s = Served::start(&[]);
    let addr = s
        .base
        .trim_start_matches("http://")
        .trim_end_matches("/v1")
        .to_string();
    let models: Value = ureq::get(&s.url("/models"))
        .call()
        .unwrap()
        .into_json()
        .unwrap();
    let max = models["data"][0]["context_length"].as_u64().unwrap() - 8;
    let body = json!({"prompt": "hello", "max_tokens": max, "temperature": 0, "ignore_eos": true, "stream": true}).to_string();
    let mut c = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        c,
        "POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut rd = BufReader::new(&c);
    let mut line = String::new();
    rd.read_line(&mut line).unwrap();
    assert!(line.starts_with("HTTP/1.1 200"), "{line}");
    while !line.starts_with("data: ") {
        line.clear();
        rd.read_line(&mut line).unwrap();
    }
    drop(rd);
    drop(c);
    let t0 = Instant::now();
    loop {
        let log = s.log.lock().unwrap();
        if let Some(l) = log.iter().find(|l| l.contains("POST /v1/completions")) {
            // cancelled, unless the tiny model was fast enough to finish before it noticed
            assert!(
                l.contains("client gone") || l.contains(&format!("gen={max}")),
                "{l}"
            );
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "no log line: {log:?}"
        );
        drop(log);
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether python3 can import the `openai` package (else the test skips, saying so).
fn python_openai() -> bool {
    let has = Command::new("python3")
        .args(["-c", "import openai"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has {
        println!("skipped: the python openai package is not installed (pip install openai)");
    }
    has
}

#[test]
fn official_python_openai_client() {
    if !python_openai() {
        return;
    }
    let s = Served::start(&["--quiet"]);
    let script = r#"
import sys, openai
c = openai.OpenAI(base_url=sys.argv[1], api_key="none")
m = c.models.list().data[0].id
r = c.chat.completions.create(model=m, messages=[{"role": "user", "content": "hi"}], max_tokens=4, temperature=0)
assert r.choices[0].message.role == "assistant" and r.usage.completion_tokens <= 4, r
parts = [ch.choices[0].delta.content or "" for ch in c.chat.completions.create(model=m, messages=[{"role": "user", "content": "hi"}], max_tokens=4, temperature=0, stream=True) if ch.choices]
t = c.completions.create(model=m, prompt="hello", max_tokens=3, temperature=0)
assert t.choices[0].finish_reason in ("stop", "length"), t
try:
    c.chat.completions.create(model=m, messages=[{"role": "user", "content": "hi"}], n=2)
    raise SystemExit("n=2 was accepted")
except openai.BadRequestError as e:
    assert "n = 1" in str(e), e
print("ok", m, repr("".join(parts)))
"#;
    let out = Command::new("python3")
        .args(["-c", script, &s.base])
        .output()
        .unwrap();
    let so = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && so.starts_with("ok tiny-qwen2"),
        "{so}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!("python openai client: {}", so.trim());
}

/// An OpenAI function tool.
fn weather_tool() -> Value {
    json!({"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city name"}}, "required": ["city"]}}})
}

/// Function calling on the real model: Qwen2.5-Coder's template lists the offered tools in its
/// system prompt, and greedy, the model answers a weather question with a Hermes block calling
/// get_weather for Paris, which comes back as a tool call, plain and streamed. The next turn (the
/// call and its result) renders to 233 tokens, as llama-server --jinja counts the same request
/// (measured 2026-12-08 with the anchor build; it also generates the same text for it). SmolLM2's
/// template ignores tools: offering them is a 400.
#[test]
fn the_real_model_calls_an_offered_function() {
    let Some(model) = common::real_model() else {
        return;
    };
    let s = Served::start_model(&model, &["--threads", "2", "--quiet"]);
    let user = json!({"role": "user", "content": "What is the weather in Paris right now?"});
    let ask =
        json!({"messages": [user], "tools": [weather_tool()], "temperature": 0, "max_tokens": 64});
    let (st, v) = s.post("/chat/completions", ask.clone());
    assert_eq!(st, 200, "{v}");
    let c = &v["choices"][0];
    assert_eq!(c["finish_reason"], "tool_calls", "{v}");
    assert_eq!(c["message"]["content"], Value::Null, "{v}");
    let call = &c["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "get_weather", "{v}");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"city": "Paris"}), "{v}");
    assert_eq!(v["usage"]["prompt_tokens"], 181, "{v}");

    let mut streamed = ask.clone();
    streamed["stream"] = json!(true);
    let body = ureq::post(&s.url("/chat/completions"))
        .send_json(streamed)
        .unwrap()
        .into_string()
        .unwrap();
    let deltas: Vec<Value> = body
        .split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .filter(|e| *e != "[DONE]")
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    let calls: Vec<&Value> = deltas
        .iter()
        .filter_map(|d| d["choices"][0]["delta"]["tool_calls"].as_array())
        .flatten()
        .collect();
    assert_eq!(calls.len(), 1, "{body}");
    assert_eq!(
        (&calls[0]["index"], &calls[0]["function"]["arguments"]),
        (&json!(0), &call["function"]["arguments"]),
        "{body}"
    );
    assert_eq!(
        deltas.last().unwrap()["choices"][0]["finish_reason"],
        "tool_calls"
    );

    let turn = json!({"messages": [user, c["message"], {"role": "tool", "tool_call_id": call["id"], "content": "{\"temperature_c\": 18, \"sky\": \"sunny\"}"}],
                      "tools": [weather_tool()], "temperature": 0, "max_tokens": 64});
    let (st, v) = s.post("/chat/completions", turn);
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["usage"]["prompt_tokens"], 233, "{v}");
    drop(s);

    let Some(smol) = common::smollm2() else {
        return;
    };
    let s = Served::start_model(&smol, &["--threads", "2", "--quiet"]);
    let (st, v) = s.post("/chat/completions", ask);
    assert_eq!((st, &v["error"]["param"]), (400, &json!("tools")), "{v}");
}

/// The official python client reads the real model's call and sends the result back.
#[test]
fn official_python_openai_client_calls_a_function() {
    if !python_openai() {
        return;
    }
    let Some(model) = common::real_model() else {
        return;
    };
    let s = Served::start_model(&model, &["--threads", "2", "--quiet"]);
    let script = r#"
import json, sys, openai
c = openai.OpenAI(base_url=sys.argv[1], api_key="none")
tools = [json.loads(sys.argv[2])]
msgs = [{"role": "user", "content": "What is the weather in Paris right now?"}]
r = c.chat.completions.create(model="m", messages=msgs, tools=tools, temperature=0, max_tokens=64)
m = r.choices[0].message
assert r.choices[0].finish_reason == "tool_calls" and m.tool_calls, r
call = m.tool_calls[0]
assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}, call
msgs += [m.model_dump(exclude_none=True), {"role": "tool", "tool_call_id": call.id, "content": "18 C, sunny"}]
r2 = c.chat.completions.create(model="m", messages=msgs, tools=tools, temperature=0, max_tokens=16)
assert r2.choices[0].finish_reason in ("stop", "length", "tool_calls"), r2
print("ok", call.id, call.function.arguments)
"#;
    let out = Command::new("python3")
        .args(["-c", script, &s.base, &weather_tool().to_string()])
        .output()
        .unwrap();
    let so = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && so.starts_with("ok call_"),
        "{so}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!("python openai client: {}", so.trim());
}

/// `frequency_penalty`, `presence_penalty` and `logit_bias` reach the sampler: on the tiny model,
/// greedy, the server's completion equals the engine's own generation with those parameters (the
/// first greedy token banned, both penalties on), which differs from the plain greedy one.
#[test]
fn penalties_and_logit_bias_reach_the_sampler() {
    let mut m = demo_engine::load(&common::tiny_model(), demo_engine::Which::Generic).unwrap();
    let ids = m.encode("hello world");
    let plain = metainfer::GenParams {
        stop_at_eos: false,
        ..metainfer::GenParams::greedy(12)
    };
    let first = m.generate_ids(&ids, &plain, &mut |_, _| true).unwrap().0;
    let shaped = metainfer::GenParams {
        logit_bias: vec![(first[0], -100.0)],
        frequency_penalty: 0.5,
        presence_penalty: 1.5,
        ..plain.clone()
    };
    let want = m.generate_ids(&ids, &shaped, &mut |_, _| true).unwrap().0;
    assert_ne!(want[0], first[0], "the banned token was not chosen");
    let want = m.decode(&want);
    assert_ne!(want, m.decode(&first));
    let s = Served::start(&["--engine", "generic", "--quiet"]);
    let (st, v) = s.post(
        "/completions",
        json!({"prompt": "hello world", "max_tokens": 12, "temperature": 0, "ignore_eos": true,
               "logit_bias": {first[0].to_string(): -100}, "frequency_penalty": 0.5, "presence_penalty": 1.5}),
    );
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["choices"][0]["text"], json!(want), "{v}");
}
