//! Two (and more) processes writing the same cache key at once: one valid entry, every
//! writer succeeds, nothing half-written is left.
#![allow(
    clippy::disallowed_methods,
    reason = "a test harness reads its own knobs and hands cargo's variables on"
)]

mod common;

use metainfer_build::Cache;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const DIR_VAR: &str = "METAINFER_TEST_WRITER_DIR";

/// Runs as a writer when spawned by `processes_write_one_key`; a no-op otherwise.
#[test]
fn writer_child() {
    let Some(ws) = std::env::var_os(DIR_VAR) else {
        return;
    };
    let ws = Path::new(&ws);
    let go = ws.join("go");
    let start = Instant::now();
    while !go.exists() {
        assert!(start.elapsed() < Duration::from_secs(60), "no go signal");
        std::thread::sleep(Duration::from_millis(1));
    }
    let c = common::constraints(&[("model", "qwen2"), ("hw", "generic"), ("quant", "q8_0")]);
    let cache = Cache::new("cache", ws);
    let tag = format!("process {}", std::process::id());
    let e = cache
        .write(&c, "digest", &common::candidate(&tag, true))
        .unwrap();
    println!("WROTE {}", e.key);
}

#[test]
fn processes_write_one_key() {
    let ws = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..4)
        .map(|_| {
            Command::new(&exe)
                .args(["--exact", "writer_child", "--nocapture", "--test-threads=1"])
                .env(DIR_VAR, ws.path())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(ws.path().join("go"), "").unwrap();
    let c = common::constraints(&[("model", "qwen2"), ("hw", "generic"), ("quant", "q8_0")]);
    for child in children {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains(&format!("WROTE {}", c.key())), "{stdout}");
    }
    let cache = Cache::new("cache", ws.path());
    assert_eq!(cache.keys().unwrap(), [c.key()]);
    let entry = cache.lookup(&c).unwrap().unwrap();
    assert!(entry.manifest.gates_passed);
    let names: Vec<String> = std::fs::read_dir(&cache.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, [c.key()], "temp directories left behind");
}
