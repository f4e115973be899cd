//! The code policy against sections written to get around it (the red-team suite: every case
//! must be refused, naming what it did), against benign sections (which must pass), and against
//! the CKB's own realizations (every file passes its contract's allowlist).

use metainfer_build::chain::review::{review_section, Allowances};
use metainfer_build::Ckb;

/// (case, contract whose allowlist applies, section code, a phrase the refusal must contain)
const HOSTILE: &[(&str, &str, &str, &str)] = &[
    (
        "process inside format!",
        "sampler",
        r#"fn f() -> String { format!("{:?}", std::process::Command::new("id").output()) }"#,
        "process spawning",
    ),
    (
        "file read inside vec!",
        "sampler",
        r#"fn f() { let _ = vec![std::fs::read("/etc/passwd")]; }"#,
        "file access",
    ),
    (
        "unsafe inside vec! in a safe slot",
        "sampler",
        r#"fn f() -> Vec<u8> { vec![unsafe { *(8 as *const u8) }] }"#,
        "unsafe block",
    ),
    (
        "macro_rules body",
        "sampler",
        r#"macro_rules! m { () => { std::process::exit(0) } }"#,
        "macro_rules!",
    ),
    (
        "std aliased",
        "sampler",
        r#"use std as s; fn f() { s::process::exit(0) }"#,
        "process spawning",
    ),
    (
        "include_str aliased",
        "sampler",
        r#"use std::include_str as i; const X: &str = i!("/etc/passwd");"#,
        "include_str",
    ),
    (
        "core::env aliased",
        "sampler",
        r#"use core::env as e; fn f() { let _ = e::var("METAINFER_LLM_API_KEY"); }"#,
        "environment access",
    ),
    (
        "global_asm aliased in a kernel",
        "dot_q4_k",
        r#"use core::arch::global_asm as g; g!("nop");"#,
        "inline assembly",
    ),
    (
        "asm in a kernel",
        "dot_q4_k",
        r#"unsafe fn f() { std::arch::asm!("nop") }"#,
        "inline assembly",
    ),
    (
        "unsafe(no_mangle)",
        "sampler",
        r#"#[unsafe(no_mangle)] pub extern "C" fn main() {}"#,
        "#[unsafe]",
    ),
    (
        "no_mangle",
        "dot_q4_k",
        r#"#[no_mangle] pub extern "C" fn malloc() {}"#,
        "#[no_mangle]",
    ),
    (
        "cfg_attr smuggling an attribute",
        "sampler",
        r#"#[cfg_attr(all(), no_mangle)] pub fn f() {}"#,
        "#[cfg_attr]",
    ),
    (
        "init_array static",
        "sampler",
        r#"fn f() {} #[used] #[link_section = ".init_array"] static X: fn() = f;"#,
        "#[used]",
    ),
    (
        "export_name",
        "sampler",
        r#"#[export_name = "main"] fn f() {}"#,
        "#[export_name]",
    ),
    (
        "unsafe default method in a trait",
        "sampler",
        r#"trait T { unsafe fn f(&self) {} }"#,
        "unsafe fn f",
    ),
    (
        "unsafe trait",
        "sampler",
        r#"unsafe trait T {}"#,
        "unsafe trait",
    ),
    (
        "unsafe impl",
        "sampler",
        r#"struct X; unsafe impl Send for X {}"#,
        "unsafe impl",
    ),
    (
        "union",
        "sampler",
        r#"union U { a: u32, b: f32 }"#,
        "union U",
    ),
    (
        "read_dir as a method",
        "sampler",
        r#"fn f(p: &std::path::Path) { let _ = p.read_dir(); }"#,
        "file system",
    ),
    (
        "read_dir through the type",
        "sampler",
        r#"fn f(p: &std::path::Path) { let _ = std::path::Path::read_dir(p); }"#,
        "file system",
    ),
    (
        "exists probe",
        "generate",
        r#"fn f(p: &std::path::Path) -> bool { p.exists() }"#,
        "file system",
    ),
    (
        "minijinja path loader",
        "chat_template",
        r#"fn f(e: &mut rt::minijinja::Environment<'static>) { e.set_loader(rt::minijinja::path_loader("/")); }"#,
        "template loading",
    ),
    (
        "server bind outside the server section",
        "sampler",
        r#"fn f() { let _ = rt::server::Server::bind; }"#,
        "HTTP server",
    ),
    (
        "server through metainfer_rt",
        "generate",
        r#"fn f() { let _ = ::metainfer_rt::server::Server::bind; }"#,
        "HTTP server",
    ),
    (
        "rt reached through super",
        "sampler",
        r#"use super::rt::server as s; fn f() { let _ = s::Server::bind; }"#,
        "HTTP server",
    ),
    (
        "network",
        "sampler",
        r#"fn f() { let _ = std::net::TcpStream::connect("10.0.0.1:80"); }"#,
        "network access",
    ),
    (
        "environment variable",
        "sampler",
        r#"fn f() -> Option<String> { std::env::var("METAINFER_LLM_API_KEY").ok() }"#,
        "environment access",
    ),
    (
        "env! at compile time",
        "sampler",
        r#"const K: &str = env!("HOME");"#,
        "build environment",
    ),
    (
        "option_env! at compile time",
        "sampler",
        r#"const K: Option<&str> = option_env!("METAINFER_LLM_API_KEY");"#,
        "build environment",
    ),
    (
        "include_bytes!",
        "sampler",
        r#"const B: &[u8] = include_bytes!("/etc/shadow");"#,
        "reads files",
    ),
    (
        "extern block",
        "dot_q4_k",
        r#"extern "C" { fn system(c: *const u8) -> i32; }"#,
        "extern blocks",
    ),
    (
        "extern crate",
        "sampler",
        r#"extern crate std as s2;"#,
        "extern crate",
    ),
    (
        "module declaration",
        "sampler",
        r#"mod evil { pub fn f() {} }"#,
        "module declarations",
    ),
    (
        "static mut",
        "dot_q4_k",
        r#"static mut COUNTER: u32 = 0;"#,
        "static mut",
    ),
    (
        "glob of std::fs",
        "sampler",
        r#"use std::fs::*; fn f() { let _ = read("/x"); }"#,
        "glob import",
    ),
    (
        "glob of std",
        "sampler",
        r#"use std::*; fn f() { let _ = process::id(); }"#,
        "glob import",
    ),
    (
        "crate-rooted path",
        "sampler",
        r#"fn f() { crate::evil() }"#,
        "outside the engine",
    ),
    (
        "super::super",
        "sampler",
        r#"fn f() { super::super::evil() }"#,
        "outside the engine",
    ),
    (
        "thread running a process",
        "sampler",
        r#"fn f() { std::thread::spawn(|| std::process::abort()); }"#,
        "process spawning",
    ),
    (
        "println!",
        "sampler",
        r#"fn f() { println!("leak"); }"#,
        "not on the list of macros",
    ),
    ("todo!", "sampler", r#"fn f() { todo!() }"#, "unimplemented"),
    (
        "alias chain",
        "sampler",
        r#"use std as a1; use a1 as a2; use a2 as a3; use a3 as a4; use a4 as a5; use a5 as a6; use a6 as a7; use a7 as a8; use a8 as a9; use a9 as a10; fn f() { a10::process::abort() }"#,
        "more `use` aliases",
    ),
    (
        "derive of a foreign trait",
        "sampler",
        r#"#[derive(serde::Serialize)] struct X;"#,
        "only std's traits",
    ),
    (
        "include_str in a doc attribute",
        "sampler",
        r#"#[doc = include_str!("/etc/passwd")] fn f() {}"#,
        "include_str",
    ),
    (
        "os extension trait",
        "sampler",
        r#"use std::os::unix::process::CommandExt;"#,
        "os-specific",
    ),
    (
        "fs function pointer",
        "sampler",
        r#"fn f() { let _open = std::fs::File::open; }"#,
        "file access",
    ),
    (
        "qualified type path",
        "sampler",
        r#"fn f() { let _ = <std::process::Command>::new("id"); }"#,
        "process spawning",
    ),
    (
        "matches! guard",
        "sampler",
        r#"fn f(x: u32) -> bool { matches!(x, _ if std::process::id() > 0) }"#,
        "process spawning",
    ),
    (
        "write! argument",
        "sampler",
        r#"fn f(w: &mut String) { use std::fmt::Write; let _ = write!(w, "{}", std::env::args().count()); }"#,
        "environment access",
    ),
    (
        "tokenizers from_file",
        "tokenizer_hf",
        r#"fn f() { let _ = rt::tokenizers::Tokenizer::from_file("/etc/passwd"); }"#,
        "allowlist",
    ),
    (
        "target_feature in a safe section",
        "sampler",
        r#"#[target_feature(enable = "avx2")] fn f() {}"#,
        "#[target_feature]",
    ),
    (
        "leading-colon process",
        "sampler",
        r#"fn f() { ::std::process::exit(1) }"#,
        "process spawning",
    ),
    (
        "io in a section without file access",
        "sampler",
        r#"fn f() { let _ = std::io::stdout(); }"#,
        "io",
    ),
    (
        "file mapping outside the reader",
        "sampler",
        r#"fn f(f: &std::fs::File) { let _ = unsafe { rt::memmap2::Mmap::map(f) }; }"#,
        "file mapping",
    ),
    (
        "unparseable macro arguments",
        "sampler",
        r#"fn f() -> bool { matches!(=> ) }"#,
        "could not be checked",
    ),
];

/// (case, contract, section code): ordinary code the policy must accept.
const BENIGN: &[(&str, &str, &str)] = &[
    (
        "collections, macros, sync and threads",
        "sampler",
        r#"
use super::*;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct S { m: HashMap<u32, f32> }
#[inline]
pub(crate) fn f(n: usize, x: u32) -> Vec<f32> {
    let v = vec![0.0f32; n];
    assert_eq!(v.len(), n, "{} values", n);
    let shared = Arc::new(Mutex::new(0u32));
    let s2 = Arc::clone(&shared);
    std::thread::spawn(move || *s2.lock().unwrap() += 1).join().unwrap();
    if matches!(x, 1 | 2) { return vec![1.0, 2.0]; }
    let _ = format!("{x:?} {}", rt::half::f16::from_f32(1.0));
    let _e = rt::Error::Params(format!("bad {x}"));
    v
}"#,
    ),
    (
        "kernel with intrinsics",
        "dot_q4_k",
        r#"
#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn k(a: &[f32]) -> f32 {
    let v = _mm256_loadu_ps(a.as_ptr());
    let mut out = [0.0f32; 8];
    _mm256_storeu_ps(out.as_mut_ptr(), v);
    out.iter().sum()
}"#,
    ),
    (
        "the reader opens and maps its file",
        "gguf_reader",
        r#"
pub(crate) fn open(path: &std::path::Path) -> rt::Result<rt::memmap2::Mmap> {
    let f = std::fs::File::open(path).map_err(|e| rt::Error::Io { path: path.into(), source: e })?;
    let _ = path.exists();
    // SAFETY: read-only map of a file the engine does not write
    unsafe { rt::memmap2::Mmap::map(&f) }.map_err(|e| rt::Error::Io { path: path.into(), source: e })
}"#,
    ),
    (
        "the server section uses the server",
        "server_openai",
        r#"
pub(crate) fn bind(addr: &str) { let _ = rt::server::ServerConfig::default(); let _ = addr; }"#,
    ),
];

