//! Verify: compile the candidate engine in a scratch crate (its own target dir, offline) with
//! the gates of its contracts, run them, and read back what they measured. The verifier is the
//! only step that can say "pass".

use super::ChainError;
use crate::ckb::Ckb;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The outcome of one gate.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GateResult {
    pub id: String,
    /// `pass`, `fail` or `skipped`.
    pub status: String,
    /// Test functions that ran, with their result.
    pub tests: BTreeMap<String, String>,
    /// Numbers the gate printed (`GATE <name> key=value …`), by name.
    pub measured: BTreeMap<String, BTreeMap<String, toml::Value>>,
    /// Why it was skipped, when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Everything the verifier found.
#[derive(Debug, Clone)]
pub struct Verdict {
    pub gates: Vec<GateResult>,
    pub passed: bool,
    /// The test binary's output, for feedback on failure.
    pub log: String,
}

/// Where the scratch crate lives and what it may use.
pub struct Scratch<'a> {
    pub dir: PathBuf,
    pub target_dir: PathBuf,
    pub ckb: &'a Ckb,
    /// Features of metainfer-rt the engine needs (`server` always, for the server gate;
    /// `hf` for engines that load Hugging Face checkpoints).
    pub rt_features: Vec<&'static str>,
    /// The entry's `kernels/` files (path, bytes), written beside the engine and exposed to
    /// it as `METAINFER_KERNELS`, as the expansion does.
    pub kernels: Vec<(String, Vec<u8>)>,
    /// The limits each gate test runs under.
    pub limits: &'a super::sandbox::Limits,
    /// Wall time for one `cargo test --no-run` of the scratch crate.
    pub compile_timeout: std::time::Duration,
}

/// The path of the `metainfer-rt` crate the candidate is compiled against: the one beside this
/// generator, never one found from the workspace a build runs in.
pub fn rt_crate_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("metainfer-rt")
}

/// The lock file the candidate crate starts from: the generator's own (its dependency versions
/// are the ones this generator was tested with), so a build resolves nothing new and needs no
/// network when the user's machine has built metainfer before.
pub fn generator_lock() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("Cargo.lock")
}

/// Compiles `engine_rs` with the gates `gate_ids` and runs them.
pub fn verify(
    s: &Scratch<'_>,
    engine_rs: &str,
    gate_ids: &[String],
    progress: bool,
) -> Result<Verdict, ChainError> {
    verify_subset(s, engine_rs, gate_ids, gate_ids, progress)
}

