//! The `cargo metainfer` CLI on a small workspace: prepare --check, prepare, ls, show, vendor and
//! ckb check (generation itself is the chain's; here the cache is filled by the library).

#[path = "../../metainfer-build/tests/common/mod.rs"]
mod common;

use metainfer_build::{Cache, Ckb};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

struct Ws {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

fn workspace() -> Ws {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("ws");
    let w = |rel: &str, text: &str| {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    w(
        "Cargo.toml",
        "[workspace]\nmembers = [\"crates/*\"]\nexclude = [\"crates/skipped\"]\n",
    );
    w("crates/app/Cargo.toml", "[package]\nname = \"app\"\n");
    w(
        "crates/app/src/main.rs",
        "#[metainfer::engine(model = \"qwen2\", hw = \"generic\", quant = \"f32\")]\npub struct Small;\n\nfn main() {}\n",
    );
    w(
        "crates/app/build.rs",
        "fn main() {\n    metainfer_build::Engine::new(\"Eight\").model(\"qwen2\").hw(\"generic\").quant(\"q8_0\").emit().unwrap();\n}\n",
    );
    // Not scanned: trybuild cases, nested target dirs, excluded members.
    w(
        "crates/app/tests/ui/bad.rs",
        "#[metainfer::engine(model = \"nope\")]\nstruct Bad;\n",
    );
    w(
        "crates/app/target/x.rs",
        "#[metainfer::engine(model = \"nope\")]\nstruct Bad;\n",
    );
    w(
        "crates/skipped/Cargo.toml",
        "[package]\nname = \"skipped\"\n",
    );
    w(
        "crates/skipped/src/lib.rs",
        "#[metainfer::engine(model = \"nope\")]\nstruct Bad;\n",
    );
    Ws { _tmp: tmp, root }
}

fn metainfer(ws: &Path, args: &[&str]) -> (bool, String, String) {
    metainfer_with(ws, args, &[])
}

/// [`metainfer`] with these variables set as well.
fn metainfer_with(ws: &Path, args: &[&str], vars: &[(&str, &str)]) -> (bool, String, String) {
    let out: Output = Command::new(env!("CARGO_BIN_EXE_cargo-metainfer"))
        .args(args)
        .current_dir(ws.join("crates/app"))
        .env("METAINFER_CKB_DIR", common::fixture_ckb_dir())
        .env_remove("METAINFER_CACHE_DIR")
        .env_remove("METAINFER_MODE")
        .envs(vars.iter().copied())
        .output()
        .unwrap();
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.success(), s(&out.stdout), s(&out.stderr))
}

/// A candidate for `c` whose engine.rs is the one the ckb implementer generates from the
/// fixture ckb (so that `prepare --check` can re-derive it), with made-up gates.
fn candidate(c: &metainfer_build::Constraints, tag: &str) -> metainfer_build::chain::Candidate {
    let mut cand = common::candidate(tag, true);
    let (_, _, engine) =
        metainfer_build::chain::implement_engine(c, &common::ckb(), false).unwrap();
    cand.files.insert("engine.rs".into(), engine.into_bytes());
    cand
}

fn fill(ws: &Path, digest: &str) -> (String, String) {
    let cache = Cache::new("cache", ws);
    let small = common::constraints(&[("model", "qwen2"), ("hw", "generic"), ("quant", "f32")]);
    let eight = common::constraints(&[("model", "qwen2"), ("hw", "generic"), ("quant", "q8_0")]);
    cache
        .replace(&small, digest, &candidate(&small, "small"))
        .unwrap();
    cache
        .replace(&eight, digest, &candidate(&eight, "eight"))
        .unwrap();
    (small.key(), eight.key())
}

#[test]
fn prepare_check_refuses_an_edited_entry_whose_manifest_was_rehashed() {
    let ws = workspace();
    let digest = Ckb::load(common::fixture_ckb_dir()).unwrap().digest();
    let (small, _) = fill(&ws.root, &digest);
    let (ok, _, err) = metainfer(&ws.root, &["prepare", "--check"]);
    assert!(ok, "{err}");
    // edit engine.rs and put its new hash in the manifest: the cache's own check passes ...
    let dir = ws.root.join("cache").join(&small);
    let engine = std::fs::read_to_string(dir.join("engine.rs")).unwrap();
    let edited = engine.replacen("\n", "\nfn injected() { let _ = 1 + 1; }\n", 3);
    std::fs::write(dir.join("engine.rs"), &edited).unwrap();
    let manifest = std::fs::read_to_string(dir.join("manifest.toml")).unwrap();
    let old = blake3::hash(engine.as_bytes()).to_hex().to_string();
    let new = blake3::hash(edited.as_bytes()).to_hex().to_string();
    assert!(manifest.contains(&old));
    std::fs::write(dir.join("manifest.toml"), manifest.replace(&old, &new)).unwrap();
    assert!(Cache::new("cache", &ws.root).open(&small, None).is_ok());
    // ... re-deriving it does not
    let (ok, _, err) = metainfer(&ws.root, &["prepare", "--check"]);
    assert!(!ok);
    assert!(
        err.contains(&format!("tampered: {}", &small[..16]))
            && err.contains("engine.rs differs from what the ckb implementer generates for its constraints (first at line 2)")
            && err.contains("run `cargo metainfer prepare --refresh`"),
        "{err}"
    );

    // vendoring onto a differing entry of the same key is refused, not overwritten
    let dest = ws.root.join("vendored");
    let (ok, _, err) = metainfer(&ws.root, &["vendor", dest.to_str().unwrap(), &small[..12]]);
    assert!(ok, "{err}");
    let fresh = tempfile::tempdir().unwrap();
    let clean = Cache::new(fresh.path().join("cache"), &ws.root);
    let small_c = common::constraints(&[("model", "qwen2"), ("hw", "generic"), ("quant", "f32")]);
    clean
        .replace(&small_c, &digest, &candidate(&small_c, "other"))
        .unwrap();
    let e = clean.open(&small, None).unwrap();
    let err = Cache::new(&dest, &ws.root)
        .import(&e)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("exists and differs from the one being copied there (engine.rs)"),
        "{err}"
    );
}

