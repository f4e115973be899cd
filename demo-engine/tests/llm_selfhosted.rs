//! The LLM agent chain with a self-hosted LLM: `demo-engine serve` runs the real
//! Qwen2.5-Coder-0.5B-Instruct (the engine this workspace generates), and the chain asks it to
//! implement a contract the CKB lacks — `dot_f32`, cut out of a copy of the CKB — for the
//! generic engine. The outcome is either a section that passed every gate (a proposal) or a
//! clean, explained failure with nothing cached; both are reported, neither is faked.
//!
//! Skipped with a printed reason when the model file is absent. Bounded by
//! METAINFER_SELFHOST_ROUNDS (default 3) rounds and a 15-minute wall budget;
//! METAINFER_SELFHOST_REFERENCE (default `sibling`) sets the `reference` constraint;
//! METAINFER_SELFHOST_GAP (default `dot_f32`) the contract cut out and
//! METAINFER_SELFHOST_FAMILY (default `qwen2`) the engine's model (e.g. `geglu` and `gemma3`:
//! a part only gemma3's graph has).
#![allow(
    clippy::disallowed_methods,
    reason = "a test harness reads its own knobs and hands cargo's variables on"
)]

mod common;

use metainfer::rt::serde_json;
use metainfer_build::chain::{self, ChainOptions};
use metainfer_build::llm::LlmConfig;
use metainfer_build::{
    ensure::ensure_with, Arg, BuildContext, Cache, Ckb, Constraints, Mode, ModeSetting,
};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `demo-engine serve` on a free port; returns the process and `http://ADDR/v1`.
fn serve(model: &Path) -> (Served, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_demo-engine"))
        .args(["serve", "--model"])
        .arg(model)
        .args(["--port", "0", "--threads", "2", "--max-concurrent", "2"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start demo-engine serve");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if let Some(url) = line.strip_prefix("listening on ") {
                if let Some(t) = tx.take() {
                    let _ = t.send(url.to_string());
                }
            }
            eprintln!("[serve] {line}");
        }
    });
    let url = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("demo-engine serve did not start listening within 120 s");
    (Served(child), url)
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

/// `<ws>/ckb`: the real CKB without any realization of contract `gap`.
fn ckb_with_gap(ws: &Path, root: &Path, gap: &str) -> Ckb {
    let dir = ws.join("ckb");
    // The copy is self-contained: gates, fixtures and vectors all live under ckb/.
    copy_dir(&root.join("ckb"), &dir);
    let toml = dir.join(format!("contracts/{gap}.toml"));
    let text = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(&toml, &text[..text.find("[[realizations]]").unwrap()]).unwrap();
    std::fs::remove_dir_all(dir.join(format!("realizations/{gap}"))).unwrap();
    Ckb::load(&dir).unwrap()
}

/// One line per step of a chain transcript: what each round got and why it was rejected.
fn summarize(transcript: &str) -> Vec<String> {
    let mut out = Vec::new();
    for l in transcript.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(l) else {
            continue;
        };
        let round = v["round"].as_u64().unwrap_or(0);
        match v["step"].as_str().unwrap_or("") {
            "llm" => out.push(format!(
                "round {round}: {} replied {} bytes in {:.1} s ({} prompt + {} completion tokens){}",
                v["role"].as_str().unwrap_or("?"),
                v["reply"].as_str().map(str::len).unwrap_or(0),
                v["elapsed_ms"].as_u64().unwrap_or(0) as f64 / 1000.0,
                v["usage"]["prompt_tokens"],
                v["usage"]["completion_tokens"],
                v["error"].as_str().map(|e| format!("; error: {e}")).unwrap_or_default()
            )),
            "extract" => out.push(format!("round {round}: no usable code: {}", v["problem"].as_str().unwrap_or(""))),
            "review" if v["problems"].as_array().is_some_and(|p| !p.is_empty()) => {
                out.push(format!("round {round}: spec-reviewer: {}", v["problems"]))
            }
            "verify" if v["compiled"] == false => out.push(format!(
                "round {round}: compile failed: {}",
                v["errors"].as_str().unwrap_or("").lines().find(|l| l.starts_with("error")).unwrap_or("")
            )),
            "verify" if v.get("compiled").is_some() => out.push(format!("round {round}: gates passed = {}", v["passed"])),
            "give_up" => out.push(format!("gave up after {} rounds: {}", v["rounds"], v["why"].as_str().unwrap_or(""))),
            _ => {}
        }
    }
    out
}

