//! The OpenAI-compatible server against a fake, deterministic backend, with a real HTTP client
//! (ureq) and raw sockets where the test needs to misbehave (huge bodies, disconnects).

use metainfer_rt::serde_json::{json, Value};
use metainfer_rt::server::{Backend, Server, ServerConfig, ServerHandle};
use metainfer_rt::{Error, FinishReason, GenParams, Message, Stats, TemplateKwargs};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the fake backend saw and did.
#[derive(Default, Debug)]
struct Record {
    /// Generations finished (or cancelled).
    done: usize,
    /// Tokens the last generation produced.
    produced: usize,
    finish: Option<FinishReason>,
    params: Option<GenParams>,
    messages: Vec<Message>,
    kwargs: TemplateKwargs,
    prompt: String,
}

/// Emits "tok0 tok1 …" with `delay` per token; prompt tokens are whitespace-separated words.
/// One generation at a time (`serial`), like an engine with one KV cache.
struct Fake {
    serial: Mutex<()>,
    state: Arc<Mutex<Record>>,
    delay: Duration,
    max_seq: usize,
}

impl Fake {
    fn run(
        &self,
        n_prompt: usize,
        p: &GenParams,
        on_text: &mut dyn FnMut(&str) -> bool,
    ) -> metainfer_rt::Result<(String, Stats)> {
        let _one = self.serial.lock().unwrap_or_else(|e| e.into_inner());
        let mut text = String::new();
        let (mut produced, mut finish) = (0, FinishReason::Length);
        for i in 0..p.max_tokens {
            std::thread::sleep(self.delay);
            if p.stop.iter().any(|s| *s == format!("tok{i}")) {
                finish = FinishReason::Stop;
                break;
            }
            produced += 1;
            let piece = if i == 0 {
                format!("tok{i}")
            } else {
                format!(" tok{i}")
            };
            text.push_str(&piece);
            if !on_text(&piece) {
                finish = FinishReason::Cancelled;
                break;
            }
        }
        let mut r = self.state.lock().unwrap();
        r.done += 1;
        r.produced = produced;
        r.finish = Some(finish);
        r.params = Some(p.clone());
        Ok((
            text,
            Stats {
                prompt_tokens: n_prompt,
                gen_tokens: produced,
                finish,
                ..Stats::default()
            },
        ))
    }
}

impl Backend for Fake {
    fn model_id(&self) -> String {
        "fake-model".into()
    }
    fn max_seq(&self) -> usize {
        self.max_seq
    }
    fn count_tokens(&self, text: &str) -> usize {
        text.split_whitespace().count()
    }
    fn complete(
        &self,
        prompt: &str,
        p: &GenParams,
        on_text: &mut dyn FnMut(&str) -> bool,
    ) -> metainfer_rt::Result<(String, Stats)> {
        self.state.lock().unwrap().prompt = prompt.to_string();
        match prompt {
            "PANIC" => panic!("the fake engine panicked on purpose"),
            "ENGINE_ERR" => return Err(Error::Tokenizer("the fake tokenizer broke".into())),
            _ => {}
        }
        self.run(self.count_tokens(prompt), p, on_text)
    }
    fn chat(
        &self,
        messages: &[Message],
        kwargs: &TemplateKwargs,
        p: &GenParams,
        on_text: &mut dyn FnMut(&str) -> bool,
    ) -> metainfer_rt::Result<(String, Stats)> {
        let mut r = self.state.lock().unwrap();
        (r.messages, r.kwargs) = (messages.to_vec(), kwargs.clone());
        drop(r);
        if let Some(reply) = messages.iter().find_map(|m| scripted(&m.content)) {
            // a scripted reply, in pieces that cut through its tags
            let chars: Vec<char> = reply.chars().collect();
            for p in chars.chunks(3) {
                if !on_text(&p.iter().collect::<String>()) {
                    break;
                }
            }
            let (text, n) = (reply.to_string(), chars.chunks(3).len());
            let mut r = self.state.lock().unwrap();
            (r.done, r.produced) = (r.done + 1, n);
            let finish = FinishReason::Stop;
            let stats = Stats {
                prompt_tokens: 1,
                gen_tokens: n,
                finish,
                ..Stats::default()
            };
            return Ok((text, stats));
        }
        if messages.iter().any(|m| m.content == "NO_TEMPLATE") {
            return Err(Error::Template(
                "the model file has no chat template".into(),
            ));
        }
        let n: usize = messages.iter().map(|m| self.count_tokens(&m.content)).sum();
        self.run(n, p, on_text)
    }
    fn chat_prompt(&self, messages: &[Message], kwargs: &TemplateKwargs) -> Option<String> {
        let open = messages.iter().any(|m| m.content == "THINK_OPEN");
        // a template that takes tools, unless a message says it does not
        let tools = match messages.iter().any(|m| m.content == "PLAIN_TEMPLATE") {
            true => None,
            false => kwargs.get("tools"),
        };
        Some(format!(
            "{}<user>…</user>{}",
            tools.map_or(String::new(), |t| format!("<tools>{t}</tools>")),
            if open { "<think>\n" } else { "" }
        ))
    }
}

/// The fake model's reply to a message that asks for one by name: a reasoning model's (THINK;
/// THINK_OPEN: its prompt opened the block, see chat_prompt), calls of functions (CALL...).
fn scripted(content: &str) -> Option<&'static str> {
    Some(match content {
        "THINK" => "<think>\nstep one\n</think>\n\nthe answer",
        "THINK_OPEN" => "step one\n</think>\n\nthe answer",
        "CALL" | "PLAIN_TEMPLATE" => "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>",
        "CALL_TWO" => "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>",
        "CALL_BAD" => "<tool_call>\n{\"name\": \"launch_rockets\", \"arguments\": {}}\n</tool_call>",
        "THINK_CALL" => "<think>\nweather needed\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
        _ => return None,
    })
}

/// An OpenAI function tool, its fields in the order clients send them.
fn weather() -> Value {
    json!({"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}, "required": ["city"]}}})
}

struct Setup {
    server: ServerHandle,
    state: Arc<Mutex<Record>>,
}

impl Setup {
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.server.local_addr())
    }
    fn addr(&self) -> SocketAddr {
        self.server.local_addr()
    }
    /// Waits until the backend has finished `n` generations.
    fn wait_done(&self, n: usize) -> std::sync::MutexGuard<'_, Record> {
        let t0 = Instant::now();
        loop {
            let r = self.state.lock().unwrap();
            if r.done >= n {
                return r;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "the backend did not finish in time: {r:?}"
            );
            drop(r);
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// A server over a fake with a 64-token context.
fn start(delay_ms: u64, cfg: ServerConfig) -> Setup {
    start_ctx(delay_ms, 64, cfg)
}

fn start_ctx(delay_ms: u64, max_seq: usize, cfg: ServerConfig) -> Setup {
    let state = Arc::new(Mutex::new(Record::default()));
    let fake = Fake {
        serial: Mutex::new(()),
        state: state.clone(),
        delay: Duration::from_millis(delay_ms),
        max_seq,
    };
    let server = Server::bind("127.0.0.1:0", fake, cfg).unwrap().spawn();
    Setup { server, state }
}

fn quick() -> Setup {
    start(0, ServerConfig::default())
}

fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(10))
        .build()
}