/// Compiles `engine_rs` with the gates `compiled` (so that the build is the one a later
/// [`verify`] of the same engine reuses) and runs only `run`, a subset of them.
pub fn verify_subset(
    s: &Scratch<'_>,
    engine_rs: &str,
    compiled: &[String],
    run: &[String],
    progress: bool,
) -> Result<Verdict, ChainError> {
    let gate_ids = compiled;
    let io = |what: &str, p: &Path, e: std::io::Error| {
        ChainError::Verify(format!("{what} {}: {e}", p.display()))
    };
    std::fs::create_dir_all(s.dir.join("src"))
        .map_err(|e| io("cannot create scratch crate", &s.dir, e))?;
    let rt_dir = rt_crate_dir();
    let rt_dir = rt_dir
        .canonicalize()
        .map_err(|e| io("cannot find metainfer-rt at", &rt_dir, e))?;
    // Every scratch crate builds into the shared target dir, and cargo's artifact names do not
    // depend on the crate's directory: two candidates with one name and one feature set would
    // share a test binary, and one whose unchanged sources are older than that binary would run
    // the other's engine. The directory (the key's prefix) in the name keeps them apart.
    let tag: String = s
        .dir
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let tag: String = tag
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let manifest = format!(
        "[package]\nname = \"metainfer-candidate-{tag}\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n\
         [lib]\npath = \"src/lib.rs\"\n\n[dependencies]\nmetainfer-rt = {{ path = {:?}, features = {:?} }}\n\n\
         [profile.release]\nopt-level = 3\ndebug = false\nincremental = true\n\n[workspace]\n",
        rt_dir.display().to_string(),
        s.rt_features
    );
    let mut lib = String::from("// The candidate engine and its gates (written by metainfer-build's verifier).\n#![allow(dead_code)]\nuse metainfer_rt as rt;\ninclude!(\"engine.rs\");\n");
    lib.push_str("/// The entry's kernels/ files, by name (as the expansion defines it).\npub(crate) const METAINFER_KERNELS: &[(&str, &[u8])] = &[");
    for (path, bytes) in &s.kernels {
        let name = path.strip_prefix("kernels/").unwrap_or(path);
        let file = s.dir.join("src").join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io("cannot create", parent, e))?;
        }
        if std::fs::read(&file).ok().as_deref() != Some(bytes.as_slice()) {
            std::fs::write(&file, bytes).map_err(|e| io("cannot write", &file, e))?;
        }
        lib.push_str(&format!("({name:?}, include_bytes!({path:?})), "));
    }
    lib.push_str("];\n");
    if !gate_ids.is_empty() {
        // Helpers the gates share (not a gate of its own), seen by each gate via `use super::*`.
        let common = s.ckb.root.join("gates").join("common.rs");
        let common = common
            .canonicalize()
            .map_err(|e| io("cannot find the gates' common helpers", &common, e))?;
        lib.push_str(&format!(
            "#[cfg(test)]\n#[allow(unused_imports, dead_code)]\nmod gate_common {{\n    use super::*;\n    include!({:?});\n}}\n#[cfg(test)]\n#[allow(unused_imports)]\npub(crate) use gate_common::*;\n",
            common.display().to_string()
        ));
    }
    for g in gate_ids {
        let gate = s
            .ckb
            .gates
            .get(g)
            .ok_or_else(|| ChainError::Verify(format!("the ckb has no gate '{g}'")))?;
        let src = s.ckb.root.join("gates").join(&gate.source);
        let src = src
            .canonicalize()
            .map_err(|e| io("cannot find gate source", &src, e))?;
        lib.push_str(&format!(
            "#[cfg(test)]\n#[allow(unused_imports)]\nmod gate_{g} {{\n    use super::*;\n    include!({:?});\n}}\n",
            src.display().to_string()
        ));
    }
    write_if_changed(&s.dir.join("Cargo.toml"), &manifest)?;
    write_if_changed(&s.dir.join("src/engine.rs"), engine_rs)?;
    write_if_changed(&s.dir.join("src/lib.rs"), &lib)?;
    let lock = generator_lock();
    if lock.exists() && !s.dir.join("Cargo.lock").exists() {
        let _ = std::fs::copy(&lock, s.dir.join("Cargo.lock"));
    }

    if progress {
        crate::progress::line(&format!(
            "metainfer: verify: compiling the candidate (release) with gates {} in {}",
            run.join(", "),
            s.dir.display()
        ));
    }
    let mut out = run_cargo(s, true, progress)?;
    let net_off =
        crate::env::var("CARGO_NET_OFFLINE").is_some_and(|v| crate::mode::net_offline(&v));
    if !out.success && !net_off && needs_network(&out.stderr) {
        // The generator's lock names crates this machine has not downloaded yet (a first build
        // elsewhere): fetch them once, with the versions the lock pins.
        if progress {
            crate::progress::line("metainfer: verify: some locked crates are not in the local cargo cache; fetching them (cargo without --offline)");
        }
        out = run_cargo(s, false, progress)?;
    }
    let exe = match (&out.executable, out.success) {
        (Some(exe), true) => exe.clone(),
        _ => {
            return Err(ChainError::Compile {
                log: tail(&out.stderr, 12_000),
            })
        }
    };
    run_gates(s, &exe, run, progress)
}

