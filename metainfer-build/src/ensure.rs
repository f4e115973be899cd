//! `ensure`: the one path every entry point takes from constraints to a verified cache entry:
//! lookup, and on a miss (or in refresh mode) the chain, then an atomic cache write.

use crate::cache::{Cache, Entry};
use crate::chain::{self, Candidate, ChainError, ChainOptions};
use crate::ckb::Ckb;
use crate::constraints::Constraints;
use crate::error::BuildError;
use crate::mode::{Mode, ModeSetting};
use crate::workspace::{current_workspace_root, display_path};
use std::path::{Path, PathBuf};

/// Where and how a build looks up and generates engines.
#[derive(Debug, Clone)]
pub struct BuildContext {
    pub workspace_root: PathBuf,
    pub cache: Cache,
    pub mode: ModeSetting,
    /// Where the chain builds candidates (its own target dir) and keeps failed ones.
    pub scratch_dir: PathBuf,
    /// Progress lines on stderr while generating.
    pub progress: bool,
}

impl BuildContext {
    /// For the crate being built (its `CARGO_MANIFEST_DIR`), with the mode and cache directory
    /// from the environment.
    pub fn from_env() -> Result<BuildContext, BuildError> {
        BuildContext::for_workspace(&current_workspace_root())
    }

    /// For the workspace at `root`, with the mode and cache directory from the environment.
    pub fn for_workspace(root: &Path) -> Result<BuildContext, BuildError> {
        let target = match crate::env::path("CARGO_TARGET_DIR") {
            Some(d) => crate::workspace::resolve(&d, root),
            None => root.join("target"),
        };
        Ok(BuildContext {
            workspace_root: root.to_path_buf(),
            cache: Cache::from_env(root),
            mode: ModeSetting::from_env()?,
            scratch_dir: target.join("metainfer"),
            progress: true,
        })
    }

    /// The same context in `mode` (the CLI's `prepare` generates regardless of the env).
    pub fn with_mode(mut self, mode: Mode, reason: &str) -> BuildContext {
        self.mode = ModeSetting {
            mode,
            reason: reason.to_string(),
        };
        self
    }

    /// Options for the chain, with the LLM endpoint and budget from the environment
    /// (`METAINFER_LLM_*`; see [`crate::llm::LlmConfig::from_env`]). A badly set variable is an
    /// error here, when generating, never on a cache hit.
    pub fn chain_options(&self) -> Result<ChainOptions, ChainError> {
        let mut o = ChainOptions::new(
            self.workspace_root.clone(),
            self.scratch_dir.clone(),
            self.progress,
        );
        o.llm = crate::llm::LlmConfig::from_env().map_err(|e| ChainError::Llm(e.to_string()))?;
        o.budget = chain::llm_fill::LlmBudget::from_env()?;
        o.llm_review = crate::env::flag("METAINFER_LLM_REVIEW")?;
        o.gate_limits = chain::sandbox::Limits::gate_from_env()?;
        o.compile_timeout = std::time::Duration::from_secs(crate::env::positive(
            "METAINFER_COMPILE_TIMEOUT_S",
            chain::COMPILE_TIMEOUT_S,
        )?);
        Ok(o)
    }
}

/// The verified entry for `c`: a cache hit, or (mode permitting) a freshly generated entry
/// whose gates passed, written atomically. In `auto` mode a stale hit is used as is;
/// `cargo metainfer prepare` regenerates it.
pub fn ensure(c: &Constraints, ckb: &Ckb, ctx: &BuildContext) -> Result<Entry, BuildError> {
    ensure_with(c, ckb, ctx, || {
        if let Some(off) = feature_needed(c, ckb)? {
            return Err(ChainError::FeatureOff(off));
        }
        chain::run(c, ckb, &ctx.chain_options()?)
    })
}