struct Resp {
    status: u16,
    request_id: Option<String>,
    retry_after: Option<String>,
    content_type: Option<String>,
    body: String,
}

impl Resp {
    fn json(&self) -> Value {
        metainfer_rt::serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
    /// The error envelope, checked for its four fields.
    fn error(&self) -> Value {
        let v = self.json();
        let e = v["error"].clone();
        assert!(e.is_object(), "no error envelope: {}", self.body);
        for k in ["message", "type", "param", "code"] {
            assert!(
                e.get(k).is_some(),
                "the error envelope lacks '{k}': {}",
                self.body
            );
        }
        assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()));
        e
    }
}

fn to_resp(r: Result<ureq::Response, ureq::Error>) -> Resp {
    let r = match r {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("transport error: {e}"),
    };
    Resp {
        status: r.status(),
        request_id: r.header("x-request-id").map(str::to_string),
        retry_after: r.header("retry-after").map(str::to_string),
        content_type: r.header("content-type").map(str::to_string),
        body: r.into_string().unwrap(),
    }
}

fn post(url: &str, body: &str) -> Resp {
    to_resp(
        agent()
            .post(url)
            .set("content-type", "application/json")
            .send_string(body),
    )
}

fn post_json(url: &str, body: Value) -> Resp {
    let r = post(url, &body.to_string());
    assert!(r.request_id.is_some(), "no x-request-id");
    r
}

/// The `data:` payloads of an event stream.
fn sse_events(body: &str) -> Vec<String> {
    body.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            e.strip_prefix("data: ")
                .unwrap_or_else(|| panic!("not an SSE data event: {e:?}"))
                .to_string()
        })
        .collect()
}

/// Sends a POST on a raw socket and returns the socket (the response is not read).
fn raw_post(addr: SocketAddr, path: &str, body: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}", body.len()).unwrap();
    s
}

#[test]
fn models_lists_the_one_model() {
    let t = quick();
    let r = to_resp(agent().get(&t.url("/v1/models")).call());
    assert_eq!(r.status, 200);
    assert!(r.request_id.as_deref().is_some_and(|id| !id.is_empty()));
    let v = r.json();
    assert_eq!(v["object"], "list");
    assert_eq!(v["data"].as_array().unwrap().len(), 1);
    assert_eq!(v["data"][0]["id"], "fake-model");
    assert_eq!(v["data"][0]["object"], "model");
    assert_eq!(v["data"][0]["context_length"], 64);
    let r = to_resp(agent().get(&t.url("/v1/models/fake-model")).call());
    assert_eq!(
        (r.status, r.json()["id"].clone()),
        (200, json!("fake-model"))
    );
    let r = to_resp(agent().get(&t.url("/v1/models/other")).call());
    assert_eq!(r.status, 404);
    assert_eq!(r.error()["code"], "model_not_found");
    // the client's own request id is echoed
    let r = to_resp(
        agent()
            .get(&t.url("/v1/models"))
            .set("x-request-id", "abc-123")
            .call(),
    );
    assert_eq!(r.request_id.as_deref(), Some("abc-123"));
}

#[test]
fn model_id_can_be_overridden() {
    let t = start(
        0,
        ServerConfig {
            model_id: Some("my-name".into()),
            ..Default::default()
        },
    );
    let v = to_resp(agent().get(&t.url("/v1/models")).call()).json();
    assert_eq!(v["data"][0]["id"], "my-name");
    let v = post_json(
        &t.url("/v1/completions"),
        json!({"prompt": "a", "max_tokens": 1}),
    )
    .json();
    assert_eq!(v["model"], "my-name");
}

