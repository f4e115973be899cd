//! What a user does, outside this repository, with nothing but a path dependency on the
//! checkout: crates in a temp dir get an engine generated, verified and cached at build time,
//! run it, rebuild offline from their cache, use the build.rs form, vendor the entry into
//! another workspace that builds offline from it, and check that vendored cache with `cargo
//! metainfer prepare --check`, which fails once the vendored engine.rs is edited. The README's
//! "Use it in your crate" section shows exactly the files this test writes.
//!
//! Every cargo run here gets a clean environment (no `CARGO_*` of the outer test run, no
//! `METAINFER_*`), so nothing of this repository leaks in except the path dependency. The user
//! builds share one target dir under this workspace's `target/` (a build cache only; a first
//! run compiles everything cold).
#![allow(
    clippy::disallowed_methods,
    reason = "a test harness reads its own knobs and hands cargo's variables on"
)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The metainfer checkout (this crate's parent).
fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

/// The README's constraints where the machine can run them (`x86_64-avx2`), else `generic`.
fn hw() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        return "x86_64-avx2";
    }
    "generic"
}

/// The user's program: load a GGUF file, then greedy ids for prompt ids (what the test checks),
/// or text for a text prompt.
const MAIN_RS: &str = r#"use metainfer::GenParams;

fn main() -> Result<(), metainfer::Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(model), Some(prompt)) = (args.first(), args.get(1)) else {
        eprintln!("usage: app MODEL.gguf PROMPT   (or a prompt of comma-separated token ids)");
        std::process::exit(2);
    };
    let mut coder = Coder::load(model)?;
    let ids: Result<Vec<u32>, _> = prompt.split(',').map(str::parse).collect();
    match ids {
        Ok(ids) => {
            let params = GenParams { stop_at_eos: false, ..GenParams::greedy(8) };
            let (out, _stats) = coder.generate_ids(&ids, &params, &mut |_, _| true)?;
            println!("{out:?}");
        }
        Err(_) => println!("{}", coder.generate(prompt, &GenParams::greedy(64))?),
    }
    Ok(())
}
"#;

fn write(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A package `name` at `dir` depending on the checkout's `metainfer` (and, with `build_rs`,
/// on `metainfer-build` as a build dependency).
fn package(dir: &Path, name: &str, workspace: bool, build_rs: bool) {
    let co = checkout();
    let mut toml = format!(
        "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\npublish = false\n\n[dependencies]\nmetainfer = {{ path = {:?} }}\n",
        co.display().to_string()
    );
    if build_rs {
        toml += &format!(
            "\n[build-dependencies]\nmetainfer-build = {{ path = {:?} }}\n",
            co.join("metainfer-build").display().to_string()
        );
    }
    if workspace {
        toml += "\n[workspace]\n";
    }
    write(&dir.join("Cargo.toml"), &toml);
}

fn attribute_main(hw: &str) -> String {
    format!("#[metainfer::engine(model = \"qwen2\", hw = \"{hw}\", quant = \"q4_k_m\")]\npub struct Coder;\n\n{MAIN_RS}")
}

/// The user's workspaces share this target dir, and the checkout's lock (so that nothing is
/// resolved anew: the versions metainfer was tested with).
struct User {
    target: PathBuf,
}

impl User {
    fn cargo(&self, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
        let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
        cmd.args(args).current_dir(dir);
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy().into_owned();
            if (k.starts_with("CARGO_") && k != "CARGO_HOME")
                || k.starts_with("METAINFER_")
                || k == "RUSTFLAGS"
            {
                cmd.env_remove(&k);
            }
        }
        // `cargo metainfer …` finds the CLI this test run built, as it would an installed one.
        let bin = Path::new(env!("CARGO_BIN_EXE_cargo-metainfer"))
            .parent()
            .unwrap()
            .to_path_buf();
        let path = std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        )))
        .unwrap();
        cmd.env("PATH", path).env("CARGO_TARGET_DIR", &self.target);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), text)
    }

    fn run(&self, bin: &str, args: &[&str]) -> String {
        let out = Command::new(self.target.join("debug").join(bin))
            .args(args)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{bin} failed: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    }
}