/// Runs the gate tests of `run` (each `gate_<id>::…` test of the compiled test binary `exe`,
/// one process per test) in the sandbox. A test passes only when its process exits with 0
/// and libtest's own summary of that one test says it passed: output the candidate could
/// write (it may not, under the code policy, but a panic message reaches stderr) cannot
/// stand in for either, and a process that ends early (`exit(0)` before the gate's asserts)
/// never prints the summary.
fn run_gates(
    s: &Scratch<'_>,
    exe: &Path,
    run: &[String],
    progress: bool,
) -> Result<Verdict, ChainError> {
    let limits = s.limits;
    let cwd = s.dir.join("run");
    let _ = std::fs::remove_dir_all(&cwd);
    std::fs::create_dir_all(&cwd)
        .map_err(|e| ChainError::Verify(format!("cannot create {}: {e}", cwd.display())))?;
    let env = gate_env(s);
    let sandbox = |args: Vec<String>| {
        super::sandbox::run(exe, &args, &env, &cwd, limits).map_err(|e| {
            ChainError::Verify(format!("cannot run the gate tests {}: {e}", exe.display()))
        })
    };
    // listing runs no test code
    let list = sandbox(vec!["--list".into(), "--format".into(), "terse".into()])?;
    let wanted: Vec<String> = run.iter().map(|g| format!("gate_{g}::")).collect();
    let tests: Vec<String> = list
        .stdout
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .filter(|t| wanted.iter().any(|w| t.starts_with(w.as_str())))
        .map(str::to_string)
        .collect();
    if progress {
        crate::progress::line(&format!(
            "metainfer: verify: running {} gate tests, each in the sandbox ({} s wall, {} MiB; network {})",
            tests.len(),
            limits.wall.as_secs(),
            limits.data_mib,
            if list.network_isolated { "isolated" } else { "NOT isolated: no network namespace here" }
        ));
    }
    let (mut synthetic, mut log, mut why) = (String::new(), String::new(), BTreeMap::new());
    for (i, t) in tests.iter().enumerate() {
        if progress {
            crate::progress::line(&format!(
                "metainfer: verify: [{}/{}] gate {}",
                i + 1,
                tests.len(),
                t.trim_start_matches("gate_")
            ));
        }
        let r = sandbox(vec![
            t.clone(),
            "--exact".into(),
            "--nocapture".into(),
            "--test-threads=1".into(),
        ])?;
        let ok = r.test_passed();
        // the test's own lines, without libtest's (the status is ours)
        synthetic.push_str(&format!("test {t} ... \n"));
        for line in r.stdout.lines() {
            let line = line.strip_prefix(&format!("test {t} ... ")).unwrap_or(line);
            if !matches!(line.trim(), "ok" | "FAILED" | "ignored" | "")
                && !line.starts_with("running ")
                && !line.starts_with("test result:")
            {
                synthetic.push_str(line);
                synthetic.push('\n');
            }
        }
        synthetic.push_str(if ok { "ok\n" } else { "FAILED\n" });
        log.push_str(&format!(
            "---- {t} ({:.1} s) ----\n{}{}",
            r.wall.as_secs_f64(),
            r.stdout,
            r.stderr
        ));
        if !ok {
            let d = if r.success() {
                "exited with 0 but libtest did not report the test as passed (it ended early)"
                    .to_string()
            } else {
                r.describe(limits)
            };
            log.push_str(&format!("gate test {t}: FAILED: {d}\n"));
            let gate = t
                .trim_start_matches("gate_")
                .split("::")
                .next()
                .unwrap_or("")
                .to_string();
            why.entry(gate).or_insert(format!("{t}: {d}"));
        }
    }
    let mut gates = parse_gate_output(&synthetic, run);
    for g in gates.iter_mut().filter(|g| g.status == "fail") {
        if let Some(w) = why.remove(&g.id) {
            g.reason = Some(w);
        }
    }
    let passed = !tests.is_empty() && gates.iter().all(|g| g.status != "fail");
    Ok(Verdict {
        gates,
        passed,
        log: tail(&log, 12_000),
    })
}

