use super::*;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/ckb");

/// A copy of the fixture CKB in a temp dir, to break.
fn copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(Path::new(FIXTURE), &dir.path().join("ckb"));
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

#[test]
fn loads_every_file_type() {
    let ckb = Ckb::load(FIXTURE).unwrap();
    assert_eq!(ckb.contracts.len(), 7);
    assert_eq!(ckb.models.keys().collect::<Vec<_>>(), ["qwen2"]);
    assert_eq!(ckb.quants.len(), 7);
    assert_eq!(ckb.targets.len(), 4);
    assert_eq!(ckb.failure_modes.len(), 2);
    assert_eq!(ckb.gates.len(), 2);
    assert_eq!(ckb.contracts["dot_f32"].realizations[0].with, ["scalar"]);
    let (f, p) = ckb.resolve_model("qwen2.5-0.5b").unwrap();
    assert_eq!((f.family.as_str(), p.unwrap().n_layer), ("qwen2", 24));
    assert!(ckb.resolve_model("nope").is_none());
}

#[test]
fn fixture_is_consistent() {
    let ckb = Ckb::load(FIXTURE).unwrap();
    assert_eq!(ckb.check(), Vec::<String>::new());
}

#[test]
fn unknown_field_names_file_and_field() {
    let dir = copy();
    let root = dir.path().join("ckb");
    let p = root.join("targets/generic.toml");
    let text = std::fs::read_to_string(&p).unwrap() + "vector_width = 3\n";
    std::fs::write(&p, text).unwrap();
    let e = Ckb::load(&root).unwrap_err().to_string();
    assert!(e.contains("targets/generic.toml"), "{e}");
    assert!(e.contains("unknown field `vector_width`"), "{e}");
    assert!(e.contains("expected one of"), "{e}");
}

#[test]
fn malformed_toml_names_file() {
    let dir = copy();
    let root = dir.path().join("ckb");
    std::fs::write(root.join("failure_modes.toml"), "[[mode]\nid = 1").unwrap();
    let e = Ckb::load(&root).unwrap_err().to_string();
    assert!(e.contains("failure_modes.toml"), "{e}");
}

#[test]
fn missing_root_says_how_to_fix() {
    let e = Ckb::load("/nonexistent/ckb").unwrap_err().to_string();
    assert_eq!(
        e,
        "ckb directory /nonexistent/ckb does not exist; set METAINFER_CKB_DIR to the ckb/ directory of a metainfer checkout"
    );
}

#[test]
fn duplicate_ids_are_refused() {
    let dir = copy();
    let root = dir.path().join("ckb");
    std::fs::copy(
        root.join("quants/f32.toml"),
        root.join("quants/f32_copy.toml"),
    )
    .unwrap();
    let e = Ckb::load(&root).unwrap_err().to_string();
    assert!(e.starts_with("duplicate quant id `f32` in"), "{e}");
}