#[test]
fn the_real_model_fills_a_ckb_gap_or_fails_cleanly() {
    let Some(model) = common::real_model() else {
        return;
    };
    let root = common::root().canonicalize().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let var = |k: &str, default: &str| std::env::var(k).unwrap_or_else(|_| default.into());
    let gap = var("METAINFER_SELFHOST_GAP", "dot_f32");
    let ckb = ckb_with_gap(ws.path(), &root, &gap);
    let reference = var("METAINFER_SELFHOST_REFERENCE", "sibling");
    let family = var("METAINFER_SELFHOST_FAMILY", "qwen2");
    let args = [
        Arg::str("model", &family),
        Arg::str("hw", "generic"),
        Arg::str("quant", "q4_k_m"),
        Arg::str("generator", "auto"),
        Arg::str("reference", &reference),
    ];
    let c = Constraints::from_args(&args, &ckb)
        .map_err(|e| e.message)
        .unwrap();

    let (_server, base_url) = serve(&model);
    let mut cfg = LlmConfig::new(base_url, "qwen2.5-coder-0.5b-instruct-q4_k_m");
    cfg.total_timeout = Duration::from_secs(600);
    cfg.max_retries = 1;
    // `demo-engine serve` takes llama.cpp's repeat_penalty: the chain sends it once a reply loops.
    cfg.repeat_penalty = Some(1.3);
    let mut opts = ChainOptions::new(root.clone(), root.join("target/metainfer"), true);
    opts.llm = Some(cfg);
    opts.budget.max_rounds = std::env::var("METAINFER_SELFHOST_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    opts.budget.max_wall = Duration::from_secs(900);
    opts.budget.reply_tokens = 1024;
    let ctx = BuildContext {
        workspace_root: root.clone(),
        cache: Cache::new("cache", ws.path()),
        mode: ModeSetting {
            mode: Mode::Auto,
            reason: "the default".into(),
        },
        scratch_dir: root.join("target/metainfer"),
        progress: true,
    };

    let t0 = Instant::now();
    let result = ensure_with(&c, &ckb, &ctx, || chain::run(&c, &ckb, &opts));
    let took = t0.elapsed().as_secs_f64();
    let report_dir: PathBuf = root.join("target/metainfer");
    let (outcome, transcript) = match &result {
        Ok(entry) => {
            assert!(
                entry.manifest.gates_passed,
                "only verified entries are cached"
            );
            let slot = entry.manifest.slots.iter().find(|s| s.slot == gap).unwrap();
            assert_eq!(slot.implementer, "llm");
            let proposals = metainfer_build::chain::adopt::list(&ws.path().join("ckb"));
            assert_eq!(
                proposals.len(),
                1,
                "a verified llm section becomes a proposal"
            );
            (
                format!("verified: proposal {}", proposals[0].0),
                std::fs::read_to_string(entry.path("transcript.jsonl")).unwrap(),
            )
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(
                ctx.cache.lookup(&c).unwrap().is_none(),
                "a failed llm run caches nothing"
            );
            assert!(msg.contains(&gap), "the error names the slot: {msg}");
            let kept = report_dir
                .join("failed")
                .join(c.key())
                .join("transcript.jsonl");
            (
                format!("clean failure: {}", msg.lines().next().unwrap_or("")),
                std::fs::read_to_string(kept).unwrap_or_default(),
            )
        }
    };
    let mut report = vec![format!(
        "self-hosted llm chain ({family} engine, gap {gap}, reference = {reference}): {outcome} ({took:.0} s)"
    )];
    report.extend(summarize(&transcript));
    let text = report.join("\n");
    println!("{text}");
    let _ = std::fs::write(
        report_dir.join("selfhosted-report.txt"),
        format!("{text}\n"),
    );
    assert!(
        !summarize(&transcript).is_empty(),
        "the transcript records the rounds"
    );
}
