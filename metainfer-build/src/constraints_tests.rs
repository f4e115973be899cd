use super::*;
use crate::attr::parse_args;
use quote::quote;

fn ckb() -> Ckb {
    Ckb::load(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/ckb")).unwrap()
}

fn args(pairs: &[(&str, ArgValue)]) -> Vec<Arg> {
    pairs.iter().map(|(k, v)| Arg::new(*k, v.clone())).collect()
}

fn s(v: &str) -> ArgValue {
    ArgValue::Str(v.to_string())
}

fn base() -> Vec<Arg> {
    args(&[
        ("model", s("qwen2")),
        ("hw", s("x86_64-avx2")),
        ("quant", s("q4_k_m")),
    ])
}

fn with(extra: &[(&str, ArgValue)]) -> Vec<Arg> {
    let mut v = base();
    v.extend(args(extra));
    v
}

fn err(a: &[Arg]) -> ConstraintError {
    Constraints::from_args(a, &ckb()).unwrap_err()
}

#[test]
fn canonical_toml_is_sorted_and_filled() {
    let c = Constraints::from_args(&base(), &ckb()).unwrap();
    assert_eq!(
        c.canonical_toml(),
        "batch = 1\nfamily = \"qwen2\"\nfeatures = []\nformat = \"gguf\"\ngenerator = \"ckb\"\nhw = \"x86_64-avx2\"\nmodel = \"qwen2\"\nquant = \"q4_k_m\"\nreference = \"none\"\ntp = 1\n"
    );
    let c = Constraints::from_args(
        &with(&[
            ("features", ArgValue::List(vec!["server".into()])),
            ("max_seq", ArgValue::Int(4096)),
        ]),
        &ckb(),
    )
    .unwrap();
    assert_eq!(
        c.canonical_toml(),
        "batch = 1\nfamily = \"qwen2\"\nfeatures = [\"server\"]\nformat = \"gguf\"\ngenerator = \"ckb\"\nhw = \"x86_64-avx2\"\nmax_seq = 4096\nmodel = \"qwen2\"\nquant = \"q4_k_m\"\nreference = \"none\"\ntp = 1\n"
    );
    // It round-trips, and it is valid TOML a manifest can hold.
    assert_eq!(
        Constraints::from_canonical_toml(&c.canonical_toml()).unwrap(),
        c
    );
    // The key is blake3 of exactly that text, and is pinned: a change here invalidates every
    // committed cache entry, so it must be deliberate.
    assert_eq!(
        c.key(),
        blake3::hash(c.canonical_toml().as_bytes())
            .to_hex()
            .to_string()
    );
    let pinned = Constraints::from_args(&base(), &ckb()).unwrap().key();
    assert_eq!(pinned.len(), 64);
    assert_eq!(pinned, blake3::hash(b"batch = 1\nfamily = \"qwen2\"\nfeatures = []\nformat = \"gguf\"\ngenerator = \"ckb\"\nhw = \"x86_64-avx2\"\nmodel = \"qwen2\"\nquant = \"q4_k_m\"\nreference = \"none\"\ntp = 1\n").to_hex().to_string());
}

#[test]
fn attribute_formatting_never_changes_the_key() {
    let k = ckb();
    let key_of = |tokens: proc_macro2::TokenStream| {
        let a: Vec<Arg> = parse_args(tokens)
            .unwrap()
            .into_iter()
            .map(|a| a.arg)
            .collect();
        Constraints::from_args(&a, &k).unwrap().key()
    };
    let reference = key_of(quote!(
        model = "qwen2",
        hw = "x86_64-avx2",
        quant = "q4_k_m",
        features = ["server"]
    ));
    let variants = [
        // Other order, trailing comma.
        quote!(
            features = ["server"],
            quant = "q4_k_m",
            hw = "x86_64-avx2",
            model = "qwen2",
        ),
        // Defaults spelled out, derived format given, raw strings, odd spacing.
        quote!(
            model = r"qwen2",
            hw = "x86_64-avx2",
            quant = r#"q4_k_m"#,
            format = "gguf",
            batch = 1,
            tp = 1,
            generator = "ckb",
            reference = "none",
            features = &["server"]
        ),
    ];
    for v in variants {
        assert_eq!(key_of(v), reference);
    }
    // Parsed from differently formatted source text too.
    let text = "model = \"qwen2\",\n    hw = \"x86_64-avx2\",\n\n  quant = \"q4_k_m\", // comment\n features = [\n \"server\",\n ]";
    assert_eq!(key_of(text.parse().unwrap()), reference);
    // And something that does differ, does change it.
    assert_ne!(
        key_of(quote!(
            model = "qwen2",
            hw = "x86_64-avx2",
            quant = "q4_k_m"
        )),
        reference
    );
}

#[test]
fn preset_and_derived_fields() {
    let c = Constraints::from_args(
        &args(&[
            ("model", s("qwen2.5-0.5b")),
            ("hw", s("sm_89")),
            ("quant", s("awq")),
        ]),
        &ckb(),
    )
    .unwrap();
    assert_eq!(c.family, "qwen2");
    assert_eq!(c.preset(), Some("qwen2.5-0.5b"));
    assert_eq!(c.format, crate::ckb::Format::Safetensors);
    assert_eq!(c.tp, 1);
    assert_eq!(c.summary(), "model=qwen2.5-0.5b hw=sm_89 quant=awq");
}

#[test]
fn native_resolves_to_a_cpu_target() {
    let c = Constraints::from_args(
        &args(&[
            ("model", s("qwen2")),
            ("hw", s("native")),
            ("quant", s("f32")),
        ]),
        &ckb(),
    )
    .unwrap();
    let k = ckb();
    let t = &k.targets[&c.hw];
    assert_eq!(t.kind, crate::ckb::TargetKind::Cpu);
    assert!(c.canonical_toml().contains(&format!("hw = \"{}\"", c.hw)));
    assert!(!c.canonical_toml().contains("native"));
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        assert_ne!(c.hw, "generic");
    }
}

