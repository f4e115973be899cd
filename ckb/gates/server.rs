// Gate server: the engine served by rt::server on 127.0.0.1, spoken to over a raw socket.
// Compiled inside the candidate engine crate (so it sees `Engine`).

/// One HTTP/1.1 request; returns (status, body).
fn server_request(addr: std::net::SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect to the engine's server");
    s.set_read_timeout(Some(std::time::Duration::from_secs(60))).unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: gate\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, rest) = text.split_once("\r\n\r\n").expect("an HTTP response with a head");
    let status = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).expect("a status code");
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        let mut out = String::new();
        let mut r = rest;
        while let Some((len, after)) = r.split_once("\r\n") {
            let n = usize::from_str_radix(len.trim(), 16).unwrap_or(0);
            if n == 0 {
                break;
            }
            out.push_str(&after[..n]);
            r = &after[n + 2..];
        }
        out
    } else {
        rest.to_string()
    };
    (status, body)
}

#[test]
fn serves_the_engines_own_greedy_text() {
    let prompt = "Hello world";
    let Some(mut direct) = gate_load_or_skip(&gate_tiny_model(), "server", "tiny model loads") else { return };
    let want = direct.generate(prompt, &rt::GenParams::greedy(12)).expect("direct generation");
    let want_prompt_tokens = direct.prompt_ids(prompt).len();

    let engine = Engine::load(&gate_tiny_model()).expect("tiny model loads");
    let server = engine.server("127.0.0.1:0", rt::server::ServerConfig::default()).expect("bind loopback");
    let addr = server.local_addr().unwrap();
    let _handle = server.spawn();

    let body = format!(r#"{{"prompt": {prompt:?}, "max_tokens": 12, "temperature": 0}}"#);
    let (status, text) = server_request(addr, "POST", "/v1/completions", &body);
    assert_eq!(status, 200, "{text}");
    let v: rt::serde_json::Value = rt::serde_json::from_str(&text).expect("a JSON body");
    let got = v["choices"][0]["text"].as_str().expect("choices[0].text");
    // (a batching server runs a request alone with exactly forward's kernels)
    assert_eq!(got, want, "the server's completion is the engine's greedy text");
    assert_eq!(v["usage"]["prompt_tokens"].as_u64(), Some(want_prompt_tokens as u64), "{text}");

    let body = format!(r#"{{"prompt": {prompt:?}, "max_tokens": 12, "temperature": 0, "stream": true}}"#);
    let (status, sse) = server_request(addr, "POST", "/v1/completions", &body);
    assert_eq!(status, 200, "{sse}");
    let mut streamed = String::new();
    let mut done = false;
    for line in sse.lines() {
        let Some(data) = line.strip_prefix("data: ") else { continue };
        if data == "[DONE]" {
            done = true;
            continue;
        }
        let v: rt::serde_json::Value = rt::serde_json::from_str(data).expect("each SSE event is JSON");
        if let Some(t) = v["choices"][0]["text"].as_str() {
            streamed.push_str(t);
        }
    }
    assert!(done, "the stream ends with [DONE]: {sse}");
    assert_eq!(streamed, want, "streamed pieces concatenate to the engine's text");

    let (status, text) = server_request(addr, "POST", "/v1/completions", "{not json");
    assert_eq!(status, 400, "{text}");
    let v: rt::serde_json::Value = rt::serde_json::from_str(&text).expect("the error envelope is JSON");
    assert!(v["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{text}");
    // four clients at once (a batching engine runs them in shared steps): each gets the greedy
    // text its prompt gets alone (prompts that share no first token, so no cached prefix is used)
    let prompts = ["apple pie", "Zebra crossing", "42 is the", "{ json"];
    let body = |p: &str| format!(r#"{{"prompt": {p:?}, "max_tokens": 10, "temperature": 0}}"#);
    let text_of = |(status, text): (u16, String)| {
        assert_eq!(status, 200, "{text}");
        let v: rt::serde_json::Value = rt::serde_json::from_str(&text).expect("a JSON body");
        v["choices"][0]["text"].as_str().expect("choices[0].text").to_string()
    };
    let alone: Vec<String> = prompts.iter().map(|p| text_of(server_request(addr, "POST", "/v1/completions", &body(p)))).collect();
    let together: Vec<String> = std::thread::scope(|sc| {
        let hs: Vec<_> = prompts.iter().map(|p| body(p)).map(|b| sc.spawn(move || server_request(addr, "POST", "/v1/completions", &b))).collect();
        hs.into_iter().map(|h| text_of(h.join().expect("client thread"))).collect()
    });
    assert_eq!(together, alone, "requests served beside others get their text alone");
    println!("GATE server completion_chars={} prompt_tokens={want_prompt_tokens} streamed=true concurrent={}", want.len(), prompts.len());
}

#[test]
fn chat_replies_split_where_the_template_opened_a_think_block() {
    // a template whose generation prompt opens the think block (DeepSeek-R1's, Qwen3 Thinking-2507's)
    let open = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}";
    let Some(mut direct) = gate_load_or_skip(&gate_tiny_model(), "server", "tiny model loads") else { return };
    let own = direct.chat_template().map(str::to_string);
    assert!(matches!(direct.set_chat_template("{% for m in %}"), Err(rt::Error::Template(_))), "a template that does not compile is refused");
    assert_eq!(direct.chat_template().map(str::to_string), own, "a refused template leaves the engine's own in use");
    direct.set_chat_template(open).expect("the template compiles");
    assert_eq!(direct.chat_template(), Some(open));
    let msgs = [rt::Message::new("user", "Hello world")];
    let (want, _) = direct.chat(&msgs, &rt::GenParams::greedy(12), &mut |_| true).expect("direct chat");
    let want_prompt_tokens = direct.prompt_ids(&direct.render_chat(&msgs, true).unwrap()).len();
    // the reasoning runs up to </think> (all of the reply when it never closes the block)
    let (r, c) = want.split_once("</think>").unwrap_or((want.as_str(), ""));
    let want_split = (r.trim_matches('\n'), c.trim_start_matches('\n'));

    let mut engine = Engine::load(&gate_tiny_model()).expect("tiny model loads");
    engine.set_chat_template(open).expect("the template compiles");
    let cfg = rt::server::ServerConfig { reasoning_format: rt::server::ReasoningFormat::Deepseek, ..Default::default() };
    let server = engine.server("127.0.0.1:0", cfg).expect("bind loopback");
    let addr = server.local_addr().unwrap();
    let _handle = server.spawn();
    let chat = |extra: &str| {
        let body = format!(r#"{{"messages": [{{"role": "user", "content": "Hello world"}}], "max_tokens": 12, "temperature": 0{extra}}}"#);
        let (status, text) = server_request(addr, "POST", "/v1/chat/completions", &body);
        assert_eq!(status, 200, "{text}");
        let v: rt::serde_json::Value = rt::serde_json::from_str(&text).expect("a JSON body");
        assert_eq!(v["usage"]["prompt_tokens"].as_u64(), Some(want_prompt_tokens as u64), "{text}");
        v["choices"][0]["message"].clone()
    };
    let m = chat("");
    assert_eq!((m["reasoning_content"].as_str(), m["content"].as_str()), (Some(want_split.0), Some(want_split.1)), "{m}");
    let m = chat(r#", "reasoning_format": "none""#);
    assert_eq!(m["content"].as_str(), Some(want.as_str()), "reasoning_format none leaves the reply as written: {m}");
    println!("GATE server_chat chars={} reasoning_chars={} prompt_tokens={want_prompt_tokens}", want.len(), want_split.0.len());
}