/// A cargo feature that generating `c` needs and this build of the generator lacks: the LLM
/// client for `generator = "llm"` (or `"auto"` where the ckb leaves gaps), NVRTC for a cuda
/// `hw`. A cache hit needs neither, so this is checked only before generating.
pub fn feature_needed(
    c: &Constraints,
    ckb: &Ckb,
) -> Result<Option<crate::feature::FeatureOff>, ChainError> {
    use crate::constraints::Generator;
    if !cfg!(feature = "llm") && c.generator != Generator::Ckb {
        let gaps = chain::llm_slots(c, ckb)?;
        if !gaps.is_empty() {
            return Ok(Some(crate::feature::FeatureOff::llm(format!(
                "generator = \"{}\" asks an llm for slot(s) {}, and the llm client (ureq with TLS) is built only with the `llm` feature",
                c.generator.as_str(),
                gaps.join(", ")
            ))));
        }
    }
    if !cfg!(feature = "cuda") && ckb.target_kind(&c.hw) == Some(crate::ckb::TargetKind::Cuda) {
        return Ok(Some(crate::feature::FeatureOff::cuda(format!(
            "hw = \"{}\" compiles its kernels with NVRTC, which is loaded only with the `cuda` feature",
            c.hw
        ))));
    }
    Ok(None)
}

/// [`ensure`] with the generator given (tests stand in for the chain).
pub fn ensure_with(
    c: &Constraints,
    ckb: &Ckb,
    ctx: &BuildContext,
    generate: impl FnOnce() -> Result<Candidate, ChainError>,
) -> Result<Entry, BuildError> {
    let key = c.key();
    let mode = ctx.mode.mode;
    if mode != Mode::Refresh {
        if let Some(entry) = ctx.cache.lookup(c)? {
            // LLM-written code cannot be re-derived: it meets the policy again on every hit
            if crate::chain::provenance::needs_policy_on_hit(&entry, ckb) {
                if let Err(problems) = crate::chain::provenance::check(&entry, ckb) {
                    return Err(BuildError::Policy {
                        dir: display_path(&entry.dir, &ctx.workspace_root),
                        problems,
                    });
                }
            }
            return Ok(entry);
        }
    }
    if mode == Mode::Offline {
        return Err(BuildError::OfflineMiss {
            key,
            summary: c.summary(),
            reason: ctx.mode.reason.clone(),
            searched: vec![ctx.cache.shown()],
        });
    }
    if ctx.progress {
        crate::progress::line(&format!(
            "metainfer: generating engine {key} for {} ({} implementer); this takes a minute \
             or more (about 75 s on 2 cores: the candidate compiles in release mode, then its gates \
             run); later builds use the cache entry",
            c.summary(),
            c.generator.as_str()
        ));
    }
    let candidate = generate().map_err(|source| BuildError::Chain {
        key: key.clone(),
        summary: c.summary(),
        source: Box::new(source),
    })?;
    if !candidate.gates_passed {
        let report = candidate
            .files
            .get("gates.toml")
            .map(|g| String::from_utf8_lossy(g).into_owned())
            .unwrap_or_else(|| "(the candidate has no gates.toml)".to_string());
        let kept = keep_failed(ctx, &key, &candidate);
        return Err(BuildError::GatesFailed {
            key,
            summary: c.summary(),
            report,
            kept,
        });
    }
    let digest = ckb.digest();
    let entry = if mode == Mode::Refresh {
        ctx.cache.replace(c, &digest, &candidate)?
    } else {
        ctx.cache.write(c, &digest, &candidate)?
    };
    if ctx.progress {
        crate::progress::line(&format!(
            "metainfer: wrote {}",
            display_path(&entry.dir, &ctx.workspace_root)
        ));
    }
    Ok(entry)
}

/// Saves a failed candidate under `<scratch>/failed/<key>/` (best effort) and says where.
fn keep_failed(ctx: &BuildContext, key: &str, candidate: &Candidate) -> Option<String> {
    let dir = ctx.scratch_dir.join("failed").join(key);
    let _ = std::fs::remove_dir_all(&dir);
    for (name, bytes) in &candidate.files {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent()?).ok()?;
        std::fs::write(&p, bytes).ok()?;
    }
    Some(display_path(&dir, &ctx.workspace_root))
}
