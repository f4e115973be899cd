// Gate `tokenizer`: the engine's byte-level BPE tokenizer against reference ids, on the tiny
// synthetic model of its family (vectors tokenizer_tiny_<arch>.txt) and, when
// METAINFER_REAL_MODEL names a file of its family, on the real vocab (tokenizer_<arch>.txt).
// The references: HF `tokenizers` for qwen2 (ckb/gates/reference/tokenizer_ref.py), llama.cpp's
// own tokenizer for llama (ckb/gates/reference/llama_tokenize.py). Compiled inside the engine
// crate: sees `Gguf`, `Tokenizer` and every other engine item.
//
// Vector format (tokenizer_*.txt): '#' comment lines, then pairs of lines, a JSON string with the text, then the
// comma-separated reference ids (empty for the empty text). Texts are encoded with special
// tokens parsed (HF `encode(text, add_special_tokens=False)` matches added tokens).

fn gate_tok_dir(var: &str, default: &str) -> std::path::PathBuf {
    match std::env::var_os(var) {
        Some(v) if !v.is_empty() => std::path::PathBuf::from(v),
        _ => std::path::PathBuf::from(default),
    }
}

// The tiny fixture of this engine's model format is gate_tiny_model() (ckb/gates/common.rs); both
// carry the same cut-down Qwen tokenizer (ckb/gates/fixtures/make_tiny_qwen2_awq.py writes the GGUF's
// vocab as tokenizer.json).
fn gate_tok_cases(path: &std::path::Path) -> Vec<(String, Vec<u32>)> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read tokenizer vectors {}: {e}", path.display()));
    // '#' lines are comments (a text line starts with '"', an ids line with a digit or is empty).
    let mut lines: Vec<&str> = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).filter(|l| !l.starts_with('#')).collect();
    if lines.last() == Some(&"") {
        lines.pop();
    }
    assert!(lines.len() % 2 == 0, "{}: expected pairs of lines, got {} lines", path.display(), lines.len());
    let mut cases = Vec::new();
    for (k, pair) in lines.chunks(2).enumerate() {
        let s: String = rt::serde_json::from_str(pair[0])
            .unwrap_or_else(|e| panic!("{}: case {k}: text is not a JSON string: {e}", path.display()));
        let ids_line = pair[1].trim();
        let ids: Vec<u32> = if ids_line.is_empty() {
            Vec::new()
        } else {
            ids_line
                .split(',')
                .map(|x| x.trim().parse().unwrap_or_else(|e| panic!("{}: case {k}: bad id {x:?}: {e}", path.display())))
                .collect()
        };
        cases.push((s, ids));
    }
    cases
}

/// Runs every case; returns (cases, id mismatches, round-trip failures) and prints the first few diffs.
fn gate_tok_run(tok: &Tokenizer, cases: &[(String, Vec<u32>)], label: &str) -> (usize, usize, usize) {
    let (mut bad, mut bad_rt, mut shown) = (0, 0, 0);
    for (k, (text, want)) in cases.iter().enumerate() {
        let got = tok.encode(text, true);
        if &got != want {
            bad += 1;
            if shown < 8 {
                shown += 1;
                let first = got.iter().zip(want.iter()).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
                println!("{label} case {k} {text:?}: ids differ at {first}\n  got  {got:?}\n  want {want:?}");
            }
        }
        let back = tok.decode(&got);
        // SentencePiece vocabs escape spaces as U+2581, so that character decodes as a space.
        let text_back = if TOKENIZER_MODEL == "llama" { text.replace('\u{2581}', " ") } else { text.clone() };
        if back != text_back {
            bad_rt += 1;
            if shown < 8 {
                shown += 1;
                println!("{label} case {k} {text:?}: decode(encode(text)) = {back:?}");
            }
        }
    }
    (cases.len(), bad, bad_rt)
}