#[test]
fn unknown_key() {
    let e = err(&with(&[("modle", s("x"))]));
    assert_eq!(e.arg_index, Some(3));
    assert!(!e.on_value);
    assert_eq!(
        e.message,
        "unknown key `modle` (did you mean `model`?); allowed keys: model, hw, quant, format, max_seq, batch, tp, features, generator, reference"
    );
}

#[test]
fn duplicate_key() {
    let e = err(&with(&[("hw", s("generic"))]));
    assert_eq!((e.arg_index, e.on_value), (Some(3), false));
    assert_eq!(
        e.message,
        "duplicate key `hw`: it is already given as argument 2; give each key once"
    );
}

#[test]
fn missing_keys() {
    let e = err(&args(&[("model", s("qwen2")), ("hw", s("generic"))]));
    assert_eq!(e.arg_index, None);
    assert_eq!(
        e.message,
        "missing key `quant`; add quant = \"…\", one of: awq, f32, q4_k_m, q8_0"
    );
    let e = err(&[]);
    assert_eq!(
        e.message,
        "missing key `model`; add model = \"…\", one of: qwen2, qwen2.5-0.5b"
    );
}

#[test]
fn unknown_values_list_what_is_allowed() {
    let cases: &[(&str, ArgValue, &str)] = &[
        (
            "model",
            s("qwen3"),
            "unknown model `qwen3` (did you mean `qwen2`?); allowed: qwen2, qwen2.5-0.5b",
        ),
        (
            "hw",
            s("avx2"),
            "unknown hw `avx2`; allowed: native, generic, sm_89, x86_64-avx2, x86_64-avx512",
        ),
        (
            "quant",
            s("q4_k_s"),
            "unknown quant `q4_k_s` (did you mean `q4_k_m`?); allowed: awq, f32, q4_k_m, q8_0",
        ),
        (
            "format",
            s("ggml"),
            "unknown format `ggml` (did you mean `gguf`?); allowed: gguf, safetensors",
        ),
        (
            "generator",
            s("gpt"),
            "unknown generator `gpt`; allowed: ckb, llm, auto",
        ),
        (
            "reference",
            s("all"),
            "unknown reference `all`; allowed: none, contract, sibling",
        ),
    ];
    for (key, value, message) in cases {
        let mut a = base();
        match a.iter_mut().find(|a| a.key == *key) {
            Some(arg) => arg.value = value.clone(),
            None => a.push(Arg::new(*key, value.clone())),
        }
        let e = err(&a);
        assert!(e.on_value, "{key}");
        assert_eq!(e.arg_index, a.iter().position(|x| x.key == *key), "{key}");
        assert_eq!(e.message, *message);
    }
    let e = err(&with(&[(
        "features",
        ArgValue::List(vec!["server".into(), "serve".into()]),
    )]));
    assert_eq!(
        e.message,
        "unknown feature `serve` (did you mean `server`?); allowed: server"
    );
    let e = err(&with(&[(
        "features",
        ArgValue::List(vec!["server".into(), "server".into()]),
    )]));
    assert_eq!(
        e.message,
        "feature `server` is listed twice in `features`; list it once"
    );
}

