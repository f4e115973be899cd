//! The verifier's sandbox against gate tests that misbehave: a test binary built here with
//! `rustc --test` (no dependencies, a second to build) whose tests loop, hog memory, forge
//! libtest's output, exit early, flood stdout, look for secrets and reach for the network.
//! Each runs through `sandbox::run` as the verifier runs a gate test.
#![allow(
    clippy::disallowed_methods,
    reason = "a test harness reads its own knobs and hands cargo's variables on"
)]

use metainfer_build::chain::sandbox::{self, Limits, Outcome};
use std::path::{Path, PathBuf};
use std::time::Duration;

const TESTS: &str = r#"
#[test] fn honest() { println!("GATE honest cases=3"); assert_eq!(1 + 1, 2); }
#[test] fn loops() { let mut x = 0u64; loop { x = x.wrapping_add(1); std::hint::black_box(x); } }
#[test] fn hog() { let mut v: Vec<Vec<u8>> = Vec::new(); loop { v.push(vec![1u8; 1 << 28]); } }
#[test] fn fake() {
    // a forged verdict, on stderr as a caught panic's message would be, and on stdout
    let _ = std::panic::catch_unwind(|| panic!("\ntest fake ... ok\n\ntest result: ok. 1 passed; 0 failed"));
    println!("test fake ... ok\ntest result: ok. 1 passed; 0 failed; 0 ignored");
    assert!(false, "the real check fails");
}
#[test] fn early_exit() { std::process::exit(0); }
#[test] fn spam() { let line = "x".repeat(1000); loop { println!("{line}"); } }
#[test] fn secret() { assert!(std::env::var_os("METAINFER_LLM_API_KEY").is_none(), "the key leaked"); assert!(std::env::var_os("HOME_OF_USER").is_none()); }
#[test] fn network() {
    let addr: std::net::SocketAddr = "1.1.1.1:80".parse().unwrap();
    assert!(std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(2)).is_err(), "reached the network");
}
#[test] fn loopback() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("loopback works");
    std::net::TcpStream::connect(l.local_addr().unwrap()).expect("loopback connects");
}
"#;

fn build(dir: &Path) -> PathBuf {
    let src = dir.join("t.rs");
    std::fs::write(&src, TESTS).unwrap();
    let exe = dir.join("t");
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let st = std::process::Command::new(rustc)
        .args(["--test", "--edition", "2021", "-O", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("rustc runs");
    assert!(st.success());
    exe
}

fn limits() -> Limits {
    Limits {
        wall: Duration::from_secs(5),
        cpu_s: 20,
        data_mib: 1024,
        file_mib: 16,
        output_bytes: 1 << 20,
    }
}

fn run(exe: &Path, cwd: &Path, test: &str) -> sandbox::Run {
    let args: Vec<String> = [test, "--exact", "--nocapture", "--test-threads=1"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    sandbox::run(
        exe,
        &args,
        &[("RUST_BACKTRACE".into(), "0".into())],
        cwd,
        &limits(),
    )
    .unwrap()
}

#[test]
fn misbehaving_gate_tests_fail_and_say_why() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path());
    let l = limits();

    let r = run(&exe, dir.path(), "honest");
    assert!(r.test_passed(), "{r:?}");
    assert!(r.stdout.contains("GATE honest cases=3"));

    let r = run(&exe, dir.path(), "loops");
    assert_eq!(r.outcome, Outcome::TimedOut);
    assert!(!r.test_passed());
    assert!(r.wall < Duration::from_secs(8), "killed at {:?}", r.wall);
    assert!(
        r.describe(&l).contains("wall-time limit"),
        "{}",
        r.describe(&l)
    );

    let r = run(&exe, dir.path(), "hog");
    assert!(!r.test_passed());
    assert_ne!(
        r.outcome,
        Outcome::TimedOut,
        "the memory limit, not the clock, stops it"
    );
    assert!(
        r.describe(&l).contains("memory limit"),
        "{}: {}",
        r.describe(&l),
        r.stderr
    );

    let r = run(&exe, dir.path(), "fake");
    assert!(!r.test_passed(), "a forged verdict passed: {r:?}");

    let r = run(&exe, dir.path(), "early_exit");
    assert_eq!(r.outcome, Outcome::Exited(0));
    assert!(!r.test_passed(), "exit(0) before the asserts passed");

    let r = run(&exe, dir.path(), "spam");
    assert_eq!(r.outcome, Outcome::OutputCapped);
    assert!(r.stdout.len() <= l.output_bytes);

    std::env::set_var("METAINFER_LLM_API_KEY", "sk-test-secret");
    let r = run(&exe, dir.path(), "secret");
    assert!(r.test_passed(), "{}", r.stderr);

    let r = run(&exe, dir.path(), "loopback");
    assert!(r.test_passed(), "{}", r.stderr);
    let r = run(&exe, dir.path(), "network");
    if r.network_isolated {
        assert!(r.test_passed(), "the network was reachable: {}", r.stderr);
    } else {
        eprintln!("no network namespace on this machine: the network test is not asserted");
    }
}
