//! `ensure` in every mode, with a stand-in for the chain; the build.rs API and the expansion
//! on top of it.

mod common;

use metainfer_build::chain::ChainError;
use metainfer_build::expand::expand_source;
use metainfer_build::{
    ensure::ensure_with, BuildContext, BuildError, Cache, Engine, Mode, ModeSetting,
};
use std::cell::Cell;
use std::path::Path;

fn ctx(ws: &Path, mode: Mode, reason: &str) -> BuildContext {
    BuildContext {
        workspace_root: ws.to_path_buf(),
        cache: Cache::new("cache", ws),
        mode: ModeSetting {
            mode,
            reason: reason.into(),
        },
        scratch_dir: ws.join("target/metainfer"),
        progress: false,
    }
}

fn c() -> metainfer_build::Constraints {
    common::constraints(&[
        ("model", "qwen2"),
        ("hw", "x86_64-avx2"),
        ("quant", "q4_k_m"),
    ])
}

#[test]
fn offline_miss_names_key_dirs_and_fix() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = ctx(ws.path(), Mode::Offline, "CARGO_NET_OFFLINE=true");
    let e = ensure_with(&c(), &common::ckb(), &ctx, || {
        panic!("offline must not generate")
    })
    .unwrap_err();
    assert!(matches!(e, BuildError::OfflineMiss { .. }));
    assert_eq!(
        e.to_string(),
        format!(
            "no cache entry for engine {key} (model=qwen2 hw=x86_64-avx2 quant=q4_k_m), and generating one is off (CARGO_NET_OFFLINE=true); searched: cache; fix: run `cargo metainfer prepare` in this workspace where generation is allowed (no `cargo metainfer`? install it: `cargo install --path {cli}`), or build once with METAINFER_MODE unset (or auto) and CARGO_NET_OFFLINE unset; then commit the new entry cache/{key}/",
            key = c().key(),
            cli = Path::new(env!("CARGO_MANIFEST_DIR")).join("../metainfer-cli").canonicalize().unwrap().display()
        )
    );
}

#[test]
fn auto_generates_once_then_hits() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = ctx(ws.path(), Mode::Auto, "the default");
    let ckb = common::ckb();
    let calls = Cell::new(0);
    let gen = || {
        calls.set(calls.get() + 1);
        Ok(common::candidate("first", true))
    };
    let e1 = ensure_with(&c(), &ckb, &ctx, gen).unwrap();
    assert_eq!(e1.manifest.ckb_digest, ckb.digest());
    let e2 = ensure_with(&c(), &ckb, &ctx, || panic!("a hit must not generate")).unwrap();
    assert_eq!(e1, e2);
    assert_eq!(calls.get(), 1);
    // Offline now hits too.
    let off = self::ctx(ws.path(), Mode::Offline, "METAINFER_MODE=offline");
    assert_eq!(ensure_with(&c(), &ckb, &off, || panic!()).unwrap(), e1);
}

#[test]
fn stale_entries_are_used_in_auto_mode_and_regenerated_by_refresh() {
    let ws = tempfile::tempdir().unwrap();
    let ckb = common::ckb();
    let cache = Cache::new("cache", ws.path());
    cache
        .write(&c(), "an older ckb", &common::candidate("old", true))
        .unwrap();
    let auto = ctx(ws.path(), Mode::Auto, "the default");
    let e = ensure_with(&c(), &ckb, &auto, || panic!("stale is still a hit")).unwrap();
    assert_eq!(
        e.staleness(&ckb.digest()),
        ["the ckb changed since it was generated"]
    );
    let refresh = ctx(ws.path(), Mode::Refresh, "METAINFER_MODE=refresh");
    let e = ensure_with(&c(), &ckb, &refresh, || Ok(common::candidate("new", true))).unwrap();
    assert!(e.staleness(&ckb.digest()).is_empty());
    assert!(std::fs::read_to_string(e.engine_path())
        .unwrap()
        .ends_with("// new\n"));
}

#[test]
fn failed_gates_write_nothing() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = ctx(ws.path(), Mode::Auto, "the default");
    let e = ensure_with(&c(), &common::ckb(), &ctx, || {
        Ok(common::candidate("bad", false))
    })
    .unwrap_err();
    let key = c().key();
    assert_eq!(
        e.to_string(),
        format!("engine {key} (model=qwen2 hw=x86_64-avx2 quant=q4_k_m) failed its gates, so nothing was written to the cache (the candidate is kept in target/metainfer/failed/{key} for inspection); gate report:\n[gate.dot_f32]\nstatus = \"fail\"\nmax_abs_rel = 0.5\n")
    );
    assert!(ctx.cache.lookup(&c()).unwrap().is_none());
    assert!(ws
        .path()
        .join("target/metainfer/failed")
        .join(&key)
        .join("engine.rs")
        .is_file());
}

#[test]
fn chain_errors_name_the_engine() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = ctx(ws.path(), Mode::Auto, "the default");
    let e = ensure_with(&c(), &common::ckb(), &ctx, || {
        Err(ChainError::Plan("no realization".into()))
    })
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("generating engine {} (model=qwen2 hw=x86_64-avx2 quant=q4_k_m) failed: plan: no realization", c().key())
    );
}