#[test]
fn prepare_check_lists_missing_then_passes() {
    let ws = workspace();
    let (ok, _, err) = metainfer(&ws.root, &["prepare", "--check"]);
    assert!(!ok);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "{err}");
    assert!(
        lines.iter().any(|l| l.starts_with("missing: ")
            && l.contains("`Small` at crates/app/src/main.rs:1")
            && l.contains("no entry cache/")),
        "{err}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("missing: ") && l.contains("`Eight` at crates/app/build.rs:2")),
        "{err}"
    );
    assert_eq!(
        lines[2],
        "metainfer: prepare --check found 2 problem(s) (0 engine(s) current)"
    );

    let digest = Ckb::load(common::fixture_ckb_dir()).unwrap().digest();
    fill(&ws.root, &digest);
    let (ok, out, err) = metainfer(&ws.root, &["prepare", "--check"]);
    assert!(ok, "{err}");
    assert_eq!(
        out,
        "metainfer: 2 engine(s) referenced, every entry in cache is current and verified\n"
    );
    // Nothing to generate.
    let (ok, out, err) = metainfer(&ws.root, &["prepare"]);
    assert!(ok, "{err}");
    assert_eq!(
        out.lines().filter(|l| l.starts_with("ok ")).count(),
        2,
        "{out}"
    );
}