#[test]
fn check_finds_broken_references() {
    let dir = copy();
    let root = dir.path().join("ckb");
    let edit = |rel: &str, from: &str, to: &str| {
        let p = root.join(rel);
        let t = std::fs::read_to_string(&p).unwrap();
        assert!(t.contains(from), "{rel}: {from}");
        std::fs::write(&p, t.replacen(from, to, 1)).unwrap();
    };
    edit(
        "contracts/dot_q8_0.toml",
        "requires = [\"gguf_reader\"]",
        "requires = [\"gguf_readr\"]",
    );
    edit(
        "contracts/dot_f32.toml",
        "with = [\"scalar\"]",
        "with = [\"scalr\"]",
    );
    edit(
        "contracts/forward_decoder.toml",
        "failure_modes = [\"rope_layout\"]",
        "failure_modes = [\"rope\"]",
    );
    edit("models/qwen2.toml", "\"sampler\"]", "\"samplr\"]");
    edit("quants/q4_k_m.toml", "\"q8_0\"", "\"q5_0\"");
    edit(
        "models/qwen2.toml",
        "attn_k_bias = \"blk.{n}.attn_k.bias\"\n",
        "",
    );
    edit(
        "models/qwen2.toml",
        "ffn_up = \"blk.{n}.ffn_up.weight\"",
        "ffn_up = \"blk.ffn_up.weight\"",
    );
    edit(
        "models/qwen2.toml",
        "activation = \"silu\"",
        "activation = \"gelu_tanh\"\nsliding_window = { pattern = 0, rope_theta_local = 1e4 }",
    );
    edit("gates/dot_f32.toml", "dot_f32.bin", "missing.bin");
    edit(
        "targets/sm_89.toml",
        "variants = [\"cuda\"]",
        "variants = [\"cuda\", \"wgmma\"]",
    );
    edit("quants/awq.toml", "id = \"awq\"", "id = \"awq2\"");
    std::fs::remove_file(root.join("realizations/sampler/standard.rs")).unwrap();
    std::fs::remove_file(root.join("gates/e2e_tiny.rs")).unwrap();
    std::fs::write(root.join("realizations/dot_q8_0/avx2.rs"), "").unwrap();
    let ckb = Ckb::load(&root).unwrap();
    let problems = ckb.check();
    let expected = [
        "quants/awq.toml: file stem `awq` differs from its id `awq2`; rename the file to awq2.toml or fix the id",
        "contracts/dot_f32.toml: realization `avx2` is `with` unknown variant `scalr`; allowed: avx2, cuda, scalar",
        "contracts/dot_q8_0.toml: requires unknown contract `gguf_readr` (neither in contracts/ nor one of header, dot_kernels, dispatch)",
        "contracts/forward_decoder.toml: failure mode `rope` is not in failure_modes.toml",
        "contracts/sampler.toml: realization `standard` has no file realizations/sampler/standard.rs (or .cu)",
        "realizations/dot_q8_0/avx2.rs: not listed in contracts/dot_q8_0.toml `realizations`; list it or remove the file",
        "models/qwen2.toml: graph entry `samplr` is neither a contract nor one of header, dot_kernels, dispatch",
        "models/qwen2.toml: qkv_bias = true but tensors has 2 of attn_q_bias, attn_k_bias, attn_v_bias (all three when true, none when false)",
        "models/qwen2.toml: activation GeluTanh is computed by `geglu`, which is not in the graph",
        "models/qwen2.toml: sliding_window and metadata.sliding_window go together (the window's key, and the pattern and local rope base)",
        "models/qwen2.toml: sliding_window.pattern must be > 0 and sliding_window.rope_theta_local > 0",
        "models/qwen2.toml: tensors.ffn_up = `blk.ffn_up.weight` lacks `{n}` (per-layer tensors name their layer with it, the others must not)",
        "quants/q4_k_m.toml: tensor type `q5_0` has no dot-kernel `contract`; set one in quants/q5_0.toml",
        "targets/sm_89.toml: variant `wgmma` is not used by any contract's realizations",
        "gates/dot_f32.toml: test vector gates/vectors/missing.bin does not exist (paths are relative to the ckb root, and everything a gate reads lives under it); run its made_by script",
        "gates/e2e_tiny.toml: source gates/e2e_tiny.rs does not exist",
    ];
    assert_eq!(problems, expected);
}

#[test]
fn digest_covers_knowledge_not_proposals_or_readme() {
    let dir = copy();
    let root = dir.path().join("ckb");
    let d0 = digest::digest(&root);
    assert_eq!(d0, digest::digest(&root), "stable");
    assert_eq!(d0.len(), 64);
    std::fs::write(root.join("README.md"), "changed").unwrap();
    std::fs::write(root.join("proposals/new.rs"), "fn x() {}").unwrap();
    std::fs::write(root.join(".swp"), "x").unwrap();
    assert_eq!(digest::digest(&root), d0);
    std::fs::write(root.join("realizations/sampler/standard.rs"), "changed").unwrap();
    let d1 = digest::digest(&root);
    assert_ne!(d1, d0);
    // A rename with the same content changes it too.
    std::fs::rename(
        root.join("gates/make_vectors.py"),
        root.join("gates/make.py"),
    )
    .unwrap();
    assert_ne!(digest::digest(&root), d1);
}

#[test]
fn default_root_is_the_repo_ckb() {
    if crate::env::path("METAINFER_CKB_DIR").is_none() {
        assert!(Ckb::default_root().ends_with("metainfer-build/../ckb"));
    }
}
