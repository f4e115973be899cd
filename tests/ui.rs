//! UI tests of `#[metainfer::engine]`: every kind of error lands on the offending key's or
//! value's span with a message that lists what is allowed, offline misses and tampered
//! entries fail with the fixing command, and a cache hit compiles and runs.
//!
//! The cases use the fixture CKB (`metainfer-build/tests/fixtures/ckb`, so the allowed lists
//! are stable) and a fixture cache built here under `target/metainfer-ui/`, with
//! `METAINFER_MODE=offline`; trybuild's cargo inherits the environment.

use metainfer_build::chain::{Candidate, SlotRecord};
use metainfer_build::{Arg, Cache, Ckb, Constraints};
use std::collections::BTreeMap;
use std::path::Path;

const TINY_ENGINE: &str = "pub struct Engine {\n    path: std::path::PathBuf, // the model file\n}\n\nimpl Engine {\n    pub fn load(path: &std::path::Path) -> rt::Result<Engine> {\n        Ok(Engine { path: path.to_path_buf() })\n    }\n\n    pub fn path(&self) -> &std::path::Path {\n        &self.path\n    }\n}\n";

fn candidate() -> Candidate {
    let mut files = BTreeMap::new();
    files.insert("engine.rs".to_string(), TINY_ENGINE.as_bytes().to_vec());
    files.insert(
        "gates.toml".to_string(),
        b"[gate.fixture]\nstatus = \"pass\"\n".to_vec(),
    );
    files.insert(
        "transcript.jsonl".to_string(),
        b"{\"fixture\":true}\n".to_vec(),
    );
    Candidate {
        files,
        slots: vec![SlotRecord {
            slot: "forward_decoder".into(),
            contract: "forward_decoder".into(),
            version: 1,
            implementer: "hand".into(),
            realization: "fixture".into(),
        }],
        gates_passed: true,
        ..Default::default()
    }
}

fn constraints(ckb: &Ckb, quant: &str) -> Constraints {
    let args = [
        Arg::str("model", "qwen2"),
        Arg::str("hw", "generic"),
        Arg::str("quant", quant),
    ];
    Constraints::from_args(&args, ckb).unwrap()
}

#[test]
fn ui() {
    let ws = Path::new(env!("CARGO_MANIFEST_DIR"));
    let ckb_dir = ws.join("metainfer-build/tests/fixtures/ckb");
    let fixture = ws.join("target/metainfer-ui");
    let _ = std::fs::remove_dir_all(&fixture);
    let ckb = Ckb::load(&ckb_dir).unwrap();
    let cache = Cache::new(fixture.join("cache"), ws);

    cache
        .write(&constraints(&ckb, "f32"), &ckb.digest(), &candidate())
        .unwrap();
    let tampered = cache
        .write(&constraints(&ckb, "q8_0"), &ckb.digest(), &candidate())
        .unwrap();
    std::fs::write(
        tampered.engine_path(),
        TINY_ENGINE.replace("// the model file", "// edited"),
    )
    .unwrap();

    std::env::set_var("METAINFER_CKB_DIR", &ckb_dir);
    std::env::set_var("METAINFER_CACHE_DIR", &cache.dir);
    std::env::set_var("METAINFER_MODE", "offline");

    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail_*.rs");
    t.pass("tests/ui/pass_*.rs");
}
