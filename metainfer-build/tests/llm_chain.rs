//! The LLM agent chain against a scripted OpenAI-compatible server on loopback: a copy of the
//! real CKB with a gap (no realization of `dot_f32`), filled by scripted replies that are
//! rejected by the reviewer, by the compiler and by a gate before one passes; garbage replies
//! and an endpoint that never answers end in clear errors with nothing cached.
//!
//! The verifier really compiles the generic engine and runs its gates (a few minutes cold; the
//! scratch crates share `target/metainfer/target` with the other chain tests).

mod support;

use metainfer_build::chain::{self, ChainError, ChainOptions};
use metainfer_build::llm::LlmConfig;
use metainfer_build::{
    ensure::ensure_with, Arg, BuildContext, BuildError, Cache, Ckb, Constraints, Mode, ModeSetting,
};
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::scripted_http::{chat_json, chat_sse, ScriptedServer, Step};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            if e.file_name() != "proposals" {
                copy_dir(&e.path(), &dst);
            }
        } else {
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}

/// A copy of the real CKB, as `<ws>/ckb` (self-contained: its gates, fixtures and vectors
/// come along), in which `dot_f32` has no realization.
fn ckb_with_gap(ws: &Path) -> Ckb {
    let dir = &ws.join("ckb");
    copy_dir(&repo_root().join("ckb"), dir);
    let toml = dir.join("contracts/dot_f32.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    let cut = text.find("[[realizations]]").unwrap();
    std::fs::write(&toml, &text[..cut]).unwrap();
    std::fs::remove_dir_all(dir.join("realizations/dot_f32")).unwrap();
    let ckb = Ckb::load(dir).unwrap();
    assert!(ckb.check().is_empty(), "{:?}", ckb.check());
    ckb
}

fn constraints(ckb: &Ckb, generator: &str) -> Result<Constraints, String> {
    let mut args = vec![
        Arg::str("model", "qwen2"),
        Arg::str("hw", "generic"),
        Arg::str("quant", "q4_k_m"),
        Arg::str("generator", generator),
    ];
    // Only the llm implementer reads `reference` (with the ckb generator it is refused).
    if generator != "ckb" {
        args.push(Arg::str("reference", "sibling"));
    }
    Constraints::from_args(&args, ckb).map_err(|e| e.message)
}

fn context(ws: &Path) -> BuildContext {
    BuildContext {
        workspace_root: repo_root(),
        cache: Cache::new("cache", ws),
        mode: ModeSetting {
            mode: Mode::Auto,
            reason: "the default".into(),
        },
        scratch_dir: repo_root().join("target/metainfer"),
        progress: true,
    }
}

fn options(server: &ScriptedServer, rounds: u32) -> ChainOptions {
    let mut o = ChainOptions::new(repo_root(), repo_root().join("target/metainfer"), true);
    let mut cfg = LlmConfig::new(server.base_url(), "scripted-coder");
    cfg.total_timeout = Duration::from_secs(5);
    cfg.max_retries = 1;
    cfg.backoff_base = Duration::from_millis(5);
    cfg.backoff_max = Duration::from_millis(20);
    o.llm = Some(cfg);
    o.budget.max_rounds = rounds;
    o
}

fn fenced(code: &str) -> String {
    format!("Here is the section.\n\n```rust\n{code}```\n")
}

/// The verified realization the gap was cut from: what a correct reply holds.
fn correct_section() -> String {
    let r = repo_root().join("ckb/realizations/dot_f32");
    let blocks = std::fs::read_to_string(r.join("blocks.rs")).unwrap();
    let scalar = std::fs::read_to_string(r.join("scalar.rs")).unwrap();
    format!("{blocks}\n{scalar}")
}

#[test]
fn ckb_generator_refuses_the_gap_and_names_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let ckb = ckb_with_gap(dir.path());
    let e = constraints(&ckb, "ckb").unwrap_err();
    assert!(
        e.contains("dot_f32") && e.contains("generator = \"auto\""),
        "{e}"
    );
}