/// The environment of a gate run: where the gate data is, the real model when asked for, and
/// where NVRTC is; nothing else of the caller's (no keys, no HOME).
fn gate_env(s: &Scratch<'_>) -> Vec<(String, std::ffi::OsString)> {
    let data = s.ckb.root.join("gates");
    let data = data.canonicalize().unwrap_or(data);
    let mut env = vec![
        ("METAINFER_GATE_DATA".to_string(), data.into_os_string()),
        ("RUST_BACKTRACE".to_string(), "0".into()),
    ];
    // Real-model gates run only when asked for: entries must not depend on what a machine has.
    if let Some(m) = crate::env::var_os("METAINFER_REAL_MODEL_GATE").filter(|m| !m.is_empty()) {
        // absolute, since the gate runs in its own directory
        let paths: Vec<PathBuf> = std::env::split_paths(&m)
            .map(|p| p.canonicalize().unwrap_or(p))
            .collect();
        if let Ok(joined) = std::env::join_paths(paths) {
            env.push(("METAINFER_REAL_MODEL".to_string(), joined));
        }
    }
    for k in ["METAINFER_NVRTC_LIB", "CUDA_PATH", "LD_LIBRARY_PATH"] {
        if let Some(v) = crate::env::var_os(k) {
            env.push((k.to_string(), v));
        }
    }
    env
}

/// What one `cargo test --no-run` of the scratch crate did.
struct CargoRun {
    success: bool,
    /// The test binary cargo built.
    executable: Option<PathBuf>,
    stderr: String,
}

/// Whether cargo failed because `--offline` kept it from a crate it does not have.
fn needs_network(stderr: &str) -> bool {
    stderr.contains("--offline") || stderr.contains("offline mode")
}