#[test]
fn gate_tokenizer_tiny() {
    let data = gate_tok_dir("METAINFER_GATE_DATA", "ckb/gates");
    let g = Gguf::open(&gate_tiny_model()).expect("open the tiny fixture");
    let tok = Tokenizer::from_gguf(&g).expect("tokenizer from the tiny fixture");
    let cases = gate_tok_cases(&data.join("vectors").join(format!("tokenizer_tiny_{MODEL_ARCH}.txt")));

    // Structure: specials are single ids only when parsed; eos ends generation; bytes round-trip.
    let mut structural = 0usize;
    let mut check = |ok: bool, what: &str| {
        if !ok {
            structural += 1;
            println!("tokenizer structural check failed: {what}");
        }
    };
    if let Some(im_end) = tok.token_id("<|im_end|>") {
        check(tok.encode("<|im_end|>", true) == vec![im_end], "<|im_end|> parses to its id");
        check(!tok.encode("<|im_end|>", false).contains(&im_end), "<|im_end|> is plain text without parse_special");
        check(tok.eog_ids().contains(&im_end), "<|im_end|> is an eog id");
        check(tok.token_bytes(im_end) == b"<|im_end|>", "control token bytes are its text");
    }
    if let Some(eos) = tok.eos_id() {
        check(tok.eog_ids().contains(&eos), "eos is an eog id");
    }
    let all: Vec<u8> = (0u8..=255).collect();
    let s = String::from_utf8_lossy(&all).into_owned();
    check(tok.decode(&tok.encode(&s, false)) == s, "all-bytes text round-trips");
    let ids = tok.encode(" hello", false);
    let cat: Vec<u8> = ids.iter().flat_map(|&i| tok.token_bytes(i).to_vec()).collect();
    check(cat == b" hello", "token_bytes concatenate to the text");
    check(tok.token_bytes(u32::MAX).is_empty(), "token_bytes of a bad id is empty");
    let rows = g.tensor("token_embd.weight").ok().and_then(|t| t.dims.get(1).copied()).unwrap_or(0);
    check(tok.n_vocab() as u64 == rows, "n_vocab equals the embedding's rows (the fixtures' vocab fills it)");

    let (n, bad, bad_rt) = gate_tok_run(&tok, &cases, "tiny");
    println!("GATE tokenizer cases={n} mismatches={bad} roundtrip_failures={bad_rt} structural_failures={structural}");
    assert!(n > 0, "no tokenizer cases");
    assert_eq!(bad, 0, "{bad} of {n} tokenizer cases differ from the reference ids");
    assert_eq!(bad_rt, 0, "{bad_rt} of {n} cases do not round-trip through decode");
    assert_eq!(structural, 0, "{structural} structural tokenizer checks failed");
}

/// Every other pre-tokenizer the family knows (PRE_TOKENIZERS): the tiny vocab relabelled with
/// it (`tokenizer.ggml.pre`) against llama.cpp's ids for the file so relabelled, vectors
/// tokenizer_tiny_<arch>_<pre>.txt (ckb/gates/reference/README.md); a pre-tokenizer without
/// vectors fails the gate.
#[test]
fn gate_tokenizer_every_pre() {
    if MODEL_FORMAT != "gguf" {
        println!("GATE tokenizer_pre skipped reason=\"the vocab of a {MODEL_FORMAT} checkpoint names no pre-tokenizer\"");
        return;
    }
    let data = gate_tok_dir("METAINFER_GATE_DATA", "ckb/gates");
    let tiny = std::fs::read(gate_tiny_model()).expect("the tiny fixture");
    let own = Gguf::open(&gate_tiny_model()).expect("open the tiny fixture").get_str("tokenizer.ggml.pre").expect("the tiny fixture names its pre-tokenizer").to_string();
    let (mut done, mut cases) = (Vec::new(), 0);
    for &(pre, _) in PRE_TOKENIZERS.iter().filter(|(p, _)| *p != own) {
        let file = GateTempFile::new(&format!("tokenizer-pre-{}.gguf", done.len()), &gate_gguf_with(&tiny, &[("tokenizer.ggml.pre", 8, gate_gguf_str(pre))], &[]));
        let g = Gguf::open(&file.0).expect("open the relabelled vocab");
        let tok = Tokenizer::from_gguf(&g).unwrap_or_else(|e| panic!("tokenizer from the tiny fixture as {pre:?}: {e}"));
        let vectors = data.join("vectors").join(format!("tokenizer_tiny_{MODEL_ARCH}_{pre}.txt"));
        assert!(vectors.is_file(), "the {MODEL_ARCH} family knows pre-tokenizer {pre:?} but has no vectors {} (ckb/gates/reference/README.md says how to make them)", vectors.display());
        let (n, bad, bad_rt) = gate_tok_run(&tok, &gate_tok_cases(&vectors), pre);
        println!("tokenizer_pre {pre}: cases={n} mismatches={bad} roundtrip_failures={bad_rt}");
        assert!(n > 0, "no tokenizer cases for {pre:?}");
        assert_eq!(bad, 0, "{bad} of {n} cases differ from llama.cpp's ids with pre-tokenizer {pre:?}");
        assert_eq!(bad_rt, 0, "{bad_rt} of {n} cases do not round-trip with pre-tokenizer {pre:?}");
        done.push(pre);
        cases += n;
    }
    println!("GATE tokenizer_pre own={own:?} others={done:?} cases={cases}");
}