#[test]
fn auto_fills_the_gap_after_review_compile_and_gate_feedback_then_adopts() {
    let dir = tempfile::tempdir().unwrap();
    let ckb_dir = dir.path().join("ckb");
    let ckb = ckb_with_gap(dir.path());
    let c = constraints(&ckb, "auto").unwrap();

    let policy_violation =
        "pub(crate) const F32_ACT: ActKind = ActKind::F32;\nfn boom() { std::process::exit(1) }\n";
    let does_not_compile = "pub(crate) const F32_ACT: ActKind = ActKind::F32;\n\
        pub(crate) fn dequant_row_f32(row: &[u8], out: &mut [f32]) { helper_that_does_not_exist(row, out) }\n\
        pub(crate) fn dot_f32_scalar(row: &[u8], x: &Act) -> f32 { 0.0 }\n";
    let wrong_numbers = correct_section().replace("sum as f32\n}", "(sum * 0.5) as f32\n}");
    assert_ne!(
        wrong_numbers,
        correct_section(),
        "the wrong variant must differ"
    );
    let server = ScriptedServer::start(vec![
        chat_sse(&fenced(policy_violation), 3),
        chat_json(&fenced(does_not_compile)),
        Step::Json {
            status: 429,
            headers: vec![("retry-after-ms".into(), "10".into())],
            body: r#"{"error":{"message":"slow down","type":"rate_limit"}}"#.into(),
        },
        chat_sse(&fenced(&wrong_numbers), 5),
        chat_json(&fenced(&correct_section())),
    ]);
    let opts = options(&server, 4);
    let ws = tempfile::tempdir().unwrap();
    let ctx = context(ws.path());
    let entry = ensure_with(&c, &ckb, &ctx, || chain::run(&c, &ckb, &opts)).unwrap();

    // What the implementer was told after each rejected round, verbatim.
    let reqs = server.requests();
    assert_eq!(reqs.len(), 5, "four rounds plus one 429 retry");
    let last_user = |i: usize| -> String {
        let v: serde_json::Value = serde_json::from_str(&reqs[i].body).unwrap();
        let msgs = v["messages"].as_array().unwrap();
        msgs.last().unwrap()["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let first = last_user(0);
    assert!(
        first.contains("dot_f32")
            && first.contains("pub(crate) fn dot_f32_scalar(row: &[u8], x: &Act) -> f32"),
        "{first}"
    );
    assert!(
        first.contains("sibling realization"),
        "reference = sibling shows one: {first}"
    );
    let after_review = last_user(1);
    assert!(
        after_review.contains("spec-reviewer")
            && after_review.contains("line 2")
            && after_review.contains("std::process"),
        "{after_review}"
    );
    let after_compile = last_user(2);
    assert!(
        after_compile.contains("could not compile")
            && after_compile.contains("helper_that_does_not_exist"),
        "{after_compile}"
    );
    assert!(after_compile.contains("of your section"), "{after_compile}");
    assert_eq!(
        last_user(3),
        after_compile,
        "the 429 was retried with the same request"
    );
    let after_gate = last_user(4);
    assert!(
        after_gate.contains("failed: kernels") && after_gate.contains("f32 n=1 case=0: got"),
        "{after_gate}"
    );
    assert!(!after_gate.contains("stack backtrace"), "{after_gate}");

    // The entry: llm slot recorded, transcript with every exchange, manifest with request ids.
    let m = &entry.manifest;
    assert!(m.gates_passed);
    assert_eq!(
        m.llm_model.as_deref(),
        Some("scripted-model"),
        "the model id the server reported"
    );
    assert_eq!(m.llm_request_ids.len(), 4, "{:?}", m.llm_request_ids);
    let slot = m.slots.iter().find(|s| s.slot == "dot_f32").unwrap();
    assert_eq!(slot.implementer, "llm");
    let transcript = std::fs::read_to_string(entry.path("transcript.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = transcript
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let llm: Vec<_> = lines.iter().filter(|l| l["step"] == "llm").collect();
    assert_eq!(llm.len(), 4);
    assert!(llm
        .iter()
        .all(|l| l["request"].is_array() && l["reply"].is_string() && l["request_id"].is_string()));
    assert!(lines
        .iter()
        .any(|l| l["step"] == "verify" && l["compiled"] == false));
    assert!(lines
        .iter()
        .any(|l| l["step"] == "verify" && l["passed"] == false));
    let engine = std::fs::read_to_string(entry.engine_path()).unwrap();
    assert!(
        engine.contains("realization dot_f32/scalar (llm)"),
        "the section says who wrote it"
    );

    // The gate failure matched no known failure mode, so one was proposed.
    let modes = std::fs::read_to_string(ckb_dir.join("proposals/failure_modes.toml")).unwrap();
    assert!(modes.contains("dot_f32_"), "{modes}");

    // The passing section became a proposal; adopting it closes the gap for the ckb generator.
    let proposals = metainfer_build::chain::adopt::list(&ckb_dir);
    assert_eq!(proposals.len(), 1, "{proposals:?}");
    let (id, p) = &proposals[0];
    let p = p.as_ref().unwrap();
    assert_eq!(
        (p.contract.as_str(), p.variant.as_str(), p.rounds),
        ("dot_f32", "scalar", 4)
    );
    assert!(p
        .gate
        .iter()
        .any(|g| g.id == "kernels" && g.status == "pass"));
    let adopted = metainfer_build::chain::adopt::adopt(&ckb_dir, id).unwrap();
    assert!(adopted.realization.exists());
    let ckb2 = Ckb::load(&ckb_dir).unwrap();
    assert!(ckb2.check().is_empty(), "{:?}", ckb2.check());
    let c2 = constraints(&ckb2, "ckb").expect("the adopted realization covers the gap");
    let (plan, _, _) = chain::implement_engine(&c2, &ckb2, false).unwrap();
    assert!(plan.slots.iter().all(|s| !s.llm));
}

#[test]
fn garbage_replies_exhaust_the_rounds_and_nothing_is_cached() {
    let dir = tempfile::tempdir().unwrap();
    let ckb = ckb_with_gap(dir.path());
    let c = constraints(&ckb, "auto").unwrap();
    let server = ScriptedServer::start(vec![
        chat_json("I am sorry, I cannot write Rust today."),
        chat_json("```rust\npub(crate) fn dot_f32_scalar(row: &[u8], x: &Act) -> f32 {\n    let mut s = 0.0;\n"),
        chat_json("<html><body>502 bad gateway</body></html>"),
    ]);
    let opts = options(&server, 3);
    let ws = tempfile::tempdir().unwrap();
    let ctx = context(ws.path());
    let e = ensure_with(&c, &ckb, &ctx, || chain::run(&c, &ckb, &opts)).unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(
            &e,
            BuildError::Chain { source, .. }
                if matches!(**source, ChainError::Budget { rounds: 3, .. })
        ),
        "{msg}"
    );
    assert!(
        msg.contains("slot `dot_f32`")
            && msg.contains("nothing was cached")
            && msg.contains("transcript kept in"),
        "{msg}"
    );
    let reqs = server.requests();
    let v: serde_json::Value = serde_json::from_str(&reqs[1].body).unwrap();
    let fb = v["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(fb.contains("no ```rust code block"), "{fb}");
    let v: serde_json::Value = serde_json::from_str(&reqs[2].body).unwrap();
    let fb = v["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(fb.contains("cut off"), "{fb}");
    assert!(
        ctx.cache.lookup(&c).unwrap().is_none(),
        "nothing may reach the cache"
    );
}

#[test]
fn an_endpoint_that_never_answers_is_a_clear_error_and_nothing_is_cached() {
    let dir = tempfile::tempdir().unwrap();
    let ckb = ckb_with_gap(dir.path());
    let c = constraints(&ckb, "auto").unwrap();
    let server = ScriptedServer::start(vec![
        Step::Hang(Duration::from_secs(30)),
        Step::Hang(Duration::from_secs(30)),
    ]);
    let mut opts = options(&server, 3);
    opts.llm.as_mut().unwrap().total_timeout = Duration::from_millis(800);
    let ws = tempfile::tempdir().unwrap();
    let ctx = context(ws.path());
    let t0 = std::time::Instant::now();
    let e = ensure_with(&c, &ckb, &ctx, || chain::run(&c, &ckb, &opts)).unwrap_err();
    let msg = e.to_string();
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "bounded: {:?}",
        t0.elapsed()
    );
    assert!(
        msg.contains("implementer request for slot `dot_f32`")
            && msg.contains("nothing was cached"),
        "{msg}"
    );
    assert!(
        msg.to_lowercase().contains("timed out") || msg.to_lowercase().contains("timeout"),
        "{msg}"
    );
    assert!(ctx.cache.lookup(&c).unwrap().is_none());
}

#[test]
fn no_llm_configured_names_the_variables() {
    let dir = tempfile::tempdir().unwrap();
    let ckb = ckb_with_gap(dir.path());
    let c = constraints(&ckb, "auto").unwrap();
    let opts = ChainOptions::new(repo_root(), repo_root().join("target/metainfer"), false);
    let e = chain::run(&c, &ckb, &opts).unwrap_err().to_string();
    assert!(
        e.contains("dot_f32")
            && e.contains("METAINFER_LLM_BASE_URL")
            && e.contains("METAINFER_LLM_MODEL"),
        "{e}"
    );
}