/// Builds the scratch crate's test binary (`cargo test --no-run`), reading cargo's output as
/// it comes so that progress (crates compiled) reaches the user during a long build. The build
/// has a wall-time limit, `s.compile_timeout` (`METAINFER_COMPILE_TIMEOUT_S`, default 1800):
/// past it, cargo and the compilers it started are killed (they run in a process group of
/// their own).
fn run_cargo(s: &Scratch<'_>, offline: bool, progress: bool) -> Result<CargoRun, ChainError> {
    use std::io::BufRead;
    use std::os::unix::process::CommandExt;
    let cargo = crate::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&s.dir)
        .args(["test", "--release", "--lib", "--no-run"])
        .args(["--message-format", "json-render-diagnostics"])
        .args(offline.then_some("--offline"))
        .env("CARGO_TARGET_DIR", &s.target_dir)
        .process_group(0)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    // The outer build's variables would confuse the inner cargo (jobserver, package identity);
    // the compiler needs no keys either.
    for k in crate::env::names() {
        let k = k.to_string_lossy().to_string();
        let keep = ["CARGO_HOME", "CARGO_NET_OFFLINE", "CARGO_TARGET_DIR"];
        if (k.starts_with("CARGO_") && !keep.contains(&k.as_str()))
            || k.starts_with("METAINFER_")
            || [
                "MAKEFLAGS",
                "MFLAGS",
                "RUSTC_WRAPPER",
                "RUSTC_WORKSPACE_WRAPPER",
            ]
            .contains(&k.as_str())
        {
            cmd.env_remove(&k);
        }
    }
    let limit = s.compile_timeout.as_secs();
    let mut child = cmd
        .spawn()
        .map_err(|e| ChainError::Verify(format!("cannot run cargo for the scratch crate: {e}")))?;
    let pgid = child.id();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let timed_out = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watchdog = {
        let (done, timed_out) = (done.clone(), timed_out.clone());
        std::thread::spawn(move || {
            let t0 = std::time::Instant::now();
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                if t0.elapsed().as_secs() > limit {
                    timed_out.store(true, std::sync::atomic::Ordering::Release);
                    let _ = Command::new("kill")
                        .args(["-9", "--", &format!("-{pgid}")])
                        .status();
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        })
    };
    let err_pipe = child.stderr.take().expect("stderr is piped");
    let err_thread = std::thread::spawn(move || {
        let mut text = String::new();
        let mut crates = 0usize;
        for line in std::io::BufReader::new(err_pipe)
            .lines()
            .map_while(Result::ok)
        {
            let t = line.trim_start();
            if let Some(what) = t.strip_prefix("Compiling ") {
                crates += 1;
                if progress && what.starts_with("metainfer-candidate-") {
                    crate::progress::line(&format!("metainfer: verify: compiling the candidate engine itself ({crates} crates so far)"));
                } else if progress && crates.is_multiple_of(20) {
                    crate::progress::line(&format!("metainfer: verify: compiled {crates} crates (dependencies of the candidate)"));
                }
            }
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    let t0 = std::time::Instant::now();
    let mut executable = None;
    for line in std::io::BufReader::new(child.stdout.take().expect("stdout is piped"))
        .lines()
        .map_while(Result::ok)
    {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if v["reason"] == "compiler-artifact" && v["profile"]["test"] == true {
            if let Some(exe) = v["executable"].as_str() {
                executable = Some(PathBuf::from(exe));
            }
        }
    }
    let status = child
        .wait()
        .map_err(|e| ChainError::Verify(format!("cargo for the scratch crate: {e}")))?;
    done.store(true, std::sync::atomic::Ordering::Release);
    let _ = watchdog.join();
    let mut stderr = err_thread.join().unwrap_or_default();
    if timed_out.load(std::sync::atomic::Ordering::Acquire) {
        stderr.push_str(&format!("\nmetainfer: the build passed its wall-time limit of {limit} s (METAINFER_COMPILE_TIMEOUT_S) and was killed\n"));
    } else if progress && executable.is_some() {
        crate::progress::line(&format!(
            "metainfer: verify: compiled in {:.0} s",
            t0.elapsed().as_secs_f64()
        ));
    }
    Ok(CargoRun {
        success: status.success() && !timed_out.load(std::sync::atomic::Ordering::Acquire),
        executable,
        stderr,
    })
}

fn tail(s: &str, n: usize) -> String {
    if s.len() <= n {
        return s.to_string();
    }
    let mut start = s.len() - n;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    s[start..].to_string()
}

fn write_if_changed(p: &Path, text: &str) -> Result<(), ChainError> {
    if std::fs::read_to_string(p).ok().as_deref() == Some(text) {
        return Ok(());
    }
    std::fs::write(p, text)
        .map_err(|e| ChainError::Verify(format!("cannot write {}: {e}", p.display())))
}

/// Reads the libtest output of `--nocapture --test-threads=1`: a `test gate_<id>::<fn> ... `
/// header, the test's own lines (`GATE <name> k=v …` among them), then its status (`ok`,
/// `FAILED`, `ignored`), either after the header or on a line of its own.
pub fn parse_gate_output(stdout: &str, gate_ids: &[String]) -> Vec<GateResult> {
    let mut results: BTreeMap<String, GateResult> = gate_ids
        .iter()
        .map(|g| {
            (
                g.clone(),
                GateResult {
                    id: g.clone(),
                    status: "fail".into(),
                    tests: BTreeMap::new(),
                    measured: BTreeMap::new(),
                    reason: None,
                },
            )
        })
        .collect();
    let is_status = |s: &str| matches!(s, "ok" | "FAILED" | "ignored");
    let mut current: Option<(String, String)> = None; // (gate id, test name)
    let record = |current: &Option<(String, String)>,
                  results: &mut BTreeMap<String, GateResult>,
                  text: &str| {
        let text = text.trim();
        let Some((gid, test)) = current else { return };
        let Some(r) = results.get_mut(gid) else {
            return;
        };
        if let Some(g) = text.strip_prefix("GATE ") {
            let (n, m) = parse_gate_line(g);
            r.measured.insert(n, m);
        } else if is_status(text) {
            r.tests.insert(test.clone(), text.to_string());
        }
    };
    for line in stdout.lines() {
        if let Some(t) = line.strip_prefix("test ") {
            let (name, after) = match t.split_once(" ... ") {
                Some((n, a)) => (n.trim(), a),
                None => (t.trim_end_matches("...").trim(), ""),
            };
            current = name
                .strip_prefix("gate_")
                .and_then(|n| n.split_once("::"))
                .map(|(gid, _)| (gid.to_string(), name.to_string()));
            record(&current, &mut results, after);
        } else {
            record(&current, &mut results, line);
        }
    }
    for r in results.values_mut() {
        let skipped =
            !r.measured.is_empty() && r.measured.values().all(|m| m.contains_key("skipped"));
        r.status = if r.tests.is_empty() || r.tests.values().any(|s| s != "ok") {
            "fail".into()
        } else if skipped {
            "skipped".into()
        } else {
            "pass".into()
        };
        if r.status == "skipped" {
            r.reason = r
                .measured
                .values()
                .find_map(|m| m.get("reason"))
                .and_then(|v| v.as_str().map(String::from));
        }
    }
    results.into_values().collect()
}

/// `GATE name a=1 b=2.5e-3 c="text" skipped` → (name, {a: 1, b: 0.0025, c: "text", skipped: true}).
fn parse_gate_line(line: &str) -> (String, BTreeMap<String, toml::Value>) {
    let body = line.trim_start_matches("GATE ").trim();
    let (name, mut rest) = body.split_once(' ').unwrap_or((body, ""));
    let mut m = BTreeMap::new();
    while !rest.trim().is_empty() {
        rest = rest.trim_start();
        let end_key = rest
            .find(|c: char| c == '=' || c.is_whitespace())
            .unwrap_or(rest.len());
        let key = rest[..end_key].to_string();
        rest = &rest[end_key..];
        if let Some(r) = rest.strip_prefix('=') {
            let (val, after) = if let Some(q) = r.strip_prefix('"') {
                let close = q.find('"').unwrap_or(q.len());
                (
                    toml::Value::String(q[..close].to_string()),
                    q.get(close + 1..).unwrap_or(""),
                )
            } else {
                let end = r.find(char::is_whitespace).unwrap_or(r.len());
                let v = &r[..end];
                let val = v
                    .parse::<i64>()
                    .map(toml::Value::Integer)
                    .or_else(|_| v.parse::<f64>().map(toml::Value::Float))
                    .unwrap_or_else(|_| toml::Value::String(v.to_string()));
                (val, &r[end..])
            };
            m.insert(key, val);
            rest = after;
        } else {
            m.insert(key, toml::Value::Boolean(true));
        }
    }
    (name.to_string(), m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gate_lines_are_attributed_to_their_tests() {
        let out = "running 3 tests\n\
                   test gate_kernels::dots ... GATE kernel_q4_k max_abs_err=1.5e-6 cases=12\n\
                   ok\n\
                   test gate_e2e_tiny::logits ... GATE e2e_tiny max_abs=0.01 top1=8\n\
                   FAILED\n\
                   test gate_greedy_real::greedy ... GATE greedy_real skipped reason=\"no model file\"\n\
                   ok\n";
        let r = parse_gate_output(
            out,
            &["kernels".into(), "e2e_tiny".into(), "greedy_real".into()],
        );
        let by: BTreeMap<_, _> = r.iter().map(|g| (g.id.as_str(), g)).collect();
        assert_eq!(by["kernels"].status, "pass");
        assert_eq!(
            by["kernels"].measured["kernel_q4_k"]["cases"],
            toml::Value::Integer(12)
        );
        assert_eq!(by["e2e_tiny"].status, "fail");
        assert_eq!(by["greedy_real"].status, "skipped");
        assert_eq!(by["greedy_real"].reason.as_deref(), Some("no model file"));
    }

    #[test]
    fn a_gate_that_printed_nothing_and_ran_no_test_fails() {
        let r = parse_gate_output("running 0 tests\n", &["kernels".into()]);
        assert_eq!(r[0].status, "fail");
    }
}