#[test]
fn tensor_type_without_file_types_is_not_a_file_quant() {
    let mut a = base();
    a[2].value = s("q4_k");
    let e = err(&a);
    assert_eq!((e.arg_index, e.on_value), (Some(2), true));
    assert_eq!(
        e.message,
        "quant `q4_k` is a tensor type, not a quantization of whole files (quants/q4_k.toml lists no file_types); allowed: awq, f32, q4_k_m, q8_0"
    );
}

#[test]
fn wrong_value_types() {
    let cases: &[(&str, ArgValue, &str)] = &[
        ("model", ArgValue::Int(2), "`model` takes a string (model = \"qwen2\"), found an integer"),
        ("hw", ArgValue::Bool(true), "`hw` takes a string (hw = \"x86_64-avx2\"), found a boolean"),
        ("quant", ArgValue::List(vec![]), "`quant` takes a string (quant = \"q4_k_m\"), found an array"),
        ("max_seq", s("4096"), "`max_seq` takes a positive integer (max_seq = 4096), found a string"),
        ("max_seq", ArgValue::Int(0), "`max_seq` must be a positive integer, found 0"),
        ("batch", ArgValue::Int(-3), "`batch` must be a positive integer, found -3"),
        ("tp", ArgValue::Int(1 << 40), "`tp` = 1099511627776 is too large; the most allowed is 4294967295"),
        ("features", s("server"), "`features` takes an array of strings (features = [\"server\"]), found a string; allowed features: server"),
    ];
    for (key, value, message) in cases {
        let mut a = base();
        match a.iter_mut().find(|a| a.key == *key) {
            Some(arg) => arg.value = value.clone(),
            None => a.push(Arg::new(*key, value.clone())),
        }
        let e = err(&a);
        assert!(e.on_value, "{key}");
        assert_eq!(e.message, *message);
    }
}

#[test]
fn conflicting_format() {
    let a = args(&[
        ("model", s("qwen2")),
        ("hw", s("sm_89")),
        ("quant", s("awq")),
        ("format", s("gguf")),
    ]);
    let e = err(&a);
    assert_eq!((e.arg_index, e.on_value), (Some(3), false));
    assert_eq!(
        e.message,
        "conflicting keys: format = \"gguf\" but quant `awq` is a safetensors quant; drop `format` (it follows from the quant) or choose a gguf quant: f32, q4_k_m, q8_0"
    );
}

#[test]
fn impossible_combinations() {
    let e = err(&with(&[("tp", ArgValue::Int(2))]));
    assert_eq!((e.arg_index, e.on_value), (Some(3), false));
    assert_eq!(
        e.message,
        "impossible combination: tp = 2 needs a cuda target, but hw `x86_64-avx2` is a cpu target; use tp = 1 or a cuda hw: sm_89"
    );
    let mut a = with(&[("max_seq", ArgValue::Int(100_000))]);
    a[0].value = s("qwen2.5-0.5b");
    let e = err(&a);
    assert_eq!((e.arg_index, e.on_value), (Some(3), true));
    assert_eq!(
        e.message,
        "impossible combination: max_seq = 100000 exceeds the context length 32768 of preset `qwen2.5-0.5b`; use max_seq <= 32768, or model = \"qwen2\" to read the limit from the file"
    );
    // awq's kernel has only a cuda realization.
    let a = args(&[
        ("model", s("qwen2")),
        ("hw", s("x86_64-avx2")),
        ("quant", s("awq")),
    ]);
    let e = err(&a);
    assert_eq!((e.arg_index, e.on_value), (Some(2), true));
    assert_eq!(
        e.message,
        "impossible combination: quant `awq` contains tensor type `awq_int4`, which needs the dot kernel `dot_awq_int4`, and the ckb has no realization of it for hw `x86_64-avx2`; use hw = one of: sm_89, or generator = \"auto\" to let the llm implementer fill it"
    );
    // With the llm allowed to fill gaps it is possible.
    let mut a = a;
    a.push(Arg::str("generator", "auto"));
    assert!(Constraints::from_args(&a, &ckb()).is_ok());
}

