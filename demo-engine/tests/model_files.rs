//! Loading model files: the tiny synthetic qwen2, llama and qwen3 GGUFs work with their family's
//! engines, and files the engines were not generated for, or that are malformed, are refused with
//! an error that says what differs — never a panic.

mod common;
use demo_engine::{load, Arch, Which};
use metainfer::GenParams;

fn tiny_bytes() -> Vec<u8> {
    std::fs::read(common::tiny_model()).unwrap()
}

fn write_temp(name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let dir = common::root().join("target/test-model-files");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// Byte offset just past the GGUF string `s` (u64 length + bytes) in `b`.
fn after_string(b: &[u8], s: &str) -> usize {
    let mut pat = (s.len() as u64).to_le_bytes().to_vec();
    pat.extend_from_slice(s.as_bytes());
    b.windows(pat.len())
        .position(|w| w == pat)
        .unwrap_or_else(|| panic!("{s} not in file"))
        + pat.len()
}

/// Sets the u32 metadata value of `key` from `from` (asserted: what the fixture says) to `to`.
fn relabel_u32(b: &mut [u8], key: &str, from: u32, to: u32) {
    let at = after_string(b, key) + 4; // past the value type
    assert_eq!(b[at..at + 4], from.to_le_bytes(), "the fixture's {key}");
    b[at..at + 4].copy_from_slice(&to.to_le_bytes());
}

fn load_err(bytes: &[u8], name: &str, which: Which) -> String {
    match load(&write_temp(name, bytes), which) {
        Ok(_) => panic!("{name} loaded but should be refused"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn tiny_model_generates_with_every_cpu_engine() {
    let avx2 = demo_engine::has_avx2().then_some(Which::Avx2);
    for which in [Some(Which::Auto), avx2, Some(Which::Generic)]
        .into_iter()
        .flatten()
    {
        let mut m = load(&common::tiny_model(), which).unwrap();
        let ids = m.encode("hello world");
        let mut p = GenParams::greedy(8);
        p.stop_at_eos = false;
        let (gen, stats) = m.generate_ids(&ids, &p, &mut |_, _| true).unwrap();
        assert_eq!(gen.len(), 8);
        assert_eq!(stats.prompt_tokens, ids.len());
    }
}

/// The engine choices this cpu runs besides `auto`: avx512 and avx2 where it has them, generic.
fn x86_and_generic_engines() -> Vec<Which> {
    let avx512 = demo_engine::has_avx512().then_some(Which::Avx512);
    let avx2 = demo_engine::has_avx2().then_some(Which::Avx2);
    [avx512, avx2, Some(Which::Generic)]
        .into_iter()
        .flatten()
        .collect()
}

/// The reference's greedy ids on `model` (ckb/gates/vectors/`vectors`: prompt ids, then the
/// generated ids) from every cpu engine this machine runs; returns the engines' names.
fn reference_greedy_on_every_cpu_engine(
    model: &std::path::Path,
    vectors: &str,
) -> Vec<&'static str> {
    let text =
        std::fs::read_to_string(common::root().join("ckb/gates/vectors").join(vectors)).unwrap();
    let rows: Vec<Vec<u32>> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split(',').map(|v| v.trim().parse().unwrap()).collect())
        .collect();
    let (prompt, want) = (&rows[0], &rows[1]);
    let mut names = Vec::new();
    for which in std::iter::once(Which::Auto).chain(x86_and_generic_engines()) {
        let mut m = load(model, which).unwrap();
        let mut p = GenParams::greedy(want.len());
        p.stop_at_eos = false;
        let (got, _) = m.generate_ids(prompt, &p, &mut |_, _| true).unwrap();
        assert_eq!(&got, want, "{which:?} ({})", m.name());
        names.push(m.name());
    }
    names
}

#[test]
fn llama_head_dim_from_the_file_gives_the_reference_greedy_ids() {
    // tiny-llama-head-dim.gguf: head dim 32 from llama.attention.key_length, embedding 96 and 2
    // heads; the reference's greedy ids (llama_ref.py) on every cpu llama engine
    reference_greedy_on_every_cpu_engine(
        &common::tiny_llama_head_dim(),
        "tiny_llama_head_dim_greedy.txt",
    );
}

#[test]
fn qwen3_files_get_the_qwen3_engines_with_the_reference_greedy_ids() {
    // tiny-qwen3.gguf: the family from ckb/models/qwen3.toml alone (q/k norms, no biases, head
    // dim 64 from qwen3.attention.key_length); qwen3_ref.py's greedy ids (llama.cpp's too)
    let tiny = common::tiny_qwen3();
    assert_eq!(
        demo_engine::family_of(&tiny).unwrap(),
        demo_engine::Family::Qwen3
    );
    let names = reference_greedy_on_every_cpu_engine(&tiny, "tiny_qwen3_greedy.txt");
    assert!(names.iter().all(|n| n.starts_with("Qwen3")), "{names:?}");
    // Qwen3's own chat template (from the file): the last assistant turn keeps its thinking
    let m = load(&tiny, Which::Generic).unwrap();
    let msgs = [
        metainfer::Message::new("user", "q"),
        metainfer::Message::new("assistant", "<think>\nplan\n</think>\n\nanswer"),
    ];
    assert_eq!(
        m.render_chat(&msgs, false).unwrap(),
        "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\nplan\n</think>\n\nanswer<|im_end|>\n"
    );
    // the other families' engines refuse it, naming the model to generate; no cuda engine yet
    let msg = demo_engine::CoderPortable::load(&tiny)
        .err()
        .expect("refused")
        .to_string();
    assert!(
        msg.contains("general.architecture is \"qwen3\"") && msg.contains("model = \"qwen3\""),
        "{msg}"
    );
    let msg = demo_engine::Qwen3Portable::load(common::tiny_model())
        .err()
        .expect("refused")
        .to_string();
    assert!(msg.contains("general.architecture is \"qwen2\""), "{msg}");
    let msg = load(&tiny, Which::Cuda(Arch::Sm89))
        .err()
        .expect("refused")
        .to_string();
    assert!(
        msg.contains("architecture is qwen3") && msg.contains("--engine auto, avx2 or generic"),
        "{msg}"
    );
}

#[test]
fn qwen3_q4_k_m_greedy_tokens_match_llama_cpp() {
    // tiny-qwen3.gguf quantized by llama.cpp's own quantizer (Q5_0, Q4_K, Q6_K, Q8_0 and F32
    // tensors: scripts/anchor/llama-quantize.sh), llama.cpp's greedy ids recorded on it; the
    // q4_k_m engines' kernels on qwen3's graph, everywhere (the file is committed)
    let path = common::root().join("ckb/gates/fixtures/tiny-qwen3-q4_k_m.gguf");
    for which in x86_and_generic_engines() {
        common::greedy_against_llama_cpp(&path, "qwen3", which);
    }
}

#[test]
fn other_architecture_is_refused_with_what_differs() {
    let mut b = tiny_bytes();
    let at = after_string(&b, "general.architecture") + 4; // value type u32
    let val = after_string(&b[at..], "qwen2") + at - 5;
    b[val..val + 5].copy_from_slice(b"gemma");
    // demo-engine has no engine for that family: it says so and what would serve it
    let msg = load_err(&b, "arch.gguf", Which::Generic);
    assert!(
        msg.contains("general.architecture") && msg.contains("gemma") && msg.contains("qwen2"),
        "{msg}"
    );
    assert!(msg.contains("model = \"gemma\""), "{msg}");
    // an engine given a file of another family refuses it itself, with what to generate instead
    let path = write_temp("arch2.gguf", &b);
    let msg = demo_engine::CoderPortable::load(&path)
        .err()
        .expect("refused")
        .to_string();
    assert!(
        msg.contains("general.architecture is \"gemma\"")
            && msg.contains("generate an engine with model = \"gemma\""),
        "{msg}"
    );
}

#[test]
fn llama_files_get_the_llama_engines_and_qwen2_engines_refuse_them() {
    let tiny_llama = common::tiny_llama();
    assert_eq!(
        demo_engine::family_of(&tiny_llama).unwrap(),
        demo_engine::Family::Llama
    );
    for which in [Which::Auto, Which::Generic] {
        let mut m = load(&tiny_llama, which).unwrap();
        let ids = m.encode("hello world");
        let mut p = GenParams::greedy(4);
        p.stop_at_eos = false;
        assert_eq!(
            m.generate_ids(&ids, &p, &mut |_, _| true).unwrap().0.len(),
            4
        );
    }
    let msg = demo_engine::CoderPortable::load(&tiny_llama)
        .err()
        .expect("a qwen2 engine refuses a llama file")
        .to_string();
    assert!(
        msg.contains("general.architecture is \"llama\"") && msg.contains("model = \"llama\""),
        "{msg}"
    );
    let msg = demo_engine::SmolPortable::load(common::tiny_model())
        .err()
        .expect("a llama engine refuses a qwen2 file")
        .to_string();
    assert!(
        msg.contains("general.architecture is \"qwen2\"") && msg.contains("model = \"qwen2\""),
        "{msg}"
    );
}

/// tiny-llama.gguf saying `general.file_type = ft` (its own says 0, all F32).
fn tiny_llama_with_file_type(ft: u32) -> Vec<u8> {
    let mut b = std::fs::read(common::tiny_llama()).unwrap();
    let at = after_string(&b, "general.file_type");
    assert_eq!(
        b[at..at + 4],
        4u32.to_le_bytes(),
        "general.file_type is a u32"
    );
    b[at + 4..at + 8].copy_from_slice(&ft.to_le_bytes());
    b
}

#[test]
fn llama_k_quant_files_get_the_q4_k_engine() {
    assert!(demo_engine::k_quant_llama(Some(15)) && demo_engine::k_quant_llama(Some(14)));
    assert!(!demo_engine::k_quant_llama(Some(3)) && !demo_engine::k_quant_llama(None));
    let tiny_llama = common::tiny_llama();
    assert_eq!(demo_engine::gguf_file_type(&tiny_llama).unwrap(), Some(0));
    if let Some(qwen) = common::real_model() {
        // the header scan reads past the general.* keys where a file puts them later
        assert_eq!(demo_engine::gguf_file_type(&qwen).unwrap(), Some(15));
    }
    let q4km = write_temp("tiny-llama-q4km.gguf", &tiny_llama_with_file_type(15));
    let q4_1 = write_temp("tiny-llama-q4_1.gguf", &tiny_llama_with_file_type(3));
    assert_eq!(demo_engine::gguf_file_type(&q4km).unwrap(), Some(15));
    assert_eq!(demo_engine::gguf_arch(&q4km).unwrap(), "llama");
    let mut want = None;
    for (path, which, engine) in [
        (&q4km, Which::Avx2, "LlamaQ4k"),
        (&q4_1, Which::Avx2, "Smol"),
        (&tiny_llama, Which::Avx2, "Smol"),
        (&q4km, Which::Generic, "LlamaQ4kPortable"),
        (&q4_1, Which::Generic, "SmolPortable"),
        (&q4km, Which::Avx512, "LlamaQ4kAvx512"),
        (&q4_1, Which::Avx512, "SmolAvx512"),
    ] {
        if (which == Which::Avx2 && !demo_engine::has_avx2())
            || (which == Which::Avx512 && !demo_engine::has_avx512())
        {
            continue;
        }
        let mut m = load(path, which).unwrap();
        assert_eq!(m.name(), engine, "{} with {which:?}", path.display());
        // the file is all F32: the AVX2 and AVX-512 engines of either quant compute the same greedy ids
        let ids = m.encode("hello world");
        let mut p = GenParams::greedy(6);
        p.stop_at_eos = false;
        let got = m.generate_ids(&ids, &p, &mut |_, _| true).unwrap().0;
        assert_eq!(got.len(), 6);
        if which != Which::Generic {
            assert_eq!(want.get_or_insert_with(|| got.clone()), &got, "{engine}");
        }
    }
}

#[test]
fn tensor_type_not_compiled_in_is_refused() {
    // blk.1.ffn_gate.weight is F32; relabel it F16 (a smaller, still valid tensor)
    let mut b = tiny_bytes();
    let at = after_string(&b, "blk.1.ffn_gate.weight");
    let n_dims = u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
    let ty = at + 4 + 8 * n_dims;
    assert_eq!(
        u32::from_le_bytes(b[ty..ty + 4].try_into().unwrap()),
        0,
        "fixture tensor is F32"
    );
    b[ty..ty + 4].copy_from_slice(&1u32.to_le_bytes());
    let msg = load_err(&b, "f16.gguf", Which::Generic);
    assert!(
        msg.contains("blk.1.ffn_gate.weight") && msg.contains("F16") && msg.contains("regenerate"),
        "{msg}"
    );
}

#[test]
fn parts_the_engines_lack_are_refused_by_every_engine() {
    // a tensor the family does not name (a qwen2 bias renamed), and rope on part of each head
    // (tiny-llama's llama.rope.dimension_count of 32 set to 16), values of another width than
    // keys: the cpu and the cuda engines
    // (which read the file before they look for a GPU) each refuse them, naming the part
    let mut qwen2 = tiny_bytes();
    let at = after_string(&qwen2, "blk.0.attn_q.bias") - 11;
    qwen2[at..at + 4].copy_from_slice(b"rope");
    let mut llama = std::fs::read(common::tiny_llama()).unwrap();
    relabel_u32(&mut llama, "llama.rope.dimension_count", 32, 16);
    // values narrower than keys (the head-dim fixture's llama.attention.value_length 32 -> 16)
    let mut values = std::fs::read(common::tiny_llama_head_dim()).unwrap();
    relabel_u32(&mut values, "llama.attention.value_length", 32, 16);
    let avx2 = demo_engine::has_avx2().then_some(Which::Avx2);
    let cuda = [Arch::Sm80, Arch::Sm89, Arch::Sm90].map(|a| Some(Which::Cuda(a)));
    for (bytes, name, part) in [
        (&qwen2, "qwen2-rope.gguf", "tensor 'blk.0.rope_q.bias'"),
        (
            &llama,
            "llama-partial.gguf",
            "llama.rope.dimension_count is 16, not the head dim 32",
        ),
        (
            &values,
            "llama-values.gguf",
            "llama.attention.value_length is 16, not the head dim 32",
        ),
    ] {
        for which in [Some(Which::Auto), avx2, Some(Which::Generic)]
            .into_iter()
            .chain(cuda)
            .flatten()
        {
            // the llama family has a sm_89 engine only
            if name.starts_with("llama") && matches!(which, Which::Cuda(a) if a != Arch::Sm89) {
                continue;
            }
            let msg = load_err(bytes, name, which);
            assert!(
                msg.contains(part) && msg.contains("does not implement this part"),
                "{which:?} on {name}: {msg}"
            );
        }
    }
}

#[test]
fn an_odd_head_dim_is_refused_naming_the_key_it_came_from() {
    // the head-dim fixture's llama.attention.key_length 32 -> 33: rope needs an even head dim,
    // and the error names the key the file gave it (not attention.head_count)
    let mut keys = std::fs::read(common::tiny_llama_head_dim()).unwrap();
    relabel_u32(&mut keys, "llama.attention.key_length", 32, 33);
    let avx2 = demo_engine::has_avx2().then_some(Which::Avx2);
    for which in [Some(Which::Auto), avx2, Some(Which::Generic)]
        .into_iter()
        .flatten()
    {
        let msg = load_err(&keys, "llama-odd-head-dim.gguf", which);
        assert!(
            msg.contains("llama.attention.key_length") && msg.contains("head dim 33 must be even"),
            "{which:?}: {msg}"
        );
    }
}

#[test]
fn truncated_and_garbage_files_are_format_errors() {
    let b = tiny_bytes();
    for cut in [0, 3, 7, 23, 100, 4096, b.len() / 2, b.len() - 1] {
        let msg = load_err(&b[..cut], "cut.gguf", Which::Generic);
        assert!(
            msg.starts_with("malformed model file") || msg.contains("cannot read"),
            "cut at {cut}: {msg}"
        );
    }
    let msg = load_err(
        b"this is not a gguf file at all",
        "text.gguf",
        Which::Generic,
    );
    assert!(msg.contains("magic"), "{msg}");
    let missing = common::root().join("target/does-not-exist.gguf");
    let msg = load(&missing, Which::Generic).err().unwrap().to_string();
    assert!(msg.contains("does-not-exist.gguf"), "{msg}");
}

#[test]
fn a_sparse_file_claiming_billions_of_entries_is_an_error_not_an_abort() {
    // 64 GiB of (sparse) zeros after a header whose first entry names the architecture (so the
    // engine's own reader parses it) and that claims 2^32 metadata entries, or one array of 2^34
    // elements: the counts fit what the file's size could hold, so only a reader that reserved
    // memory from them would abort.
    let p = common::root().join("target/test-model-files/sparse.gguf");
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    let string = |s: &str| {
        let mut b = (s.len() as u64).to_le_bytes().to_vec();
        b.extend_from_slice(s.as_bytes());
        b
    };
    let mut arch = string("general.architecture");
    arch.extend_from_slice(&8u32.to_le_bytes());
    arch.extend_from_slice(&string("qwen2"));
    let mut array = string("a");
    array.extend_from_slice(&9u32.to_le_bytes()); // array
    array.extend_from_slice(&0u32.to_le_bytes()); // of u8
    array.extend_from_slice(&(1u64 << 34).to_le_bytes());
    for (case, n_kv, entries) in [
        ("2^32 metadata entries", 1u64 << 32, arch.clone()),
        (
            "an array of 2^34 elements",
            2,
            [arch.clone(), array].concat(),
        ),
    ] {
        let mut head = b"GGUF".to_vec();
        head.extend_from_slice(&3u32.to_le_bytes());
        head.extend_from_slice(&0u64.to_le_bytes()); // tensors
        head.extend_from_slice(&n_kv.to_le_bytes());
        head.extend_from_slice(&entries);
        let f = std::fs::File::create(&p).unwrap();
        std::io::Write::write_all(&mut &f, &head).unwrap();
        f.set_len(64 << 30).unwrap();
        drop(f);
        let msg = match load(&p, Which::Generic) {
            Ok(_) => panic!("{case}: the sparse file loaded"),
            Err(e) => e.to_string(),
        };
        assert!(msg.starts_with("malformed model file"), "{case}: {msg}");
        println!("{case}: {msg}");
    }
    let _ = std::fs::remove_file(&p);
}

// ---- Hugging Face AWQ checkpoints (ckb/gates/fixtures/tiny-qwen2-awq) -------------------------

fn awq_dir() -> std::path::PathBuf {
    common::root().join("ckb/gates/fixtures/tiny-qwen2-awq")
}

/// A copy of the tiny AWQ checkpoint under target/test-model-files/<name>/, with `edit` applied
/// to (file name, bytes) of each file.
fn awq_copy(name: &str, edit: impl Fn(&str, Vec<u8>) -> Vec<u8>) -> std::path::PathBuf {
    let dir = common::root().join("target/test-model-files").join(name);
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(awq_dir()).unwrap() {
        let e = e.unwrap();
        let f = e.file_name().into_string().unwrap();
        std::fs::write(dir.join(&f), edit(&f, std::fs::read(e.path()).unwrap())).unwrap();
    }
    dir
}

fn awq_err(dir: &std::path::Path, which: Which) -> String {
    match load(dir, which) {
        Ok(_) => panic!("{} loaded but should be refused", dir.display()),
        Err(e) => e.to_string(),
    }
}

/// config.json with `key` set to `value` (JSON text), or removed when `value` is None.
fn with_config(
    key: &'static str,
    value: Option<&'static str>,
) -> impl Fn(&str, Vec<u8>) -> Vec<u8> {
    move |f, b| {
        if f != "config.json" {
            return b;
        }
        let mut c: metainfer::rt::serde_json::Value =
            metainfer::rt::serde_json::from_slice(&b).unwrap();
        let o = c.as_object_mut().unwrap();
        match value {
            Some(v) => {
                let v = metainfer::rt::serde_json::from_str(v).unwrap();
                match key.split_once('.') {
                    Some((a, k)) => {
                        o.get_mut(a)
                            .unwrap()
                            .as_object_mut()
                            .unwrap()
                            .insert(k.into(), v);
                    }
                    None => {
                        o.insert(key.into(), v);
                    }
                }
            }
            None => {
                o.remove(key);
            }
        }
        metainfer::rt::serde_json::to_vec(&c).unwrap()
    }
}

#[test]
fn awq_checkpoint_generates_the_reference_greedy_ids_with_both_engines() {
    let text =
        std::fs::read_to_string(common::root().join("ckb/gates/vectors/tiny_qwen2_awq_greedy.txt"))
            .unwrap();
    let rows: Vec<Vec<u32>> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split(',').map(|s| s.trim().parse().unwrap()).collect())
        .collect();
    for which in [Which::Auto, Which::Generic] {
        let mut m = load(&awq_dir(), which).unwrap();
        let mut p = GenParams::greedy(rows[1].len());
        p.stop_at_eos = false;
        let (ids, _) = m.generate_ids(&rows[0], &p, &mut |_, _| true).unwrap();
        assert_eq!(ids, rows[1], "{which:?} engine ({})", m.hw());
        // The tokenizer.json path: text in, the same ids as the GGUF's BPE tokenizer.
        let gguf = load(&common::tiny_model(), which).unwrap();
        for t in [
            "Hello, world!",
            "<|im_start|>user\nhi<|im_end|>",
            "你好 😀 fn main() {}",
        ] {
            assert_eq!(m.encode(t), gguf.encode(t), "{t:?}");
            assert_eq!(m.decode(&m.encode(t)), t);
        }
    }
}

#[test]
fn awq_checkpoint_with_other_quantization_is_refused_with_what_differs() {
    let dir = awq_copy(
        "awq-bits8",
        with_config("quantization_config.bits", Some("8")),
    );
    let e = awq_err(&dir, Which::Generic);
    assert!(
        e.contains("quantization_config") && e.contains("bits 8") && e.contains("bits 4"),
        "{e}"
    );
    let dir = awq_copy(
        "awq-gptq",
        with_config("quantization_config.quant_method", Some("\"gptq\"")),
    );
    let e = awq_err(&dir, Which::Auto);
    assert!(e.contains("quant_method gptq"), "{e}");
}

#[test]
fn awq_checkpoint_with_rope_scaling_is_refused_naming_it() {
    // rope scaling is a part the engines lack: refused, as in a GGUF file; a default (unscaled)
    // rope_scaling loads
    for (name, scaling, refused) in [
        (
            "awq-yarn",
            r#"{"type": "yarn", "factor": 4.0}"#,
            Some("\"yarn\""),
        ),
        (
            "awq-linear",
            r#"{"rope_type": "linear", "factor": 2.0}"#,
            Some("factor is 2"),
        ),
        ("awq-default", r#"{"rope_type": "default"}"#, None),
    ] {
        let dir = awq_copy(name, with_config("rope_scaling", Some(scaling)));
        match refused {
            Some(what) => {
                let e = awq_err(&dir, Which::Generic);
                assert!(
                    e.contains("qwen2.rope.scaling")
                        && e.contains(what)
                        && e.contains("does not implement"),
                    "{name}: {e}"
                );
            }
            None => {
                load(&dir, Which::Generic).unwrap_or_else(|e| panic!("{name}: {e}"));
            }
        }
    }
}

#[test]
fn awq_checkpoint_missing_config_key_names_it() {
    let dir = awq_copy("awq-no-hidden", with_config("hidden_size", None));
    let e = awq_err(&dir, Which::Generic);
    assert!(e.contains("config.json: hidden_size"), "{e}");
    let dir = awq_copy(
        "awq-bad-layers",
        with_config("num_hidden_layers", Some("\"two\"")),
    );
    let e = awq_err(&dir, Which::Generic);
    assert!(e.contains("config.json: num_hidden_layers"), "{e}");
}

#[test]
fn truncated_and_garbage_safetensors_are_format_errors() {
    let st = std::fs::read(awq_dir().join("model.safetensors")).unwrap();
    let n = u64::from_le_bytes(st[..8].try_into().unwrap()) as usize;
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "awq-trunc-data",
            st[..st.len() - 1000].to_vec(),
            "data_offsets",
        ),
        (
            "awq-trunc-header",
            st[..8 + n / 2].to_vec(),
            "header length",
        ),
        ("awq-tiny", st[..5].to_vec(), "fewer than 8"),
        (
            "awq-garbage-json",
            [&st[..8], &vec![b'{'; n][..], &st[8 + n..]].concat(),
            "not valid JSON",
        ),
        (
            "awq-huge-len",
            [&u64::MAX.to_le_bytes()[..], &st[8..]].concat(),
            "header length",
        ),
    ];
    for (name, bytes, want) in cases {
        let dir = awq_copy(name, |f, b| {
            if f == "model.safetensors" {
                bytes.clone()
            } else {
                b
            }
        });
        let e = awq_err(&dir, Which::Generic);
        assert!(
            e.contains("model.safetensors") && e.contains(want),
            "{name}: {e}"
        );
    }
    // An AWQ triple whose qzeros do not fit its qweight.
    let header = std::str::from_utf8(&st[8..8 + n]).unwrap();
    let key = "\"model.layers.0.self_attn.q_proj.qzeros\":{\"data_offsets\":";
    assert!(header.contains(key));
    let bad = header.replacen(
        "\"model.layers.0.self_attn.q_proj.qzeros\"",
        "\"model.layers.0.self_attn.q_proj.qzerox\"",
        1,
    );
    let bytes = [&st[..8], bad.as_bytes(), &st[8 + n..]].concat();
    let dir = awq_copy("awq-no-qzeros", |f, b| {
        if f == "model.safetensors" {
            bytes.clone()
        } else {
            b
        }
    });
    let e = awq_err(&dir, Which::Generic);
    assert!(
        e.contains("model.layers.0.self_attn.q_proj.qzeros") && e.contains("missing"),
        "{e}"
    );
}

#[test]
fn a_gguf_engine_and_an_awq_engine_refuse_each_others_files() {
    // A directory without config.json is no checkpoint.
    let dir = common::root().join("target/test-model-files/awq-empty");
    std::fs::create_dir_all(&dir).unwrap();
    let e = awq_err(&dir, Which::Generic);
    assert!(e.contains("config.json") && e.contains("gguf"), "{e}");
    // The GGUF engine given the checkpoint's weights file.
    let st = awq_dir().join("model.safetensors");
    let e = match demo_engine::CoderPortable::load(&st) {
        Ok(_) => panic!("the gguf engine loaded a safetensors file"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.to_lowercase().contains("magic") || e.contains("GGUF"),
        "{e}"
    );
}