fn contract<'a>(ckb: &'a Ckb, id: &str) -> &'a metainfer_build::ckb::Contract {
    ckb.contracts
        .get(id)
        .unwrap_or_else(|| panic!("no contract {id}"))
}

#[test]
fn hostile_sections_are_refused_naming_what_they_did() {
    let ckb = Ckb::load(Ckb::default_root()).expect("ckb loads");
    assert!(HOSTILE.len() >= 30);
    let mut failures = Vec::new();
    for (case, id, code, phrase) in HOSTILE {
        let c = contract(&ckb, id);
        let problems = review_section("redteam", code, None, Allowances::of(Some(c)), &[]);
        let text: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        if !text.iter().any(|t| t.contains(phrase)) {
            failures.push(format!(
                "{case}: expected a problem containing {phrase:?}, got {text:?}"
            ));
        }
        if problems.iter().any(|p| p.line.is_none()) {
            failures.push(format!("{case}: a problem without its line: {text:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn benign_sections_pass() {
    let ckb = Ckb::load(Ckb::default_root()).expect("ckb loads");
    for (case, id, code) in BENIGN {
        let c = contract(&ckb, id);
        let problems = review_section("benign", code, None, Allowances::of(Some(c)), &[]);
        assert!(problems.is_empty(), "{case}: {problems:#?}");
    }
}

#[test]
fn every_ckb_realization_passes_its_contracts_allowlist() {
    let ckb = Ckb::load(Ckb::default_root()).expect("ckb loads");
    let root = ckb.root.join("realizations");
    let mut checked = 0;
    let mut problems = Vec::new();
    for dir in std::fs::read_dir(&root).unwrap() {
        let dir = dir.unwrap().path();
        let id = dir.file_name().unwrap().to_string_lossy().to_string();
        let c = contract(&ckb, &id);
        for f in std::fs::read_dir(&dir).unwrap() {
            let f = f.unwrap().path();
            if f.extension().is_some_and(|e| e == "rs") {
                let code = std::fs::read_to_string(&f).unwrap();
                let name = f.display().to_string();
                problems.extend(review_section(
                    &name,
                    &code,
                    None,
                    Allowances::of(Some(c)),
                    &[],
                ));
                checked += 1;
            }
        }
    }
    assert!(checked > 40, "only {checked} realization files found");
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn a_whole_engine_meets_the_policy_again_as_on_a_cache_hit() {
    // what a hit on an entry with LLM-written sections costs: every section of the engine
    // re-parsed and re-checked (the demo's avx2 engine, ~3,900 lines)
    let ckb = Ckb::load(Ckb::default_root()).expect("ckb loads");
    let c = metainfer_build::Constraints::from_args(
        &[
            metainfer_build::Arg::str("model", "qwen2"),
            metainfer_build::Arg::str("hw", "x86_64-avx2"),
            metainfer_build::Arg::str("quant", "q4_k_m"),
        ],
        &ckb,
    )
    .unwrap();
    let (plan, _, engine) = metainfer_build::chain::implement_engine(&c, &ckb, false).unwrap();
    let t0 = std::time::Instant::now();
    let problems = metainfer_build::chain::provenance::recheck_policy(&plan, &engine, &ckb);
    println!(
        "policy re-check of {} lines in {} sections: {:.1} ms",
        engine.lines().count(),
        plan.slots.len(),
        t0.elapsed().as_secs_f64() * 1e3
    );
    assert!(problems.is_empty(), "{problems:#?}");
    // and an edit that the policy refuses is found in its section
    let edited = engine.replacen(
        "mod sampler {\n    use super::*;\n\n",
        "mod sampler {\n    use super::*;\n\n    fn leak() -> Option<String> { std::env::var(\"METAINFER_LLM_API_KEY\").ok() }\n",
        1,
    );
    assert_ne!(edited, engine, "the engine has a sampler section");
    let problems = metainfer_build::chain::provenance::recheck_policy(&plan, &edited, &ckb);
    assert!(
        problems
            .iter()
            .any(|p| p.slot == "sampler" && p.message.contains("environment access")),
        "{problems:#?}"
    );
}
