//! The error of the generator's entry points ([`crate::ensure()`], [`crate::Engine::emit`], the
//! macro): every lower-level error, plus the ones that only a whole build can hit.

use crate::cache::CacheError;
use crate::chain::ChainError;
use crate::ckb::CkbError;
use crate::constraints::ConstraintError;
use crate::mode::ModeError;

pub use crate::feature::FeatureOff;

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Ckb(#[from] CkbError),
    #[error(transparent)]
    Constraint(#[from] ConstraintError),
    #[error(transparent)]
    Mode(#[from] ModeError),
    #[error(transparent)]
    Cache(#[from] CacheError),
    #[error("generating engine {key} ({summary}) failed: {source}")]
    Chain {
        key: String,
        summary: String,
        /// Boxed: the chain's errors are large, and every `Result<_, BuildError>` would carry them.
        source: Box<ChainError>,
    },
    /// A miss while generation is off.
    #[error("no cache entry for engine {key} ({summary}), and generating one is off ({reason}); searched: {}; fix: run `cargo metainfer prepare` in this workspace where generation is allowed (no `cargo metainfer`? install it: {}), or build once with METAINFER_MODE unset (or auto) and CARGO_NET_OFFLINE unset; then commit the new entry {}/{key}/", .searched.join(", "), crate::error::cli_install_command(), .searched.first().map(String::as_str).unwrap_or("cache"))]
    OfflineMiss {
        key: String,
        summary: String,
        reason: String,
        searched: Vec<String>,
    },
    /// The chain produced a candidate that failed its gates; nothing was written.
    #[error("engine {key} ({summary}) failed its gates, so nothing was written to the cache{}; gate report:\n{report}", .kept.as_ref().map(|k| format!(" (the candidate is kept in {k} for inspection)")).unwrap_or_default())]
    GatesFailed {
        key: String,
        summary: String,
        report: String,
        kept: Option<String>,
    },
    /// A build-script-only requirement is missing.
    #[error("cache entry {dir}: {problems}; the entry was written under an older policy or edited since: delete it and run `cargo metainfer prepare` to generate it again")]
    Policy { dir: String, problems: String },
    #[error("{var} is not set: {why}")]
    Env {
        var: &'static str,
        why: &'static str,
    },
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: String,
        source: std::io::Error,
    },
    #[error("engine name `{name}` is not a rust identifier; use a type name such as `Coder`")]
    BadName { name: String },
    /// Context for an error of one named engine (build.rs).
    #[error("engine `{name}`: {source}")]
    InEngine {
        name: String,
        source: Box<BuildError>,
    },
}

/// The command that installs `cargo metainfer` from the checkout this generator was built
/// from, so that every hint works where the user is.
pub fn cli_install_command() -> String {
    let cli = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("metainfer-cli");
    let cli = std::fs::canonicalize(&cli).unwrap_or(cli);
    format!("`cargo install --path {}`", cli.display())
}