#[test]
fn chat_completion() {
    let t = quick();
    let r = post_json(
        &t.url("/v1/chat/completions"),
        json!({"model": "whatever", "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi there"}],
               "max_tokens": 5, "temperature": 0}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert!(v["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["model"], "fake-model");
    assert!(v["created"].as_u64().unwrap() > 1_600_000_000);
    let c = &v["choices"][0];
    assert_eq!(c["index"], 0);
    assert_eq!(c["message"]["role"], "assistant");
    assert_eq!(c["message"]["content"], "tok0 tok1 tok2 tok3 tok4");
    assert_eq!(c["finish_reason"], "length");
    assert_eq!(
        v["usage"],
        json!({"prompt_tokens": 4, "completion_tokens": 5, "total_tokens": 9})
    );
    let rec = t.wait_done(1);
    assert_eq!(
        rec.messages,
        vec![Message::system("be brief"), Message::user("hi there")]
    );
    let p = rec.params.clone().unwrap();
    assert_eq!((p.max_tokens, p.temperature), (5, 0.0));
}

#[test]
fn chat_content_parts_developer_role_and_max_completion_tokens() {
    let t = quick();
    let r = post_json(
        &t.url("/v1/chat/completions"),
        json!({"messages": [{"role": "developer", "content": "sys"},
                            {"role": "user", "content": [{"type": "text", "text": "one "}, {"type": "text", "text": "two"}]}],
               "max_completion_tokens": 2, "max_tokens": 9, "stop": "tok1"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v["choices"][0]["message"]["content"], "tok0");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    let rec = t.wait_done(1);
    assert_eq!(
        rec.messages,
        vec![Message::system("sys"), Message::user("one two")]
    );
    assert_eq!(rec.params.as_ref().unwrap().max_tokens, 2);
    drop(rec);
    // an image part is refused
    let r = post_json(
        &t.url("/v1/chat/completions"),
        json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}),
    );
    assert_eq!(r.status, 400);
    assert_eq!(r.error()["param"], "messages[0].content[0]");
}

#[test]
fn chat_stream_with_usage() {
    let t = start(1, ServerConfig::default());
    let r = post_json(
        &t.url("/v1/chat/completions"),
        json!({"messages": [{"role": "user", "content": "hello"}], "max_tokens": 6, "temperature": 0,
               "stream": true, "stream_options": {"include_usage": true}}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.content_type.as_deref(), Some("text/event-stream"));
    let ev = sse_events(&r.body);
    assert_eq!(ev.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = ev[..ev.len() - 1]
        .iter()
        .map(|e| metainfer_rt::serde_json::from_str(e).unwrap())
        .collect();
    let id = chunks[0]["id"].as_str().unwrap();
    assert!(id.starts_with("chatcmpl-"));
    assert!(chunks.iter().all(|c| c["id"] == id
        && c["object"] == "chat.completion.chunk"
        && c["model"] == "fake-model"));
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let (usage, rest) = chunks.split_last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(
        usage["usage"],
        json!({"prompt_tokens": 1, "completion_tokens": 6, "total_tokens": 7})
    );
    let (last, pieces) = rest.split_last().unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "length");
    assert!(pieces
        .iter()
        .all(|c| c["choices"][0]["finish_reason"].is_null() && c["usage"].is_null()));
    let text: String = pieces
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "tok0 tok1 tok2 tok3 tok4 tok5");
    assert_eq!(pieces.len(), 7, "the role chunk and one chunk per piece");
}

#[test]
fn stream_without_usage_has_no_usage_chunk() {
    let t = quick();
    let r = post_json(
        &t.url("/v1/completions"),
        json!({"prompt": "x y", "max_tokens": 3, "stream": true}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let ev = sse_events(&r.body);
    assert_eq!(ev.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = ev[..ev.len() - 1]
        .iter()
        .map(|e| metainfer_rt::serde_json::from_str(e).unwrap())
        .collect();
    assert!(chunks
        .iter()
        .all(|c| c["object"] == "text_completion" && c.get("usage").is_none()));
    let text: String = chunks
        .iter()
        .map(|c| c["choices"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "tok0 tok1 tok2");
    assert_eq!(
        chunks.last().unwrap()["choices"][0]["finish_reason"],
        "length"
    );
}

#[test]
fn completions() {
    let t = quick();
    let r = post_json(
        &t.url("/v1/completions"),
        json!({"prompt": "a b c", "max_tokens": 3, "temperature": 0}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert!(v["id"].as_str().unwrap().starts_with("cmpl-"));
    assert_eq!(v["object"], "text_completion");
    assert_eq!(v["choices"][0]["text"], "tok0 tok1 tok2");
    assert_eq!(v["choices"][0]["index"], 0);
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    assert_eq!(
        v["usage"],
        json!({"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6})
    );
    // an array of one string; stop as an array
    let v = post_json(
        &t.url("/v1/completions"),
        json!({"prompt": ["a"], "max_tokens": 9, "stop": ["tok2", "zzz"]}),
    )
    .json();
    assert_eq!(v["choices"][0]["text"], "tok0 tok1");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    // several prompts, token ids: refused
    for prompt in [json!(["a", "b"]), json!([1, 2, 3])] {
        let r = post_json(&t.url("/v1/completions"), json!({"prompt": prompt}));
        assert_eq!(r.status, 400);
        assert_eq!(r.error()["param"], "prompt");
    }
}

#[test]
fn parameter_mapping_and_defaults() {
    let t = start(
        0,
        ServerConfig {
            default_max_tokens: 100,
            ..Default::default()
        },
    );
    let r = post_json(
        &t.url("/v1/completions"),
        json!({"prompt": "w w w w", "temperature": 0.5, "top_p": 0.9, "top_k": 7, "min_p": 0.1, "seed": 42,
               "repeat_penalty": 1.1, "repeat_last_n": 32, "ignore_eos": true, "frequency_penalty": 0.5, "presence_penalty": 0,
               "user": "u", "logit_bias": {}}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let p = t.wait_done(1).params.clone().unwrap();
    assert_eq!(
        p,
        GenParams {
            max_tokens: 60, // the default 100, lowered to what the 64-token context leaves
            temperature: 0.5,
            top_k: 7,
            top_p: 0.9,
            min_p: 0.1,
            repeat_penalty: 1.1,
            frequency_penalty: 0.5,
            presence_penalty: 0.0,
            repeat_last_n: 32,
            logit_bias: vec![],
            seed: 42,
            stop: vec![],
            stop_at_eos: false,
        }
    );
    // nothing given: OpenAI's temperature 1.0 with GenParams::sampled's truncation
    let r = post_json(
        &t.url("/v1/chat/completions"),
        json!({"messages": [{"role": "user", "content": "q"}]}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let p = t.wait_done(2).params.clone().unwrap();
    let d = GenParams::sampled(100, 1.0, p.seed);
    assert_eq!(p, d);
}

#[test]
fn bad_json_is_400_with_where() {
    let t = quick();
    let r = post(&t.url("/v1/chat/completions"), "{\"messages\": [oops]}");
    assert_eq!(r.status, 400);
    let e = r.error();
    assert_eq!(e["type"], "invalid_request_error");
    let m = e["message"].as_str().unwrap();
    assert!(
        m.contains("not valid JSON") && m.contains("line 1 column"),
        "{m}"
    );
    for (body, param) in [
        (json!({}), "messages"),
        (json!({"messages": "hi"}), "messages"),
        (json!({"messages": []}), "messages"),
        (
            json!({"messages": [{"role": "robot", "content": "x"}]}),
            "messages[0].role",
        ),
        (
            json!({"messages": [{"role": "user", "content": 5}]}),
            "messages[0].content",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "temperature": "hot"}),
            "temperature",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "temperature": -1}),
            "temperature",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "top_p": 0}),
            "top_p",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "max_tokens": -3}),
            "max_tokens",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "stop": [""]}),
            "stop",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "stream": "yes"}),
            "stream",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "logprobs": true}),
            "logprobs",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]}),
            "tools[0].function",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "tools": {"type": "function"}}),
            "tools",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "retrieval"}]}),
            "tools[0].type",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "tools": [weather(), {"type": "function", "function": {"name": "get weather"}}]}),
            "tools[1].function.name",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "tools": [weather(), weather()]}),
            "tools[1].function.name",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": "{}"}}]}),
            "tools[0].function.parameters",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "tools": [weather()], "tool_choice": "required"}),
            "tool_choice",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "tools": [weather()], "parallel_tool_calls": "yes"}),
            "parallel_tool_calls",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "functions": [{"name": "f"}]}),
            "functions",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "tools": [weather()], "chat_template_kwargs": {"tools": []}}),
            "tools",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x", "tool_calls": []}]}),
            "messages[0].tool_calls",
        ),
        (
            json!({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"arguments": "{}"}}]}]}),
            "messages[0].tool_calls[0]",
        ),
        (
            json!({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": 5}}]}]}),
            "messages[0].tool_calls[0]",
        ),
        (
            json!({"messages": [{"role": "tool", "content": "22 C", "tool_call_id": 7}]}),
            "messages[0].tool_call_id",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "frequency_penalty": 3}),
            "frequency_penalty",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "presence_penalty": -2.5}),
            "presence_penalty",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "logit_bias": {"abc": 1}}),
            "logit_bias",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "logit_bias": {"5": 101}}),
            "logit_bias",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "logit_bias": [5]}),
            "logit_bias",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": "enable_thinking=false"}),
            "chat_template_kwargs",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"messages": []}}),
            "chat_template_kwargs",
        ),
    ] {
        let r = post_json(&t.url("/v1/chat/completions"), body.clone());
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        let e = r.error();
        assert_eq!(e["type"], "invalid_request_error", "{body}");
        assert_eq!(e["param"], param, "{body}: {}", r.body);
    }
    let r = post_json(
        &t.url("/v1/completions"),
        json!({"prompt": "x", "tools": [weather()]}),
    );
    assert_eq!((r.status, &r.error()["param"]), (400, &json!("tools")));
    let r = post(&t.url("/v1/completions"), "");
    assert_eq!(r.status, 400);
    assert!(r.error()["message"].as_str().unwrap().contains("empty"));
    let r = post(&t.url("/v1/completions"), "[1]");
    assert_eq!(r.status, 400);
    assert_eq!(
        t.state.lock().unwrap().done,
        0,
        "nothing reached the engine"
    );
}