#[test]
fn gate_tokenizer_real() {
    let Some(model) = gate_real_model("tokenizer_real") else { return };
    let data = gate_tok_dir("METAINFER_GATE_DATA", "ckb/gates");
    let vectors = data.join("vectors").join(format!("tokenizer_{MODEL_ARCH}.txt"));
    if !vectors.is_file() {
        println!("GATE tokenizer_real skipped reason=\"{} missing\"", vectors.display());
        return;
    }
    let g = Gguf::open(&model).expect("open the real model");
    let t0 = std::time::Instant::now();
    let tok = Tokenizer::from_gguf(&g).expect("tokenizer from the real model");
    let load_ms = t0.elapsed().as_secs_f64() * 1e3;
    let cases = gate_tok_cases(&vectors);
    let t1 = std::time::Instant::now();
    let (n, bad, bad_rt) = gate_tok_run(&tok, &cases, "real");
    let enc_ms = t1.elapsed().as_secs_f64() * 1e3;
    println!("GATE tokenizer_real cases={n} mismatches={bad} roundtrip_failures={bad_rt} load_ms={load_ms:.1} run_ms={enc_ms:.1}");
    assert!(n > 0, "no tokenizer cases");
    assert_eq!(bad, 0, "{bad} of {n} real-vocab tokenizer cases differ from the reference ids");
    assert_eq!(bad_rt, 0, "{bad_rt} of {n} real-vocab cases do not round-trip through decode");
}