#[test]
fn prepare_check_names_gates_that_did_not_run_where_an_entry_was_verified() {
    let ws = workspace();
    let digest = Ckb::load(common::fixture_ckb_dir()).unwrap().digest();
    let small = common::constraints(&[("model", "qwen2"), ("hw", "generic"), ("quant", "f32")]);
    let eight = common::constraints(&[("model", "qwen2"), ("hw", "generic"), ("quant", "q8_0")]);
    let mut cand = candidate(&small, "small");
    let why = "this engine was generated for hw = x86_64-avx512 but the cpu lacks avx512f";
    let gates = format!(
        "passed = true\n\n[[gate]]\nid = \"e2e_tiny\"\nstatus = \"skipped\"\nreason = \"{why}\"\n\n\
         [[gate]]\nid = \"kernels\"\nstatus = \"skipped\"\nreason = \"{why}\"\n\n\
         [[gate]]\nid = \"tokenizer\"\nstatus = \"pass\"\n"
    );
    cand.files.insert("gates.toml".into(), gates.into_bytes());
    let cache = Cache::new("cache", &ws.root);
    cache.replace(&small, &digest, &cand).unwrap();
    cache
        .replace(&eight, &digest, &candidate(&eight, "eight"))
        .unwrap();
    let (ok, out, err) = metainfer(&ws.root, &["prepare", "--check"]);
    assert!(ok, "{err}");
    let notes: Vec<&str> = out.lines().filter(|l| l.starts_with("note: ")).collect();
    assert_eq!(notes.len(), 1, "{out}");
    assert!(
        notes[0].ends_with(&format!(
            "gate(s) e2e_tiny, kernels skipped where it was verified: {why}"
        )),
        "{out}"
    );
    assert!(notes[0].contains(&small.key()[..16]), "{out}");
    assert!(
        out.ends_with("2 engine(s) referenced, every entry in cache is current and verified (1 with gates that could not run where they were verified: the notes above)\n"),
        "{out}"
    );
}

#[test]
fn prepare_check_reports_stale_tampered_and_invalid() {
    let ws = workspace();
    let (small, eight) = fill(&ws.root, "an older ckb");
    std::fs::write(
        ws.root.join("cache").join(&eight).join("gates.toml"),
        "edited",
    )
    .unwrap();
    std::fs::write(
        ws.root.join("crates/app/src/bad.rs"),
        "#[metainfer::engine(model = \"qwen2\", hw = \"generic\", quant = \"q4_k\")]\nstruct Bad;\n",
    )
    .unwrap();
    let (ok, _, err) = metainfer(&ws.root, &["prepare", "--check"]);
    assert!(!ok);
    assert!(err.contains("crates/app/src/bad.rs:1: engine `Bad`: quant `q4_k` is a tensor type, not a quantization of whole files"), "{err}");
    assert!(err.contains(&format!("stale: {} (model=qwen2 hw=generic quant=f32; `Small` at crates/app/src/main.rs:1): the ckb changed since it was generated; run `cargo metainfer prepare`", &small[..16])), "{err}");
    assert!(err.contains(&format!("broken: {}", &eight[..16])), "{err}");
    assert!(
        err.contains("gates.toml does not match its blake3 in manifest.toml"),
        "{err}"
    );
    assert!(err.contains("found 3 problem(s)"), "{err}");

    // prepare refuses to paper over a tampered entry without --refresh.
    std::fs::remove_file(ws.root.join("crates/app/src/bad.rs")).unwrap();
    let digest = Ckb::load(common::fixture_ckb_dir()).unwrap().digest();
    Cache::new("cache", &ws.root)
        .replace(
            &common::constraints(&[("model", "qwen2"), ("hw", "generic"), ("quant", "f32")]),
            &digest,
            &common::candidate("small", true),
        )
        .unwrap();
    let (ok, _, err) = metainfer(&ws.root, &["prepare"]);
    assert!(!ok);
    assert!(
        err.contains(&format!("broken    {}", &eight[..16])),
        "{err}"
    );
    assert!(
        err.contains("run `cargo metainfer prepare --refresh`"),
        "{err}"
    );
}