#[test]
fn first_problem_in_argument_order_wins() {
    let a = args(&[("hw", s("nope")), ("model", s("nope"))]);
    let e = err(&a);
    assert_eq!(e.arg_index, Some(0));
    assert!(e.message.starts_with("unknown hw `nope`"));
}

#[test]
fn constraints_that_would_change_only_the_key_are_refused() {
    let e = err(&with(&[("batch", ArgValue::Int(8))]));
    assert_eq!((e.arg_index, e.on_value), (Some(3), true));
    assert_eq!(
        e.message,
        "`batch` = 8 needs features = [\"server\"]: it is how many requests the server runs at once, one KV slot each (Engine::step, in every cpu engine, needs no key); add the feature or drop `batch`"
    );
    // with the server, batch is the number of requests it runs at once (in the key)
    let server = || ("features", ArgValue::List(vec!["server".into()]));
    let c =
        Constraints::from_args(&with(&[server(), ("batch", ArgValue::Int(16))]), &ckb()).unwrap();
    assert_eq!(c.batch, 16);
    assert!(c.canonical_toml().starts_with("batch = 16\n"));
    let mut a = with(&[server(), ("batch", ArgValue::Int(8))]);
    a[1] = args(&[("hw", s("sm_89"))]).remove(0);
    let e = err(&a);
    assert_eq!((e.arg_index, e.on_value), (Some(4), true));
    assert!(
        e.message
            .starts_with("impossible combination: batch = 8 needs a cpu target"),
        "{}",
        e.message
    );
    let e = err(&with(&[("batch", ArgValue::Int(65))]));
    assert_eq!(
        e.message,
        "`batch` = 65 is too large: an engine serves at most 64 sequences at once (one KV slot each); use 1 to 64"
    );
    let e = err(&with(&[("features", ArgValue::List(vec!["chat".into()]))]));
    assert_eq!((e.arg_index, e.on_value), (Some(3), true));
    assert_eq!(
        e.message,
        "feature `chat` changes nothing: every engine already has the chat template and `Engine::chat`; drop it (allowed features: server)"
    );
    let e = err(&args(&[
        ("model", s("qwen2")),
        ("hw", s("sm_89")),
        ("quant", s("awq")),
        ("tp", ArgValue::Int(2)),
    ]));
    assert_eq!((e.arg_index, e.on_value), (Some(3), true));
    assert_eq!(
        e.message,
        "`tp` = 2 is not supported yet: cuda engines run on one device, so tensor parallelism would change nothing but the cache key; use tp = 1 or drop the key"
    );
    let e = err(&with(&[("reference", s("sibling"))]));
    assert_eq!((e.arg_index, e.on_value), (Some(3), false));
    assert_eq!(
        e.message,
        "`reference` = \"sibling\" changes nothing with generator = \"ckb\": only the llm implementer reads it; drop it, or set generator = \"llm\" or \"auto\""
    );
    // The defaults, spelled out, are fine (and give the same key as leaving them out).
    let spelled = with(&[
        ("batch", ArgValue::Int(1)),
        ("tp", ArgValue::Int(1)),
        ("reference", s("none")),
    ]);
    assert_eq!(
        Constraints::from_args(&spelled, &ckb()).unwrap().key(),
        Constraints::from_args(&base(), &ckb()).unwrap().key()
    );
}