#[test]
fn chat_template_kwargs_reach_the_backend_over_the_servers_own() {
    let mut cfg = ServerConfig::default();
    cfg.chat_template_kwargs
        .insert("enable_thinking".into(), json!(false));
    cfg.chat_template_kwargs
        .insert("style".into(), json!("terse"));
    let t = start(0, cfg);
    let msgs = json!([{"role": "user", "content": "x"}]);
    let r = post_json(
        &t.url("/v1/chat/completions"),
        json!({"messages": msgs, "max_tokens": 1}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let want = json!({"enable_thinking": false, "style": "terse"});
    assert_eq!(Value::Object(t.wait_done(1).kwargs.clone()), want);
    // the request's own override the server's key by key
    let r = post_json(
        &t.url("/v1/chat/completions"),
        json!({"messages": msgs, "max_tokens": 1, "chat_template_kwargs": {"enable_thinking": true, "tools_on": [1]}}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let want = json!({"enable_thinking": true, "style": "terse", "tools_on": [1]});
    assert_eq!(Value::Object(t.wait_done(2).kwargs.clone()), want);
    // a completion's prompt is not templated: refused rather than ignored
    let r = post_json(
        &t.url("/v1/completions"),
        json!({"prompt": "x", "chat_template_kwargs": {"enable_thinking": false}}),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.error()["param"], "chat_template_kwargs");
    assert_eq!(t.state.lock().unwrap().done, 2);
}

/// A streamed chat reply's content and its tool calls (each delta's, merged by index as
/// clients do), and the last finish_reason.
fn streamed_calls(body: &str) -> (String, Vec<Value>, String) {
    let (mut content, mut calls, mut finish) = (String::new(), Vec::<Value>::new(), String::new());
    for event in body.split("\n\n").filter_map(|e| e.strip_prefix("data: ")) {
        if event == "[DONE]" {
            break;
        }
        let v: Value = metainfer_rt::serde_json::from_str(event).unwrap();
        let c = &v["choices"][0];
        content.push_str(c["delta"]["content"].as_str().unwrap_or(""));
        for d in c["delta"]["tool_calls"].as_array().into_iter().flatten() {
            let i = d["index"].as_u64().unwrap() as usize;
            assert_eq!(i, calls.len(), "one delta per call, in order: {body}");
            calls.push(d.clone());
        }
        if let Some(f) = c["finish_reason"].as_str() {
            finish = f.to_string();
        }
    }
    (content, calls, finish)
}

#[test]
fn offered_tools_reach_the_template_and_calls_come_back_as_tool_calls() {
    let t = quick();
    let url = t.url("/v1/chat/completions");
    let ask = |content: &str, extra: Value| {
        let mut b =
            json!({"messages": [{"role": "user", "content": content}], "tools": [weather()]});
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        b
    };
    let r = post_json(&url, ask("CALL", json!({})));
    assert_eq!(r.status, 200, "{}", r.body);
    let c = &r.json()["choices"][0];
    assert_eq!(c["finish_reason"], "tool_calls", "{}", r.body);
    assert_eq!(c["message"]["content"], "Let me check.");
    let call = &c["message"]["tool_calls"][0];
    assert!(call["id"].as_str().unwrap().starts_with("call_"), "{call}");
    assert_eq!(call["type"], "function");
    assert_eq!(
        call["function"],
        json!({"name": "get_weather", "arguments": "{\"city\":\"Paris\",\"unit\":\"c\"}"})
    );
    // the template got the tools as sent, their keys in the client's order
    assert_eq!(
        t.state.lock().unwrap().kwargs["tools"].to_string(),
        json!([weather()]).to_string()
    );
    // streamed: the content, then one delta with the whole call
    let r = post_json(&url, ask("CALL", json!({"stream": true})));
    let (content, calls, finish) = streamed_calls(&r.body);
    assert_eq!(
        (content.as_str(), finish.as_str()),
        ("Let me check.", "tool_calls"),
        "{}",
        r.body
    );
    assert_eq!(calls.len(), 1, "{}", r.body);
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    assert!(calls[0]["id"].as_str().unwrap().starts_with("call_"));
    // two calls; with parallel_tool_calls false, the first
    let r = post_json(&url, ask("CALL_TWO", json!({})));
    let calls = r.json()["choices"][0]["message"]["tool_calls"].clone();
    assert_eq!(calls.as_array().map(Vec::len), Some(2), "{}", r.body);
    assert_eq!(calls[1]["function"]["arguments"], "{\"city\":\"Oslo\"}");
    assert_eq!(r.json()["choices"][0]["message"]["content"], Value::Null);
    for stream in [false, true] {
        let r = post_json(
            &url,
            ask(
                "CALL_TWO",
                json!({"parallel_tool_calls": false, "stream": stream}),
            ),
        );
        let n = match stream {
            false => r.json()["choices"][0]["message"]["tool_calls"]
                .as_array()
                .map_or(0, Vec::len),
            true => streamed_calls(&r.body).1.len(),
        };
        assert_eq!(n, 1, "{}", r.body);
    }
    // a call of a function not offered is text, as the model wrote it
    let bad = "<tool_call>\n{\"name\": \"launch_rockets\", \"arguments\": {}}\n</tool_call>";
    let r = post_json(&url, ask("CALL_BAD", json!({})));
    let c = &r.json()["choices"][0];
    assert_eq!(
        (&c["message"]["content"], &c["finish_reason"]),
        (&json!(bad), &json!("stop")),
        "{}",
        r.body
    );
    assert!(c["message"].get("tool_calls").is_none());
    let r = post_json(&url, ask("CALL_BAD", json!({"stream": true})));
    assert_eq!(
        streamed_calls(&r.body),
        (bad.to_string(), vec![], "stop".to_string())
    );
    // no tools, or tool_choice none: the template sees none and the reply is content
    for extra in [json!({"tools": []}), json!({"tool_choice": "none"})] {
        let r = post_json(&url, ask("CALL", extra.clone()));
        let c = &r.json()["choices"][0];
        assert!(
            c["message"]["content"]
                .as_str()
                .unwrap()
                .contains("<tool_call>"),
            "{extra}: {}",
            r.body
        );
        assert_eq!(c["finish_reason"], "stop");
        assert!(
            t.state.lock().unwrap().kwargs.get("tools").is_none(),
            "{extra}"
        );
    }
    // reasoning first, then the call
    let r = post_json(
        &url,
        ask("THINK_CALL", json!({"reasoning_format": "deepseek"})),
    );
    let m = &r.json()["choices"][0]["message"];
    assert_eq!(
        (&m["reasoning_content"], &m["content"]),
        (&json!("weather needed"), &Value::Null),
        "{}",
        r.body
    );
    assert_eq!(m["tool_calls"][0]["function"]["name"], "get_weather");
    let done = t.state.lock().unwrap().done;
    // a template that ignores the tools: refused before generation
    let r = post_json(&url, ask("PLAIN_TEMPLATE", json!({})));
    assert_eq!(
        (r.status, &r.error()["param"]),
        (400, &json!("tools")),
        "{}",
        r.body
    );
    assert!(r.error()["message"]
        .as_str()
        .unwrap()
        .contains("does not use tools"));
    assert_eq!(
        t.state.lock().unwrap().done,
        done,
        "nothing reached the engine"
    );
}

#[test]
fn a_conversation_with_calls_and_results_reaches_the_backend() {
    let t = quick();
    let body = json!({"messages": [
        {"role": "user", "content": "weather in Paris?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "22 C"},
    ], "tools": [weather()], "max_tokens": 2});
    let r = post_json(&t.url("/v1/chat/completions"), body);
    assert_eq!(r.status, 200, "{}", r.body);
    let rec = t.state.lock().unwrap();
    let call = metainfer_rt::ToolCall {
        id: "call_1".into(),
        name: "get_weather".into(),
        arguments: "{\"city\": \"Paris\"}".into(),
    };
    assert_eq!(
        rec.messages,
        vec![
            Message::user("weather in Paris?"),
            Message::assistant_calls("", vec![call]),
            Message::tool("call_1", "22 C"),
        ]
    );
    // as templates read them: the arguments an object
    assert_eq!(
        rec.messages[1].template_value()["tool_calls"][0]["function"]["arguments"],
        json!({"city": "Paris"})
    );
}

#[test]
fn reasoning_goes_apart_with_the_deepseek_format_and_stays_in_content_without() {
    use metainfer_rt::server::ReasoningFormat;
    let body = |stream: bool| json!({"messages": [{"role": "user", "content": "THINK"}], "stream": stream});
    let raw = quick();
    let r = post_json(&raw.url("/v1/chat/completions"), body(false));
    let m = &r.json()["choices"][0]["message"];
    assert_eq!(
        m["content"], "<think>\nstep one\n</think>\n\nthe answer",
        "{}",
        r.body
    );
    assert!(m.get("reasoning_content").is_none(), "{}", r.body);
    let cfg = ServerConfig {
        reasoning_format: ReasoningFormat::Deepseek,
        ..Default::default()
    };
    let t = start(0, cfg);
    let r = post_json(&t.url("/v1/chat/completions"), body(false));
    let m = &r.json()["choices"][0]["message"];
    assert_eq!(
        (&m["reasoning_content"], &m["content"]),
        (&json!("step one"), &json!("the answer")),
        "{}",
        r.body
    );
    // streamed: the deltas of each kind concatenate to the same split
    let r = post(&t.url("/v1/chat/completions"), &body(true).to_string());
    assert_eq!(
        streamed_split(&r.body),
        ("step one".into(), "the answer".into()),
        "{}",
        r.body
    );
    assert_eq!(
        "deepseek".parse::<ReasoningFormat>(),
        Ok(ReasoningFormat::Deepseek)
    );
    assert_eq!(
        "auto".parse::<ReasoningFormat>(),
        Ok(ReasoningFormat::Deepseek)
    );
    assert!("deepseek-legacy"
        .parse::<ReasoningFormat>()
        .unwrap_err()
        .contains("none"));
}

/// Each kind of delta of a streamed chat reply, concatenated: (reasoning, content).
fn streamed_split(body: &str) -> (String, String) {
    let (mut reasoning, mut content) = (String::new(), String::new());
    for event in body.split("\n\n").filter_map(|e| e.strip_prefix("data: ")) {
        if event == "[DONE]" {
            break;
        }
        let v: Value = metainfer_rt::serde_json::from_str(event).unwrap();
        let d = &v["choices"][0]["delta"];
        reasoning.push_str(d["reasoning_content"].as_str().unwrap_or(""));
        content.push_str(d["content"].as_str().unwrap_or(""));
    }
    (reasoning, content)
}

#[test]
fn a_reply_the_prompt_opened_a_think_block_for_is_reasoning_up_to_its_close() {
    use metainfer_rt::server::ReasoningFormat;
    let cfg = ServerConfig {
        reasoning_format: ReasoningFormat::Deepseek,
        ..Default::default()
    };
    let t = start(0, cfg);
    let body = |stream: bool| json!({"messages": [{"role": "user", "content": "THINK_OPEN"}], "stream": stream});
    let r = post_json(&t.url("/v1/chat/completions"), body(false));
    let m = &r.json()["choices"][0]["message"];
    assert_eq!(
        (&m["reasoning_content"], &m["content"]),
        (&json!("step one"), &json!("the answer")),
        "{}",
        r.body
    );
    let r = post(&t.url("/v1/chat/completions"), &body(true).to_string());
    assert_eq!(
        streamed_split(&r.body),
        ("step one".into(), "the answer".into()),
        "{}",
        r.body
    );
    // the reasoning format of the request itself: left as written on this server…
    let r = post_json(
        &t.url("/v1/chat/completions"),
        json!({"messages": [{"role": "user", "content": "THINK_OPEN"}], "reasoning_format": "none"}),
    );
    let m = &r.json()["choices"][0]["message"];
    assert_eq!(
        m["content"], "step one\n</think>\n\nthe answer",
        "{}",
        r.body
    );
    assert!(m.get("reasoning_content").is_none(), "{}", r.body);
    // …and split on a server that leaves replies alone
    let raw = quick();
    let r = post(
        &raw.url("/v1/chat/completions"),
        &json!({"messages": [{"role": "user", "content": "THINK"}], "stream": true, "reasoning_format": "deepseek"}).to_string(),
    );
    assert_eq!(
        streamed_split(&r.body),
        ("step one".into(), "the answer".into()),
        "{}",
        r.body
    );
    for (path, body, says) in [
        (
            "/v1/chat/completions",
            json!({"messages": [{"role": "user", "content": "hi"}], "reasoning_format": "deepseek-legacy"}),
            "unknown reasoning format 'deepseek-legacy'",
        ),
        (
            "/v1/chat/completions",
            json!({"messages": [{"role": "user", "content": "hi"}], "reasoning_format": true}),
            "must be a string",
        ),
        (
            "/v1/completions",
            json!({"prompt": "hi", "reasoning_format": "deepseek"}),
            "applies to /v1/chat/completions",
        ),
    ] {
        let r = post_json(&raw.url(path), body);
        assert_eq!(r.status, 400, "{}", r.body);
        assert_eq!(r.error()["param"], "reasoning_format", "{}", r.body);
        let msg = r.error()["message"].as_str().unwrap().to_string();
        assert!(msg.contains(says), "{msg}");
    }
    assert_eq!(
        raw.state.lock().unwrap().done,
        1,
        "refused requests never reach the engine"
    );
}

#[test]
fn n_must_be_one() {
    let t = quick();
    let r = post_json(
        &t.url("/v1/chat/completions"),
        json!({"messages": [{"role": "user", "content": "x"}], "n": 2}),
    );
    assert_eq!(r.status, 400);
    let e = r.error();
    assert_eq!(e["param"], "n");
    assert!(e["message"].as_str().unwrap().contains("n = 1"));
    let r = post_json(
        &t.url("/v1/chat/completions"),
        json!({"messages": [{"role": "user", "content": "x"}], "n": 1, "max_tokens": 1}),
    );
    assert_eq!(r.status, 200);
}

#[test]
fn context_length_exceeded() {
    let t = quick();
    let r = post_json(
        &t.url("/v1/completions"),
        json!({"prompt": "a b c d", "max_tokens": 61}),
    );
    assert_eq!(r.status, 400);
    let e = r.error();
    assert_eq!(e["code"], "context_length_exceeded");
    assert_eq!(e["param"], "prompt");
    assert!(e["message"].as_str().unwrap().contains("64"), "{e}");
    // max_tokens near u64::MAX: a 400 at once, not an overflow
    for m in [u64::MAX, u64::MAX - 3, 1 << 63] {
        let r = post_json(
            &t.url("/v1/completions"),
            json!({"prompt": "a b c d", "max_tokens": m}),
        );
        assert_eq!(r.status, 400, "max_tokens {m}");
        assert_eq!(r.error()["code"], "context_length_exceeded");
    }
    let r = post_json(
        &t.url("/v1/completions"),
        json!({"prompt": "a b c d", "max_tokens": 60}),
    );
    assert_eq!(r.status, 200);
}

#[test]
fn routes_and_methods() {
    let t = quick();
    let r = to_resp(agent().get(&t.url("/v1/nope")).call());
    assert_eq!(r.status, 404);
    assert!(r.request_id.is_some());
    assert_eq!(r.error()["type"], "invalid_request_error");
    let r = post(&t.url("/v2/chat/completions"), "{}");
    assert_eq!(r.status, 404);
    let r = to_resp(agent().get(&t.url("/v1/chat/completions")).call());
    assert_eq!(r.status, 405);
    r.error();
    let r = agent().get(&t.url("/v1/completions")).call();
    match r {
        Err(ureq::Error::Status(405, r)) => assert_eq!(r.header("allow"), Some("POST")),
        _ => panic!("expected 405"),
    }
    let r = post(&t.url("/v1/models"), "{}");
    assert_eq!(r.status, 405);
    // without the /v1 prefix, and /health
    let r = post_json(
        &t.url("/completions"),
        json!({"prompt": "a", "max_tokens": 1}),
    );
    assert_eq!(r.status, 200);
    let r = to_resp(agent().get(&t.url("/health")).call());
    assert_eq!((r.status, r.json()), (200, json!({"status": "ok"})));
}

/// Reads a whole raw response.
fn read_all(mut s: TcpStream) -> String {
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// One response with a content-length from a kept-alive connection: (head, body).
fn read_response(r: &mut BufReader<TcpStream>) -> (String, String) {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        assert!(
            r.read_line(&mut line).unwrap() > 0,
            "the connection closed after {head:?}"
        );
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let len: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length: ")
                .map(|v| v.trim().parse().unwrap())
        })
        .expect("a content-length");
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).unwrap();
    (head, String::from_utf8(body).unwrap())
}

#[test]
fn keep_alive_serves_several_requests_on_one_connection() {
    let t = quick();
    let s = TcpStream::connect(t.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);
    let body = r#"{"prompt": "a b", "max_tokens": 2}"#;
    for close in [false, false, true] {
        let c = if close { "connection: close\r\n" } else { "" };
        write!(
            w,
            "POST /v1/completions HTTP/1.1\r\nhost: x\r\n{c}content-length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let (head, text) = read_response(&mut r);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        let want = if close {
            "connection: close"
        } else {
            "connection: keep-alive"
        };
        assert!(head.to_ascii_lowercase().contains(want), "{head}");
        let v: Value = metainfer_rt::serde_json::from_str(&text).unwrap();
        assert_eq!(v["choices"][0]["text"], "tok0 tok1");
    }
    // after `connection: close` the server ends the connection
    let mut rest = Vec::new();
    assert_eq!(r.read_to_end(&mut rest).unwrap(), 0);
    // an error closes it too
    let s = TcpStream::connect(t.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut w = s.try_clone().unwrap();
    write!(
        w,
        "POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\n\r\n{{bad}}"
    )
    .unwrap();
    let mut all = String::new();
    BufReader::new(s).read_to_string(&mut all).unwrap();
    assert!(
        all.starts_with("HTTP/1.1 400") && all.to_ascii_lowercase().contains("connection: close"),
        "{all}"
    );
}

/// A client that trickles its request a byte at a time (each read well inside io_timeout) is
/// cut off at request_timeout with 408, head or body, and does not hold the others up.
#[test]
fn trickling_clients_get_408_at_the_request_deadline() {
    let t = start(
        0,
        ServerConfig {
            request_timeout: Duration::from_millis(800),
            max_connections: 6,
            ..Default::default()
        },
    );
    let body = r#"{"prompt": "a b", "max_tokens": 2}"#;
    let head = format!(
        "POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let trickle = |at_once: String, text: String| {
        let addr = t.addr();
        std::thread::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let t0 = Instant::now();
            s.write_all(at_once.as_bytes()).unwrap();
            for b in text.bytes() {
                if s.write_all(&[b]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(150));
            }
            (read_all(s), t0.elapsed())
        })
    };
    // five trickling in the head, five in the body: more than max_connections in all
    let mut hs: Vec<_> = (0..5)
        .map(|_| trickle(String::new(), head.clone()))
        .collect();
    hs.extend((0..5).map(|_| trickle(head.clone(), body.to_string())));
    std::thread::sleep(Duration::from_millis(1500));
    let r = post_json(
        &t.url("/v1/completions"),
        json!({"prompt": "a b", "max_tokens": 2}),
    );
    assert_eq!(
        r.status, 200,
        "the trickling clients are gone by now: {}",
        r.body
    );
    for h in hs {
        let (resp, took) = h.join().unwrap();
        assert!(
            resp.starts_with("HTTP/1.1 408") || resp.starts_with("HTTP/1.1 503"),
            "{resp}"
        );
        assert!(took < Duration::from_secs(5), "cut off after {took:?}");
    }
}

#[test]
fn body_over_limit_is_413_before_reading_it() {
    let t = start(
        0,
        ServerConfig {
            max_body_bytes: 1000,
            ..Default::default()
        },
    );
    // announce 10 MB and send none of it: the answer must come from the header alone
    let mut s = TcpStream::connect(t.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 10000000\r\n\r\n").unwrap();
    let resp = read_all(s);
    assert!(resp.starts_with("HTTP/1.1 413"), "{resp}");
    assert!(
        resp.to_ascii_lowercase().contains("x-request-id:"),
        "{resp}"
    );
    let body = resp.split("\r\n\r\n").nth(1).unwrap();
    let v: Value = metainfer_rt::serde_json::from_str(body).unwrap();
    assert!(
        v["error"]["message"].as_str().unwrap().contains("1000"),
        "{v}"
    );
    // a real client sending an over-limit body gets the 413 too
    let big = format!("{{\"prompt\": \"{}\"}}", "a".repeat(5000));
    let r = post(&t.url("/v1/completions"), &big);
    assert_eq!(r.status, 413);
    r.error();
    // within the limit still works
    let r = post_json(
        &t.url("/v1/completions"),
        json!({"prompt": "a", "max_tokens": 1}),
    );
    assert_eq!(r.status, 200);
}

#[test]
fn chunked_request_body_is_refused_clearly() {
    let t = quick();
    let mut s = TcpStream::connect(t.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "POST /v1/completions HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n5\r\n{{\"a\"\r\n0\r\n\r\n").unwrap();
    let resp = read_all(s);
    assert!(resp.starts_with("HTTP/1.1 411"), "{resp}");
    assert!(resp.contains("content-length"), "{resp}");
}

#[test]
fn malformed_http_is_400() {
    let t = quick();
    let mut s = TcpStream::connect(t.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"NOT HTTP AT ALL\r\n\r\n").unwrap();
    let resp = read_all(s);
    assert!(resp.starts_with("HTTP/1.1 400"), "{resp}");
}

#[test]
fn engine_errors_and_panics() {
    let t = quick();
    let r = post_json(&t.url("/v1/completions"), json!({"prompt": "ENGINE_ERR"}));
    assert_eq!(r.status, 500);
    let e = r.error();
    assert_eq!(e["type"], "server_error");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("fake tokenizer broke"),
        "{e}"
    );
    let r = post_json(
        &t.url("/v1/chat/completions"),
        json!({"messages": [{"role": "user", "content": "NO_TEMPLATE"}]}),
    );
    assert_eq!(r.status, 400);
    assert!(r.error()["message"]
        .as_str()
        .unwrap()
        .contains("no chat template"));
    let r = post_json(
        &t.url("/v1/completions"),
        json!({"prompt": "PANIC", "stream": true}),
    );
    assert_eq!(r.status, 500);
    assert!(r.error()["message"]
        .as_str()
        .unwrap()
        .contains("panicked on purpose"));
    // the server (and its poisoned engine lock) still serve
    let r = post_json(
        &t.url("/v1/completions"),
        json!({"prompt": "a", "max_tokens": 2}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["choices"][0]["text"], "tok0 tok1");
}

/// Reads the raw response head and SSE events until one carries a piece of text.
fn read_until_first_piece(s: &TcpStream) -> BufReader<&TcpStream> {
    let mut rd = BufReader::new(s);
    let mut line = String::new();
    rd.read_line(&mut line).unwrap();
    if !line.starts_with("HTTP/1.1 200") {
        let mut rest = String::new();
        let _ = rd.read_to_string(&mut rest);
        panic!("{line}{rest}");
    }
    loop {
        line.clear();
        assert!(
            rd.read_line(&mut line).unwrap() > 0,
            "the stream ended early"
        );
        if line.starts_with("data: ") && line.contains("tok0") {
            return rd;
        }
    }
}

#[test]
fn full_server_answers_429_with_retry_after() {
    let t = start_ctx(
        20,
        1000,
        ServerConfig {
            max_concurrent: 1,
            ..Default::default()
        },
    );
    let a = raw_post(
        t.addr(),
        "/v1/completions",
        &json!({"prompt": "a", "max_tokens": 200, "stream": true}).to_string(),
    );
    let _rd = read_until_first_piece(&a);
    let t0 = Instant::now();
    let r = post_json(
        &t.url("/v1/completions"),
        json!({"prompt": "b", "max_tokens": 1}),
    );
    assert_eq!(r.status, 429, "{}", r.body);
    assert!(
        t0.elapsed() < Duration::from_secs(1),
        "the 429 must not wait for the engine"
    );
    assert_eq!(r.retry_after.as_deref(), Some("1"));
    let e = r.error();
    assert_eq!(e["code"], "rate_limit_exceeded");
    // /v1/models is not a generation: still served
    assert_eq!(
        to_resp(agent().get(&t.url("/v1/models")).call()).status,
        200
    );
    drop(_rd);
    drop(a);
    let rec = t.wait_done(1);
    assert_eq!(rec.finish, Some(FinishReason::Cancelled));
    drop(rec);
    // the slot is free again
    let t1 = Instant::now();
    loop {
        let r = post_json(
            &t.url("/v1/completions"),
            json!({"prompt": "b", "max_tokens": 1}),
        );
        if r.status == 200 {
            break;
        }
        assert!(
            t1.elapsed() < Duration::from_secs(3),
            "still refused: {}",
            r.body
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn waiting_requests_are_admitted_and_served_in_turn() {
    let t = start(
        5,
        ServerConfig {
            max_concurrent: 3,
            ..Default::default()
        },
    );
    let url = t.url("/v1/completions");
    let hs: Vec<_> = (0..3)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || post_json(&url, json!({"prompt": "a", "max_tokens": 10})))
        })
        .collect();
    for h in hs {
        let r = h.join().unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.json()["usage"]["completion_tokens"], 10);
    }
}

#[test]
fn disconnect_mid_stream_cancels_generation() {
    let t = start_ctx(10, 1000, ServerConfig::default());
    let s = raw_post(
        t.addr(),
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": "go"}], "max_tokens": 300, "stream": true}).to_string(),
    );
    let rd = read_until_first_piece(&s);
    drop(rd);
    drop(s);
    let t0 = Instant::now();
    let rec = t.wait_done(1);
    assert_eq!(rec.finish, Some(FinishReason::Cancelled));
    assert!(
        rec.produced < 50,
        "produced {} of 300 tokens after the client left",
        rec.produced
    );
    assert!(t0.elapsed() < Duration::from_secs(2));
}

#[test]
fn disconnect_during_non_streaming_request_cancels_generation() {
    let t = start_ctx(10, 1000, ServerConfig::default());
    let s = raw_post(
        t.addr(),
        "/v1/completions",
        &json!({"prompt": "go", "max_tokens": 300}).to_string(),
    );
    std::thread::sleep(Duration::from_millis(150));
    drop(s);
    let rec = t.wait_done(1);
    assert_eq!(rec.finish, Some(FinishReason::Cancelled));
    assert!(
        rec.produced < 60,
        "produced {} of 300 tokens after the client left",
        rec.produced
    );
}

#[test]
fn shutdown_stops_the_server() {
    let t = quick();
    let addr = t.addr();
    assert_eq!(
        to_resp(agent().get(&t.url("/v1/models")).call()).status,
        200
    );
    let t0 = Instant::now();
    t.server.shutdown();
    assert!(t0.elapsed() < Duration::from_secs(2));
    let gone = match TcpStream::connect_timeout(&addr, Duration::from_millis(500)) {
        Err(_) => true,
        Ok(mut s) => {
            // the listener is closed; at most the kernel accepted and resets it
            s.set_read_timeout(Some(Duration::from_millis(500)))
                .unwrap();
            let _ = s.write_all(b"GET /v1/models HTTP/1.1\r\n\r\n");
            let mut b = [0u8; 16];
            !matches!(s.read(&mut b), Ok(n) if n > 0)
        }
    };
    assert!(gone, "the server still answers after shutdown");
}

#[test]
fn bind_refuses_zero_limits() {
    let fake = Fake {
        serial: Mutex::new(()),
        state: Default::default(),
        delay: Duration::ZERO,
        max_seq: 8,
    };
    let e = Server::bind(
        "127.0.0.1:0",
        fake,
        ServerConfig {
            max_concurrent: 0,
            ..Default::default()
        },
    )
    .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
}

/// The value of one series in a /metrics text (`name{labels}`), if present.
fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

fn get_metrics(t: &Setup) -> String {
    let r = agent().get(&t.url("/metrics")).call().unwrap();
    assert_eq!(
        r.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    r.into_string().unwrap()
}

#[test]
fn metrics_count_requests_by_outcome_and_the_tokens() {
    let t = start_ctx(
        20,
        1000,
        ServerConfig {
            max_concurrent: 1,
            ..Default::default()
        },
    );
    let outcome = |text: &str, o: &str| {
        metric(
            text,
            &format!("metainfer_requests_total{{model=\"fake-model\",outcome=\"{o}\"}}"),
        )
    };
    let m = get_metrics(&t);
    assert!(m.contains("# TYPE metainfer_requests_total counter"), "{m}");
    assert_eq!(outcome(&m, "ok"), Some(0.0), "{m}");
    assert_eq!(
        metric(&m, "metainfer_context_length{model=\"fake-model\"}"),
        Some(1000.0)
    );
    let r = post_json(
        &t.url("/v1/completions"),
        json!({"prompt": "w w w", "max_tokens": 3}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = post_json(
        &t.url("/v1/completions"),
        json!({"prompt": "w", "temperature": "hot"}),
    );
    assert_eq!(r.status, 400);
    // one running (admitted), one refused, then the running one's client leaves
    let a = raw_post(
        t.addr(),
        "/v1/completions",
        &json!({"prompt": "a", "max_tokens": 200, "stream": true}).to_string(),
    );
    let rd = read_until_first_piece(&a);
    let r = post_json(
        &t.url("/v1/completions"),
        json!({"prompt": "b", "max_tokens": 1}),
    );
    assert_eq!(r.status, 429);
    let m = get_metrics(&t);
    assert_eq!(
        metric(&m, "metainfer_requests_admitted{model=\"fake-model\"}"),
        Some(1.0),
        "{m}"
    );
    drop(rd);
    drop(a);
    let produced = t.wait_done(2).produced as f64;
    let t0 = Instant::now();
    let m = loop {
        let m = get_metrics(&t);
        if outcome(&m, "cancelled") == Some(1.0) || t0.elapsed() > Duration::from_secs(3) {
            break m;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    for (o, n) in [
        ("ok", 1.0),
        ("error", 1.0),
        ("rejected", 1.0),
        ("cancelled", 1.0),
    ] {
        assert_eq!(outcome(&m, o), Some(n), "{o}: {m}");
    }
    let series = |name: &str| metric(&m, &format!("metainfer_{name}{{model=\"fake-model\"}}"));
    assert_eq!(series("prompt_tokens_total"), Some(4.0), "{m}");
    assert_eq!(
        series("generated_tokens_total"),
        Some(3.0 + produced),
        "{m}"
    );
    assert_eq!(series("requests_admitted"), Some(0.0), "{m}");
    assert!(series("decode_seconds_total").is_some(), "{m}");
}
