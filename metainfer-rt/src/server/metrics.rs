//! `GET /metrics`: the server's counters in Prometheus' text format (version 0.0.4), as vLLM's
//! and llama.cpp's servers expose theirs, for dashboards and alerts over a running server.

use super::Shared;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// How a generation request (`/v1/chat/completions`, `/v1/completions`) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Answered in full.
    Ok,
    /// The client left, or the server shut down, before the reply was complete.
    Cancelled,
    /// Refused for load: 429 (`max_concurrent`) or 503 (`max_connections`).
    Rejected,
    /// Any other error status: a bad request (4xx), an engine failure (500).
    Error,
}

/// The counters; every field only grows.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    outcomes: [AtomicU64; 4],
    prompt_tokens: AtomicU64,
    generated_tokens: AtomicU64,
    prefill_us: AtomicU64,
    decode_us: AtomicU64,
}

impl Metrics {
    pub(crate) fn request(&self, o: Outcome) {
        self.outcomes[o as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// A generation the engine ran (finished or cancelled): its tokens and time.
    pub(crate) fn generation(
        &self,
        prompt: usize,
        generated: usize,
        prefill_s: f64,
        decode_s: f64,
    ) {
        let add = |c: &AtomicU64, n: u64| c.fetch_add(n, Ordering::Relaxed);
        add(&self.prompt_tokens, prompt as u64);
        add(&self.generated_tokens, generated as u64);
        add(&self.prefill_us, (prefill_s.max(0.0) * 1e6) as u64);
        add(&self.decode_us, (decode_s.max(0.0) * 1e6) as u64);
    }
}

/// A label value with `\`, `"` and newlines escaped.
fn label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A family's `# HELP` and `# TYPE` lines.
fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = write!(
        out,
        "# HELP metainfer_{name} {help}\n# TYPE metainfer_{name} {kind}\n"
    );
}

/// The exposition text.
pub(crate) fn render(shared: &Shared) -> String {
    let m = &shared.metrics;
    let model = format!("model=\"{}\"", label(&shared.model_id));
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let secs = |c: &AtomicU64| get(c) as f64 / 1e6;
    let mut out = String::new();
    family(
        &mut out,
        "requests_total",
        "counter",
        "Generation requests answered, by outcome (ok; cancelled: the client left; rejected: 429/503 for load; error: any other error status).",
    );
    for (i, o) in ["ok", "cancelled", "rejected", "error"].iter().enumerate() {
        let n = get(&m.outcomes[i]);
        let _ = writeln!(
            out,
            "metainfer_requests_total{{{model},outcome=\"{o}\"}} {n}"
        );
    }
    let load = |c: &std::sync::atomic::AtomicUsize| c.load(Ordering::Relaxed) as f64;
    let series = [
        (
            "prompt_tokens_total",
            "counter",
            "Prompt tokens the engine read.",
            get(&m.prompt_tokens) as f64,
        ),
        (
            "generated_tokens_total",
            "counter",
            "Tokens the engine generated.",
            get(&m.generated_tokens) as f64,
        ),
        (
            "prefill_seconds_total",
            "counter",
            "Seconds spent reading prompts.",
            secs(&m.prefill_us),
        ),
        (
            "decode_seconds_total",
            "counter",
            "Seconds spent generating after the prompts.",
            secs(&m.decode_us),
        ),
        (
            "requests_admitted",
            "gauge",
            "Generation requests running or waiting for the engine (at most max_concurrent).",
            load(&shared.admitted),
        ),
        (
            "connections_open",
            "gauge",
            "Open client connections.",
            load(&shared.connections),
        ),
        (
            "context_length",
            "gauge",
            "The model's context length in tokens.",
            shared.max_seq as f64,
        ),
    ];
    for (name, kind, help, v) in series {
        family(&mut out, name, kind, help);
        let _ = writeln!(out, "metainfer_{name}{{{model}}} {v}");
    }
    out
}