/// The chat template (contract chat_template) on the tiny fixture: where the family has
/// vectors/chat_template_<arch>.json (the fixture's own template, or the family's default where
/// the fixture has none), its renderings; else the fixture carries the real Qwen2.5 template and
/// the renderings below. Either way they must equal what transformers (Jinja2 with trim_blocks
/// and lstrip_blocks) produces, including Qwen2.5's default system prompt when none is given.
#[test]
fn gate_chat_template() {
    let g = Gguf::open(&gate_tiny_model()).expect("open the tiny fixture");
    let Some(t) = ChatTemplate::from_gguf(&g).expect("chat template") else {
        println!("GATE chat_template skipped reason=\"the tiny fixture has no chat template\"");
        return;
    };
    let vectors = gate_tok_dir("METAINFER_GATE_DATA", "ckb/gates").join("vectors").join(format!("chat_template_{MODEL_ARCH}.json"));
    if vectors.is_file() || g.get_str_opt("tokenizer.chat_template").expect("a string").is_none() {
        return gate_chat_template_vectors(&t, &vectors);
    }
    let none = rt::TemplateKwargs::new();
    let m = rt::Message::new;
    let qwen_sys = "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n";
    let cases: Vec<(Vec<rt::Message>, bool, String)> = vec![
        (vec![m("user", "hi")], true, format!("{qwen_sys}<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")),
        (vec![m("user", "hi")], false, format!("{qwen_sys}<|im_start|>user\nhi<|im_end|>\n")),
        (
            vec![m("system", "You are a coder."), m("user", "Write hello world in C.")],
            true,
            "<|im_start|>system\nYou are a coder.<|im_end|>\n<|im_start|>user\nWrite hello world in C.<|im_end|>\n<|im_start|>assistant\n".to_string(),
        ),
        (
            vec![m("user", "hi"), m("assistant", "Hello! How can I help?"), m("user", "2+2?")],
            true,
            format!("{qwen_sys}<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nHello! How can I help?<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n"),
        ),
        (
            vec![m("system", "sys"), m("user", "a"), m("system", "mid system"), m("assistant", ""), m("user", "b")],
            true,
            "<|im_start|>system\nsys<|im_end|>\n<|im_start|>user\na<|im_end|>\n<|im_start|>system\nmid system<|im_end|>\n<|im_start|>assistant\n<|im_end|>\n<|im_start|>user\nb<|im_end|>\n<|im_start|>assistant\n".to_string(),
        ),
        (
            vec![m("user", "call"), m("assistant", "x"), m("tool", "result1"), m("tool", "result2"), m("user", "ok")],
            true,
            format!("{qwen_sys}<|im_start|>user\ncall<|im_end|>\n<|im_start|>assistant\nx<|im_end|>\n<|im_start|>user\n<tool_response>\nresult1\n</tool_response>\n<tool_response>\nresult2\n</tool_response><|im_end|>\n<|im_start|>user\nok<|im_end|>\n<|im_start|>assistant\n"),
        ),
        (
            vec![m("user", "unicode \u{2713} \u{65e5}\u{672c} \"quotes\" <b>html</b> {{ not template }} \n\n newlines  ")],
            true,
            format!("{qwen_sys}<|im_start|>user\nunicode \u{2713} \u{65e5}\u{672c} \"quotes\" <b>html</b> {{{{ not template }}}} \n\n newlines  <|im_end|>\n<|im_start|>assistant\n"),
        ),
    ];
    // function calling: the tools offered (keys in the client's order, non-ASCII unescaped, as
    // transformers' tojson writes them), an assistant turn's calls (arguments as objects), results
    let weather = rt::serde_json::json!({"type": "function", "function": {"name": "get_weather", "description": "The weather in a city (\u{b0}C or \u{b0}F)", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}});
    let tools: rt::TemplateKwargs = [("tools".to_string(), rt::serde_json::json!([weather]))].into_iter().collect();
    let tools_sys = "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"The weather in a city (\u{b0}C or \u{b0}F)\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"c\", \"f\"]}}, \"required\": [\"city\"]}}}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n";
    let call = |id: &str, args: &str| rt::ToolCall { id: id.into(), name: "get_weather".into(), arguments: args.into() };
    let tool_cases: Vec<(Vec<rt::Message>, bool, &rt::TemplateKwargs, String)> = vec![
        (vec![m("user", "weather in Paris?")], true, &tools, format!("{tools_sys}<|im_start|>user\nweather in Paris?<|im_end|>\n<|im_start|>assistant\n")),
        (
            vec![m("user", "weather in Paris?"), rt::Message::assistant_calls("", vec![call("call_1", "{\"city\": \"Paris\", \"unit\": \"c\"}")]), rt::Message::tool("call_1", "22 C")],
            true,
            &tools,
            format!("{tools_sys}<|im_start|>user\nweather in Paris?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{{\"name\": \"get_weather\", \"arguments\": {{\"city\": \"Paris\", \"unit\": \"c\"}}}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n22 C\n</tool_response><|im_end|>\n<|im_start|>assistant\n"),
        ),
        (
            vec![m("user", "q"), rt::Message::assistant_calls("Checking both.", vec![call("a", "{\"city\": \"Paris\"}"), call("b", "{\"city\": \"Oslo\"}")])],
            false,
            &none,
            format!("{qwen_sys}<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\nChecking both.\n<tool_call>\n{{\"name\": \"get_weather\", \"arguments\": {{\"city\": \"Paris\"}}}}\n</tool_call>\n<tool_call>\n{{\"name\": \"get_weather\", \"arguments\": {{\"city\": \"Oslo\"}}}}\n</tool_call><|im_end|>\n"),
        ),
    ];
    let cases = cases.into_iter().map(|(msgs, agp, want)| (msgs, agp, &none, want)).chain(tool_cases).collect::<Vec<_>>();
    let mut bad = 0;
    for (k, (msgs, agp, kw, want)) in cases.iter().enumerate() {
        match t.render(msgs, *agp, "<|endoftext|>", "<|im_end|>", kw) {
            Ok(got) if &got == want => {}
            Ok(got) => {
                bad += 1;
                println!("chat_template case {k}:\n  got  {got:?}\n  want {want:?}");
            }
            Err(e) => {
                bad += 1;
                println!("chat_template case {k}: {e}");
            }
        }
    }
    // Errors are rt::Error::Template carrying minijinja's message.
    let broken = ChatTemplate::new("{% if x %}unclosed".to_string());
    let err_ok = matches!(broken.render(&[], true, "", "", &none), Err(rt::Error::Template(_)));
    let raising = ChatTemplate::new("{{ raise_exception('no users') }}".to_string());
    let raise_ok = matches!(raising.render(&[], true, "", "", &none), Err(rt::Error::Template(ref s)) if s.contains("no users"));
    let json = ChatTemplate::new("{{ {'k': [1, '\u{e9}', none, true]} | tojson }}|{{ '  a b '.strip().split(' ') | tojson }}".to_string());
    let json_ok = json.render(&[], false, "", "", &none).map(|s| s == "{\"k\": [1, \"\u{e9}\", null, true]}|[\"a\", \"b\"]").unwrap_or(false);
    let n = cases.len() + 4;
    let bad = bad + [err_ok, raise_ok, json_ok, gate_template_kwargs_checked(&t)].iter().filter(|ok| !**ok).count();
    println!("GATE chat_template cases={n} mismatches={bad}");
    assert_eq!(bad, 0, "{bad} of {n} chat template cases differ from the transformers rendering");
}

