//! End to end through cargo: a scratch crate uses both the build.rs API (with
//! `metainfer::include_engine!`) and the attribute, compiled offline from a fixture cache;
//! then editing a consumed cache file makes the next build recompile and refuse the entry
//! (the `include!`/`include_str!` and `cargo:rerun-if-changed` tracking on stable).
#![allow(
    clippy::disallowed_methods,
    reason = "a test harness reads its own knobs and hands cargo's variables on"
)]

use metainfer_build::chain::{Candidate, SlotRecord};
use metainfer_build::{Arg, Cache, Ckb, Constraints, Entry};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const TINY_ENGINE: &str = "pub struct Engine {\n    path: std::path::PathBuf,\n}\n\nimpl Engine {\n    pub fn load(path: &std::path::Path) -> rt::Result<Engine> {\n        Ok(Engine { path: path.to_path_buf() })\n    }\n\n    pub fn path(&self) -> &std::path::Path {\n        &self.path\n    }\n}\n";

fn entry(cache: &Cache, ckb: &Ckb, quant: &str) -> Entry {
    let args = [
        Arg::str("model", "qwen2"),
        Arg::str("hw", "generic"),
        Arg::str("quant", quant),
    ];
    let c = Constraints::from_args(&args, ckb).unwrap();
    let mut files = BTreeMap::new();
    files.insert("engine.rs".to_string(), TINY_ENGINE.as_bytes().to_vec());
    files.insert(
        "gates.toml".to_string(),
        b"[gate.fixture]\nstatus = \"pass\"\n".to_vec(),
    );
    files.insert("transcript.jsonl".to_string(), b"{}\n".to_vec());
    let slots = vec![SlotRecord {
        slot: "forward_decoder".into(),
        contract: "forward_decoder".into(),
        version: 1,
        implementer: "hand".into(),
        realization: "fixture".into(),
    }];
    cache
        .replace(
            &c,
            &ckb.digest(),
            &Candidate {
                files,
                slots,
                gates_passed: true,
                ..Default::default()
            },
        )
        .unwrap()
}

fn write(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

struct Scratch {
    dir: PathBuf,
    target: PathBuf,
    ckb_dir: PathBuf,
    cache_dir: PathBuf,
}

impl Scratch {
    fn cargo_run(&self) -> (bool, String) {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let out = Command::new(cargo)
            .args(["run", "--quiet", "--offline"])
            .current_dir(&self.dir)
            .env("CARGO_TARGET_DIR", &self.target)
            .env("METAINFER_CKB_DIR", &self.ckb_dir)
            .env("METAINFER_CACHE_DIR", &self.cache_dir)
            .env("METAINFER_MODE", "offline")
            .env_remove("RUSTFLAGS")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), text)
    }
}

#[test]
fn build_script_attribute_and_rebuild_on_edit() {
    let ws = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = ws.join("target/metainfer-it");
    let _ = std::fs::remove_dir_all(root.join("cache"));
    let ckb_dir = ws.join("metainfer-build/tests/fixtures/ckb");
    let ckb = Ckb::load(&ckb_dir).unwrap();
    let cache = Cache::new(root.join("cache"), ws);
    let f32_entry = entry(&cache, &ckb, "f32");
    let q8_entry = entry(&cache, &ckb, "q8_0");

    let dir = root.join("scratch");
    let lock = std::fs::read_to_string(ws.join("Cargo.lock")).unwrap();
    write(&dir.join("Cargo.lock"), &lock);
    write(
        &dir.join("Cargo.toml"),
        &format!(
            "[package]\nname = \"metainfer-it-scratch\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n[workspace]\n\n[dependencies]\nmetainfer = {{ path = {ws:?} }}\n\n[build-dependencies]\nmetainfer-build = {{ path = {mb:?} }}\n\n[profile.dev.package.\"*\"]\nopt-level = 2\n",
            ws = ws.display().to_string(),
            mb = ws.join("metainfer-build").display().to_string(),
        ),
    );
    write(
        &dir.join("build.rs"),
        "fn main() {\n    if let Err(e) = metainfer_build::Engine::new(\"Tiny\").model(\"qwen2\").hw(\"generic\").quant(\"f32\").emit() {\n        eprintln!(\"error: {e}\");\n        std::process::exit(1);\n    }\n}\n",
    );
    write(
        &dir.join("src/main.rs"),
        "metainfer::include_engine!(Tiny);\n\n#[metainfer::engine(model = \"qwen2\", hw = \"generic\", quant = \"q8_0\")]\nstruct Eight;\n\nfn main() {\n    let t = Tiny::load(\"a.gguf\").unwrap();\n    let e = Eight::load(\"b.gguf\").unwrap();\n    assert_eq!(t.path(), std::path::Path::new(\"a.gguf\"));\n    assert_eq!(e.path(), std::path::Path::new(\"b.gguf\"));\n    println!(\"KEYS {} {}\", Tiny::KEY, Eight::KEY);\n}\n",
    );
    let scratch = Scratch {
        dir,
        target: std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| ws.join("target")),
        ckb_dir,
        cache_dir: cache.dir.clone(),
    };

    let (ok, out) = scratch.cargo_run();
    assert!(ok, "{out}");
    assert!(
        out.contains(&format!("KEYS {} {}", f32_entry.key, q8_entry.key)),
        "{out}"
    );

    // The attribute's entry: editing its engine.rs recompiles the crate, which refuses it.
    let edited = TINY_ENGINE.replace(
        "path: std::path::PathBuf,",
        "path: std::path::PathBuf, // edited",
    );
    std::fs::write(q8_entry.engine_path(), &edited).unwrap();
    let (ok, out) = scratch.cargo_run();
    assert!(!ok, "{out}");
    assert!(
        out.contains(&format!(
            "{}/{} was modified after it was generated: engine.rs does not match",
            "target/metainfer-it/cache", q8_entry.key
        )),
        "{out}"
    );
    std::fs::write(q8_entry.engine_path(), TINY_ENGINE).unwrap();
    let (ok, out) = scratch.cargo_run();
    assert!(ok, "{out}");

    // The build script's entry: its gates.toml is consumed too.
    std::fs::write(f32_entry.path("gates.toml"), "edited").unwrap();
    let (ok, out) = scratch.cargo_run();
    assert!(!ok, "{out}");
    assert!(
        out.contains(&format!(
            "{} was modified after it was generated: gates.toml does not match",
            f32_entry.key
        )),
        "{out}"
    );
}