#[test]
fn ls_show_and_vendor() {
    let ws = workspace();
    let digest = Ckb::load(common::fixture_ckb_dir()).unwrap().digest();
    let (small, eight) = fill(&ws.root, &digest);

    let (ok, out, err) = metainfer(&ws.root, &["ls"]);
    assert!(ok, "{err}");
    let line = out.lines().find(|l| l.starts_with(&small[..16])).unwrap();
    assert!(
        line.contains(" ok ")
            && line.contains("model=qwen2 hw=generic quant=f32")
            && line.ends_with("used by: Small"),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with(&eight[..16]) && l.ends_with("used by: Eight")),
        "{out}"
    );

    let (ok, out, err) = metainfer(&ws.root, &["show", &small[..10]]);
    assert!(ok, "{err}");
    assert!(
        out.starts_with(&format!("# cache/{small}/manifest.toml\nkey = \"{small}\"")),
        "{out}"
    );
    assert!(
        out.contains(&format!("# cache/{small}/gates.toml\n[gate.dot_f32]")),
        "{out}"
    );
    assert!(out.ends_with("# status: ok\n"), "{out}");
    let (ok, _, err) = metainfer(&ws.root, &["show", "zz"]);
    assert!(!ok);
    assert_eq!(
        err,
        "error: no entry with key zz in cache; `cargo metainfer ls` lists them\n"
    );

    let dest = ws.root.join("vendored");
    let (ok, out, err) = metainfer(&ws.root, &["vendor", dest.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(
        out.ends_with(&format!("metainfer: 2 entries in {}\n", dest.display())),
        "{out}"
    );
    let vendored = Cache::new(&dest, &ws.root);
    assert_eq!(vendored.keys().unwrap().len(), 2);
    let a = vendored.open(&small, None).unwrap();
    let b = Cache::new("cache", &ws.root).open(&small, None).unwrap();
    assert_eq!(a.manifest, b.manifest);
    // Chosen keys, into another directory.
    let dest2 = ws.root.join("v2");
    let (ok, _, err) = metainfer(&ws.root, &["vendor", dest2.to_str().unwrap(), &eight[..8]]);
    assert!(ok, "{err}");
    assert_eq!(Cache::new(&dest2, &ws.root).keys().unwrap(), [eight]);
}

#[test]
fn a_malformed_setting_is_named_before_anything_is_built() {
    let ws = workspace();
    let digest = Ckb::load(common::fixture_ckb_dir()).unwrap().digest();
    let (small, _) = fill(&ws.root, &digest);
    let target = ws.root.join("tgt");
    let above_0 = "it must be a whole number above 0 (unset it for the default,";
    for (var, value, want) in [
        ("METAINFER_GATE_TIMEOUT_S", "ten", format!("{above_0} 600)")),
        (
            "METAINFER_GATE_MEMORY_MIB",
            "0",
            format!("{above_0} 16384)"),
        ),
        (
            "METAINFER_COMPILE_TIMEOUT_S",
            "-1",
            format!("{above_0} 1800)"),
        ),
        ("METAINFER_LLM_MAX_ROUNDS", "4.5", format!("{above_0} 4)")),
        (
            "METAINFER_LLM_REVIEW",
            "maybe",
            "it must be 1 or 0 (true / false, yes / no, on / off) (unset it for the default, off)"
                .to_string(),
        ),
    ] {
        let (ok, _, err) = metainfer_with(
            &ws.root,
            &["verify", &small[..10]],
            &[(var, value), ("CARGO_TARGET_DIR", target.to_str().unwrap())],
        );
        assert!(!ok, "{var}={value} was taken: {err}");
        assert!(
            err.contains(&format!("{var} is `{value}`; {want}")),
            "{var}: {err}"
        );
        assert!(!target.exists(), "{var}: the candidate was built anyway");
    }
}

#[test]
fn ckb_check_exit_status() {
    let ws = workspace();
    let (ok, out, err) = metainfer(&ws.root, &["ckb", "check"]);
    assert!(ok, "{err}");
    assert!(out.ends_with("ckb check: no problems\n"), "{out}");
    // A broken copy fails, naming the problem.
    let broken = ws.root.join("ckb");
    copy_dir(&common::fixture_ckb_dir(), &broken);
    std::fs::remove_file(broken.join("gates/e2e_tiny.rs")).unwrap();
    let (ok, _, err) = metainfer(
        &ws.root,
        &["--ckb", broken.to_str().unwrap(), "ckb", "check"],
    );
    assert!(!ok);
    assert_eq!(err, "ckb/gates/e2e_tiny.toml: source gates/e2e_tiny.rs does not exist\nckb check: 1 problem(s)\n");
    // A malformed file is an error naming it.
    std::fs::write(broken.join("models/qwen2.toml"), "family = 1\n").unwrap();
    let (ok, _, err) = metainfer(
        &ws.root,
        &["--ckb", broken.to_str().unwrap(), "ckb", "check"],
    );
    assert!(!ok);
    assert!(
        err.starts_with("error: ") && err.contains("models/qwen2.toml"),
        "{err}"
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.path().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn ckb_proposals_and_adopt_refusals() {
    let ws = workspace();
    let ckb = ws.root.join("ckb");
    copy_dir(&common::fixture_ckb_dir(), &ckb);
    let k = ckb.to_str().unwrap();
    let (ok, out, _) = metainfer(&ws.root, &["--ckb", k, "ckb", "proposals"]);
    assert!(ok && out.contains("no proposals"), "{out}");
    // `ckb ls`, which error messages point to for the families the ckb knows
    let (ok, out, _) = metainfer(&ws.root, &["--ckb", k, "ckb", "ls"]);
    assert!(ok, "{out}");
    assert!(
        out.contains("qwen2      GGUF architecture \"qwen2\"; presets: qwen2.5-0.5b"),
        "{out}"
    );
    assert!(
        out.contains("quants (quant = \"<quant>\"): ") && out.contains("q4_k_m"),
        "{out}"
    );
    let (ok, _, err) = metainfer(&ws.root, &["--ckb", k, "ckb", "adopt", "dot_f32/nope"]);
    assert!(!ok);
    assert!(
        err.contains("no proposal `dot_f32/nope`") && err.contains("proposals: none"),
        "{err}"
    );

    // A proposal whose code was edited after its gates passed is not adopted.
    let dir = ckb.join("proposals/dot_f32/scalar-0123456789ab");
    std::fs::create_dir_all(&dir).unwrap();
    let code = "pub(crate) const F32_ACT: ActKind = ActKind::F32;\n";
    std::fs::write(dir.join("realization.rs"), format!("{code}// edited\n")).unwrap();
    let proposal = format!(
        "contract = \"dot_f32\"\ncontract_version = 1\nvariant = \"scalar\"\ntarget = \"generic\"\nisa = []\nentry = \"dot_f32_scalar\"\nentry_unsafe = false\nengine_key = \"{k0}\"\nimplementer = \"llm\"\nmodel = \"m\"\nrounds = 2\nrequest_ids = []\nblake3 = \"{h}\"\ngate = []\n",
        k0 = "0".repeat(64),
        h = blake3::hash(code.as_bytes()).to_hex()
    );
    std::fs::write(dir.join("proposal.toml"), proposal).unwrap();
    let (ok, out, _) = metainfer(&ws.root, &["--ckb", k, "ckb", "proposals"]);
    assert!(
        ok && out.contains(
            "dot_f32/scalar-0123456789ab  contract dot_f32 v1 for generic by m in 2 round(s)"
        ),
        "{out}"
    );
    let (ok, _, err) = metainfer(
        &ws.root,
        &["--ckb", k, "ckb", "adopt", "dot_f32/scalar-0123456789ab"],
    );
    assert!(!ok);
    assert!(err.contains("was edited after its gates passed"), "{err}");
    // Restored, it still may not replace the contract's existing `scalar` realization.
    std::fs::write(dir.join("realization.rs"), code).unwrap();
    let (ok, _, err) = metainfer(
        &ws.root,
        &["--ckb", k, "ckb", "adopt", "dot_f32/scalar-0123456789ab"],
    );
    assert!(!ok);
    assert!(err.contains("already has a realization `scalar`"), "{err}");
    assert!(dir.exists(), "a refused proposal stays where it was");
}