#[test]
fn expansion_includes_every_entry_file() {
    let ws = tempfile::tempdir().unwrap();
    let cache = Cache::new("cache", ws.path());
    let mut cand = common::candidate("x", true);
    cand.files
        .insert("kernels/dot.ptx".into(), b".version 8.0\n".to_vec());
    let e = cache.write(&c(), "d", &cand).unwrap();
    let src = expand_source("CoderEngine", &e, &common::ckb());
    let dir = e.dir.display().to_string();
    assert!(
        src.contains("pub struct CoderEngine (__metainfer_coder_engine :: Engine) ;"),
        "{src}"
    );
    assert!(
        src.contains(&format!("include ! (\"{dir}/engine.rs\")")),
        "{src}"
    );
    assert!(
        src.contains(&format!("include_str ! (\"{dir}/manifest.toml\")")),
        "{src}"
    );
    assert!(
        src.contains(&format!("include_str ! (\"{dir}/gates.toml\")")),
        "{src}"
    );
    assert!(
        src.contains(&format!("include_bytes ! (\"{dir}/transcript.jsonl\")")),
        "{src}"
    );
    assert!(
        src.contains(&format!(
            "(\"dot.ptx\" , include_bytes ! (\"{dir}/kernels/dot.ptx\"))"
        )),
        "{src}"
    );
    assert!(
        src.contains(&format!("pub const KEY : & 'static str = \"{}\"", e.key)),
        "{src}"
    );
    assert!(src.contains("option_env ! (\"METAINFER_MODE\")"), "{src}");
    assert!(src.contains("use :: metainfer :: rt ;"), "{src}");
    assert!(
        src.contains("impl :: core :: ops :: DerefMut for CoderEngine"),
        "{src}"
    );
    // It is valid Rust.
    syn::parse_file(&src).unwrap();
}

#[test]
fn build_api_writes_only_to_out_dir() {
    let ws = tempfile::tempdir().unwrap();
    let out = ws.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let ckb = common::ckb();
    let auto = ctx(ws.path(), Mode::Auto, "the default");
    // Seed the cache, as a previous generation would have.
    // Constraints this fixture ckb can plan: a cache hit checks the entry's origin against the
    // plan (provenance), and an entry no plan of this ckb could have made is refused.
    let c = common::constraints(&[
        ("model", "qwen2"),
        ("hw", "x86_64-avx2"),
        ("quant", "q4_k_m"),
    ]);
    let c_server = {
        let mut c = c.clone();
        c.features = vec![metainfer_build::constraints::Feature::Server];
        c.max_seq = Some(4096);
        c
    };
    auto.cache
        .write(&c_server, &ckb.digest(), &common::candidate("gpu", true))
        .unwrap();
    let offline = ctx(ws.path(), Mode::Offline, "METAINFER_MODE=offline");
    let emitted = Engine::new("Coder")
        .model("qwen2")
        .hw("x86_64-avx2")
        .quant("q4_k_m")
        .feature("server")
        .max_seq(4096)
        .emit_to(&out, &ckb, &offline)
        .unwrap();
    assert_eq!(emitted.path, out.join("metainfer_Coder.rs"));
    assert_eq!(emitted.key, c_server.key());
    assert_eq!(emitted.consumed.len(), 4);
    let src = std::fs::read_to_string(&emitted.path).unwrap();
    assert!(src.starts_with("// generated by metainfer-build"), "{src}");
    assert!(
        src.contains("pub struct Coder (__metainfer_coder :: Engine) ;"),
        "{src}"
    );
    let names: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["metainfer_Coder.rs"]);

    // Setters replace, errors name the engine.
    let e = Engine::new("Coder")
        .model("qwen2")
        .model("qwen3")
        .hw("generic")
        .quant("f32")
        .emit_to(&out, &ckb, &offline)
        .unwrap_err();
    assert_eq!(e.to_string(), "engine `Coder`: unknown model `qwen3` (did you mean `qwen2`?); allowed: qwen2, qwen2.5-0.5b");
    let e = Engine::new("not a name")
        .emit_to(&out, &ckb, &offline)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "engine name `not a name` is not a rust identifier; use a type name such as `Coder`"
    );
    let e = Engine::new("X").emit().unwrap_err();
    assert_eq!(e.to_string(), "OUT_DIR is not set: Engine::emit runs inside a build script (build.rs); call it from there");
}

#[test]
fn a_hit_whose_constraints_this_ckb_cannot_plan_is_refused() {
    // The fixture ckb has no cuda graph, so no generation with it could have made this entry;
    // its origin cannot be checked, and the hit is refused rather than served.
    let ws = tempfile::tempdir().unwrap();
    let out = ws.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let ckb = common::ckb();
    let auto = ctx(ws.path(), Mode::Auto, "the default");
    let c = common::constraints(&[("model", "qwen2"), ("hw", "sm_89"), ("quant", "awq")]);
    auto.cache
        .write(&c, &ckb.digest(), &common::candidate("gpu", true))
        .unwrap();
    let offline = ctx(ws.path(), Mode::Offline, "METAINFER_MODE=offline");
    let e = Engine::new("Coder")
        .model("qwen2")
        .hw("sm_89")
        .quant("awq")
        .emit_to(&out, &ckb, &offline)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("cannot plan its constraints with this ckb"),
        "{e}"
    );
    assert!(e.contains("target_graphs.cuda"), "{e}");
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0);
}