/// (prompt ids, greedy ids) of the tiny fixture's reference, from the ckb.
fn reference() -> (String, String) {
    let text = std::fs::read_to_string(checkout().join("ckb/gates/vectors/tiny_qwen2_greedy.txt"))
        .unwrap();
    let rows: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let want: Vec<u32> = rows[1].split(',').map(|s| s.parse().unwrap()).collect();
    (rows[0].to_string(), format!("{want:?}"))
}

#[test]
fn a_users_crates_generate_cache_run_vendor_and_check_an_engine() {
    let tmp = tempfile::tempdir().unwrap();
    let user = User {
        target: checkout().join("target/user-crate-it"),
    };
    let lock = std::fs::read_to_string(checkout().join("Cargo.lock")).unwrap();
    let tiny = checkout().join("ckb/gates/fixtures/tiny-qwen2.gguf");
    let tiny = tiny.to_str().unwrap();
    let (prompt, want) = reference();
    let hw = hw();

    // A workspace of two crates: the attribute (app) and the build.rs form (bs).
    let w1 = tmp.path().join("user");
    write(
        &w1.join("Cargo.toml"),
        "[workspace]\nmembers = [\"app\", \"bs\"]\nresolver = \"2\"\n",
    );
    write(&w1.join("Cargo.lock"), &lock);
    package(&w1.join("app"), "app", false, false);
    write(&w1.join("app/src/main.rs"), &attribute_main(hw));
    package(&w1.join("bs"), "bs", false, true);
    write(
        &w1.join("bs/build.rs"),
        &format!("fn main() -> Result<(), Box<dyn std::error::Error>> {{\n    metainfer_build::Engine::new(\"Coder\").model(\"qwen2\").hw(\"{hw}\").quant(\"q4_k_m\").emit()?;\n    Ok(())\n}}\n"),
    );
    write(
        &w1.join("bs/src/main.rs"),
        &format!("metainfer::include_engine!(Coder);\n\n{MAIN_RS}"),
    );

    // (1) A miss in auto mode: the whole chain runs inside `cargo build`, with progress.
    let (ok, out) = user.cargo(&w1, &["build", "-p", "app"], &[]);
    assert!(ok, "{out}");
    assert!(
        out.contains("metainfer: generating engine")
            && out.contains("later builds use the cache entry"),
        "{out}"
    );
    assert!(
        out.contains("metainfer: verify: [1/"),
        "gate progress while verifying: {out}"
    );
    let entries: Vec<PathBuf> = std::fs::read_dir(w1.join("cache"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(
        entries.len(),
        1,
        "one entry in the user's own cache/: {entries:?}"
    );
    let key = entries[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        out.contains(&format!("metainfer: wrote cache/{key}")),
        "{out}"
    );
    let gates = std::fs::read_to_string(entries[0].join("gates.toml")).unwrap();
    for g in ["e2e_tiny", "tokenizer", "kernels"] {
        assert!(
            gates.contains(&format!("id = \"{g}\"\nstatus = \"pass\"")),
            "gate {g} passed: {gates}"
        );
    }
    assert_eq!(
        user.run("app", &[tiny, &prompt]).trim(),
        want,
        "greedy ids of the user's engine equal the reference's"
    );

    // (2) Offline, the rebuild (forced by an edit) hits the entry it wrote.
    write(
        &w1.join("app/src/main.rs"),
        &(attribute_main(hw) + "// edited\n"),
    );
    let (ok, out) = user.cargo(
        &w1,
        &["build", "-p", "app"],
        &[("METAINFER_MODE", "offline")],
    );
    assert!(ok && !out.contains("generating"), "{out}");
    assert_eq!(user.run("app", &[tiny, &prompt]).trim(), want);

    // (3) The build.rs form, offline: the same constraints, the same entry.
    let (ok, out) = user.cargo(
        &w1,
        &["build", "-p", "bs"],
        &[("METAINFER_MODE", "offline")],
    );
    assert!(ok, "{out}");
    assert_eq!(user.run("bs", &[tiny, &prompt]).trim(), want);

    // The CLI sees both references (one crate's attribute, the other's build script).
    let (ok, out) = user.cargo(&w1, &["metainfer", "prepare", "--check"], &[]);
    assert!(
        ok && out.contains("1 engine(s) referenced, every entry in cache is current and verified"),
        "{out}"
    );
    let (ok, out) = user.cargo(&w1, &["metainfer", "ls"], &[]);
    assert!(
        ok && out.contains("used by: Coder,Coder") && out.contains("ok"),
        "{out}"
    );

    // (4) Vendor the entry into a third crate's cache; it builds offline from it.
    let w2 = tmp.path().join("vendored");
    write(&w2.join("Cargo.lock"), &lock);
    package(&w2, "vendored", true, false);
    write(&w2.join("src/main.rs"), &attribute_main(hw));
    let dest = w2.join("cache");
    let (ok, out) = user.cargo(&w1, &["metainfer", "vendor", dest.to_str().unwrap()], &[]);
    assert!(
        ok && out.contains(&format!("vendored  {}", &key[..16])),
        "{out}"
    );
    let (ok, out) = user.cargo(&w2, &["build"], &[("METAINFER_MODE", "offline")]);
    assert!(ok, "{out}");
    assert_eq!(user.run("vendored", &[tiny, &prompt]).trim(), want);

    // (5) prepare --check passes on the vendored cache, and fails once its engine.rs is edited.
    let (ok, out) = user.cargo(&w2, &["metainfer", "prepare", "--check"], &[]);
    assert!(ok, "{out}");
    let engine = dest.join(&key).join("engine.rs");
    let text = std::fs::read_to_string(&engine).unwrap();
    std::fs::write(&engine, text + "// a hand edit\n").unwrap();
    let (ok, out) = user.cargo(&w2, &["metainfer", "prepare", "--check"], &[]);
    assert!(!ok, "{out}");
    assert!(out.contains(&format!("cache entry cache/{key} was modified after it was generated: engine.rs does not match its blake3")), "{out}");
    // The build refuses it too.
    let (ok, out) = user.cargo(&w2, &["build"], &[("METAINFER_MODE", "offline")]);
    assert!(
        !ok && out.contains("was modified after it was generated"),
        "{out}"
    );
}

/// A constraint that needs a generator feature the user did not turn on is a compile error on
/// its key, naming the feature; a fresh crate gets neither the llm client nor NVRTC.
#[test]
fn constraints_that_need_an_off_feature_fail_on_their_key() {
    let tmp = tempfile::tempdir().unwrap();
    let user = User {
        target: checkout().join("target/user-crate-it"),
    };
    let w = tmp.path().join("features");
    write(
        &w.join("Cargo.lock"),
        &std::fs::read_to_string(checkout().join("Cargo.lock")).unwrap(),
    );
    package(&w, "features", true, false);
    write(
        &w.join("src/main.rs"),
        "#[metainfer::engine(model = \"qwen2\", hw = \"x86_64-avx2\", quant = \"q4_k_m\", generator = \"llm\")]\npub struct Written;\n\n#[metainfer::engine(model = \"qwen2\", hw = \"sm_89\", quant = \"q4_k_m\")]\npub struct Gpu;\n\nfn main() {}\n",
    );
    let (ok, out) = user.cargo(&w, &["build"], &[]);
    assert!(!ok, "{out}");
    assert!(out.contains("and the llm client (ureq with TLS) is built only with the `llm` feature, which is off in this build; turn it on: metainfer = { …, features = [\"llm\"] }"), "{out}");
    assert!(
        out.contains("src/main.rs:1:88"),
        "the llm error is on the generator value: {out}"
    );
    assert!(out.contains("hw = \"sm_89\" compiles its kernels with NVRTC, which is loaded only with the `cuda` feature, which is off in this build"), "{out}");
    assert!(
        out.contains("src/main.rs:4:43"),
        "the cuda error is on the hw value: {out}"
    );
    // Nothing heavy is in a plain user crate's graph (the macro's generator included).
    for heavy in ["ureq", "rustls", "clap", "anyhow", "libloading"] {
        let (_, t) = user.cargo(&w, &["tree", "-i", heavy], &[]);
        assert!(
            !t.contains(&format!("{heavy} v")),
            "{heavy} is not built for a plain user crate: {t}"
        );
    }
}
