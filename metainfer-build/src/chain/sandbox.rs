//! The sandbox the verifier runs candidate code in (the gate tests of an engine whose sections
//! may have come from an LLM).
//!
//! Each run gets: a wall-time limit (the process is killed when it passes), rlimits on CPU time,
//! data memory (heap and anonymous mappings: `ulimit -d`, which a read-only model mapping does
//! not count against), file size and core dumps; stdout and stderr capped (the process is killed
//! when it writes more); an environment holding only what the caller passes (no
//! `METAINFER_LLM_API_KEY`, no `HOME` of the user: `HOME` and `TMPDIR` are the scratch
//! directory it runs in); and no network: a new network namespace (`unshare -n`, with loopback
//! up for the server gate) where the OS allows it. Where it does not (no `unshare`, no
//! privilege for namespaces) the run goes ahead without one and [`Run::network_isolated`] says
//! so; the code policy already refuses `std::net` and `rt::server` outside the server section.
//!
//! The limits are set by `sh -c 'ulimit …; exec "$0" "$@"'`, so the program itself is what the
//! limits and the kill apply to; `sh`, `unshare` and `ip` are looked up in the system
//! directories only.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// The limits of one sandboxed run.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Wall time before the process is killed.
    pub wall: Duration,
    /// CPU seconds (all threads together) before the kernel stops it (SIGXCPU).
    pub cpu_s: u64,
    /// Heap and anonymous memory, MiB.
    pub data_mib: u64,
    /// Largest file it may write, MiB.
    pub file_mib: u64,
    /// Bytes of stdout and of stderr kept; writing more kills it.
    pub output_bytes: usize,
}

impl Limits {
    /// Default wall seconds per gate test.
    pub const GATE_WALL_S: u64 = 600;
    /// Default data memory of a gate test, MiB.
    pub const GATE_DATA_MIB: u64 = 16384;

    /// The gate-run limits: `wall_s` wall seconds per gate test, CPU time of that many
    /// seconds on every core, `data_mib` of data memory, 256 MiB files, 4 MiB of each output
    /// stream.
    pub fn gate(wall_s: u64, data_mib: u64) -> Limits {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
        Limits {
            wall: Duration::from_secs(wall_s),
            cpu_s: wall_s * cores,
            data_mib,
            file_mib: 256,
            output_bytes: 4 << 20,
        }
    }

    /// [`Limits::gate`] with `METAINFER_GATE_TIMEOUT_S` and `METAINFER_GATE_MEMORY_MIB`, or
    /// the defaults where unset.
    pub fn gate_from_env() -> Result<Limits, crate::env::EnvError> {
        Ok(Limits::gate(
            crate::env::positive("METAINFER_GATE_TIMEOUT_S", Self::GATE_WALL_S)?,
            crate::env::positive("METAINFER_GATE_MEMORY_MIB", Self::GATE_DATA_MIB)?,
        ))
    }
}

/// How a sandboxed run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It exited with this code.
    Exited(i32),
    /// A signal ended it (SIGXCPU: the CPU limit; SIGABRT: often a failed allocation).
    Signaled(i32),
    /// It passed the wall-time limit and was killed.
    TimedOut,
    /// It wrote more than the output cap and was killed.
    OutputCapped,
}

/// What a sandboxed run did.
#[derive(Debug, Clone)]
pub struct Run {
    pub outcome: Outcome,
    pub stdout: String,
    pub stderr: String,
    pub wall: Duration,
    /// Whether it ran in a network namespace of its own.
    pub network_isolated: bool,
}

impl Run {
    /// Whether it exited with code 0.
    pub fn success(&self) -> bool {
        self.outcome == Outcome::Exited(0)
    }

    /// Whether a libtest binary run for one test (`NAME --exact`) passed that test: it exited
    /// with 0 and libtest's own summary says one test passed. Output the test's code wrote
    /// cannot stand in for the exit status, and a process that ends early (`exit(0)` before
    /// the asserts) never prints the summary.
    pub fn test_passed(&self) -> bool {
        self.success()
            && self
                .stdout
                .lines()
                .any(|l| l.starts_with("test result: ok. 1 passed;"))
    }

    /// Why it did not succeed, in words (limits named with the setting that raises them).
    pub fn describe(&self, l: &Limits) -> String {
        match &self.outcome {
            Outcome::Exited(0) => "exited normally".into(),
            Outcome::Exited(c) => format!("exited with code {c}"),
            Outcome::TimedOut => format!(
                "timed out: still running after {} s, the wall-time limit (METAINFER_GATE_TIMEOUT_S)",
                l.wall.as_secs()
            ),
            Outcome::OutputCapped => format!(
                "killed: wrote more than {} bytes to stdout or stderr (the output cap)",
                l.output_bytes
            ),
            Outcome::Signaled(24) => format!(
                "stopped by the CPU-time limit ({} s of CPU; METAINFER_GATE_TIMEOUT_S)",
                l.cpu_s
            ),
            Outcome::Signaled(25) => format!("stopped: wrote a file larger than {} MiB", l.file_mib),
            Outcome::Signaled(s) if self.stderr.contains("memory allocation of") => format!(
                "stopped by the memory limit ({} MiB; METAINFER_GATE_MEMORY_MIB): an allocation failed (signal {s})",
                l.data_mib
            ),
            Outcome::Signaled(s) => format!("killed by signal {s}"),
        }
    }
}