/// Kwargs reach the template beside the engine's variables (`{{ greeting }}` renders one; a bool
/// prints as Python's `True`, as in transformers), and naming one of the engine's own is an error
/// that says so.
fn gate_template_kwargs_checked(t: &ChatTemplate) -> bool {
    let mut kw = rt::TemplateKwargs::new();
    kw.insert("greeting".into(), rt::serde_json::json!("hello"));
    let own = ChatTemplate::new("{{ greeting }}|{{ messages | length }}|{{ add_generation_prompt }}".to_string());
    let used = own.render(&[rt::Message::new("user", "x")], true, "", "", &kw);
    kw.insert("messages".into(), rt::serde_json::json!([]));
    let refused = t.render(&[], true, "", "", &kw);
    let ok = matches!(&used, Ok(s) if s == "hello|1|True") && matches!(&refused, Err(rt::Error::Template(s)) if s.contains("may not set 'messages'"));
    if !ok {
        println!("chat_template kwargs: rendered {used:?} (want \"hello|1|True\"); with 'messages' among them {refused:?} (want the error)");
    }
    ok
}

/// The tiny fixture's template (or, where it has none, the family's DEFAULT_CHAT_TEMPLATE): its
/// renderings must equal Jinja2's (transformers' settings) in `path`,
/// vectors/chat_template_<arch>.json (ckb/gates/reference/chat_template_ref.py).
fn gate_chat_template_vectors(t: &ChatTemplate, path: &std::path::Path) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let v: rt::serde_json::Value = rt::serde_json::from_str(&text).expect("chat template vectors are JSON");
    let s = |v: &rt::serde_json::Value| v.as_str().expect("a string").to_string();
    let (bos, eos) = (s(&v["bos_token"]), s(&v["eos_token"]));
    let cases = v["cases"].as_array().expect("cases");
    let mut bad = 0;
    for (k, c) in cases.iter().enumerate() {
        // OpenAI's form: an assistant turn's tool_calls (arguments a string of JSON), a result's tool_call_id
        let msg = |m: &rt::serde_json::Value| rt::Message {
            tool_calls: m["tool_calls"].as_array().into_iter().flatten().map(|c| rt::ToolCall { id: s(&c["id"]), name: s(&c["function"]["name"]), arguments: s(&c["function"]["arguments"]) }).collect(),
            tool_call_id: m["tool_call_id"].as_str().map(str::to_string),
            ..rt::Message::new(s(&m["role"]), s(&m["content"]))
        };
        let msgs: Vec<rt::Message> = c["messages"].as_array().expect("messages").iter().map(msg).collect();
        let want = s(&c["expected"]);
        // a case's own template variables ("kwargs", e.g. enable_thinking), else none
        let kw = c.get("kwargs").and_then(|v| v.as_object()).cloned().unwrap_or_default();
        match t.render(&msgs, c["add_generation_prompt"].as_bool().expect("a bool"), &bos, &eos, &kw) {
            Ok(got) if got == want => {}
            got => {
                bad += 1;
                println!("chat_template (vectors) case {k}:\n  got  {got:?}\n  want {want:?}");
            }
        }
    }
    if !gate_template_kwargs_checked(t) {
        bad += 1;
        println!("chat_template: kwargs are not passed beside the engine's variables, or one of those is not refused");
    }
    println!("GATE chat_template cases={} mismatches={bad}", cases.len() + 1);
    assert!(!cases.is_empty(), "no chat template cases");
    assert_eq!(bad, 0, "{bad} of {} chat template cases differ from the Jinja2 rendering in {}", cases.len(), path.display());
}