const SYSTEM_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

fn system_tool(name: &str) -> Option<PathBuf> {
    SYSTEM_PATH
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

/// How to enter a network namespace here: `unshare -n` (root or CAP_SYS_ADMIN), else
/// `unshare -rn` (unprivileged user namespaces), else none; probed once.
fn netns_prefix() -> &'static Option<Vec<OsString>> {
    static P: OnceLock<Option<Vec<OsString>>> = OnceLock::new();
    P.get_or_init(|| {
        let unshare = system_tool("unshare")?;
        let t = system_tool("true")?;
        for flags in [["-n"].as_slice(), ["-r", "-n"].as_slice()] {
            let ok = Command::new(&unshare)
                .args(flags)
                .arg("--")
                .arg(&t)
                .env_clear()
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                let mut v = vec![unshare.into_os_string()];
                v.extend(flags.iter().map(OsString::from));
                v.push("--".into());
                return Some(v);
            }
        }
        None
    })
}

/// Runs `program args` in `cwd` under `limits`, with exactly the environment `env` (plus a
/// system `PATH`, and `HOME` / `TMPDIR` = `cwd`).
pub fn run(
    program: &Path,
    args: &[String],
    env: &[(String, OsString)],
    cwd: &Path,
    limits: &Limits,
) -> std::io::Result<Run> {
    let sh = system_tool("sh").unwrap_or_else(|| PathBuf::from("/bin/sh"));
    let script = format!(
        "ulimit -c 0; ulimit -t {cpu} || exit 125; ulimit -d {data} || exit 125; ulimit -f {file} || exit 125; \
         [ -n \"$METAINFER_SANDBOX_LO\" ] && ip link set lo up 2>/dev/null; unset METAINFER_SANDBOX_LO; exec \"$0\" \"$@\"",
        cpu = limits.cpu_s.max(1),
        data = limits.data_mib * 1024,
        // dash counts ulimit -f in 512-byte blocks
        file = limits.file_mib * 2048,
    );
    let prefix = netns_prefix();
    let mut cmd = match prefix {
        Some(p) => {
            let mut c = Command::new(&p[0]);
            c.args(&p[1..]).arg(&sh);
            c
        }
        None => Command::new(&sh),
    };
    cmd.arg("-c")
        .arg(script)
        .arg(program)
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", SYSTEM_PATH)
        .env("HOME", cwd)
        .env("TMPDIR", cwd)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if prefix.is_some() {
        cmd.env("METAINFER_SANDBOX_LO", "1");
    }
    let t0 = Instant::now();
    let mut child = cmd.spawn()?;
    let capped = Arc::new(AtomicBool::new(false));
    let reader = |pipe: Option<Box<dyn Read + Send>>, cap: usize, capped: Arc<AtomicBool>| {
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            let Some(mut pipe) = pipe else { return kept };
            let mut buf = [0u8; 8192];
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) if kept.len() + n > cap => {
                        kept.extend_from_slice(&buf[..cap - kept.len()]);
                        capped.store(true, Ordering::Release);
                        break;
                    }
                    Ok(n) => kept.extend_from_slice(&buf[..n]),
                }
            }
            kept
        })
    };
    let out = reader(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
        limits.output_bytes,
        capped.clone(),
    );
    let err = reader(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
        limits.output_bytes,
        capped.clone(),
    );
    let outcome = loop {
        if let Some(status) = child.try_wait()? {
            use std::os::unix::process::ExitStatusExt;
            if capped.load(Ordering::Acquire) {
                // it wrote past the cap (and may have died of the closed pipe)
                break Outcome::OutputCapped;
            }
            break match (status.code(), status.signal()) {
                (Some(c), _) => Outcome::Exited(c),
                (None, Some(s)) => Outcome::Signaled(s),
                (None, None) => Outcome::Signaled(0),
            };
        }
        if capped.load(Ordering::Acquire) {
            let _ = child.kill();
            let _ = child.wait();
            break Outcome::OutputCapped;
        }
        if t0.elapsed() > limits.wall {
            let _ = child.kill();
            let _ = child.wait();
            break Outcome::TimedOut;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let text = |h: std::thread::JoinHandle<Vec<u8>>| {
        String::from_utf8_lossy(&h.join().unwrap_or_default()).into_owned()
    };
    Ok(Run {
        outcome,
        stdout: text(out),
        stderr: text(err),
        wall: t0.elapsed(),
        network_isolated: prefix.is_some(),
    })
}
