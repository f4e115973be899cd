//! `cargo metainfer`: prepare, check, vendor and inspect the engine cache of any workspace, and
//! check the CKB. Install it with `cargo install --path metainfer-cli` (from a metainfer
//! checkout); cargo then runs it for `cargo metainfer …` in any directory.
//!
//! ```text
//! cargo metainfer prepare            generate every engine the workspace references that is missing or stale
//! cargo metainfer prepare --refresh  regenerate all of them
//! cargo metainfer prepare --check    fail on missing, stale or tampered entries (no generation, no network)
//! cargo metainfer vendor DIR [KEY…]  copy entries (default: every referenced one), verified
//! cargo metainfer ls                 entries: key, constraints, status
//! cargo metainfer show KEY           an entry's manifest and gate report
//! cargo metainfer verify KEY         re-run an entry's gates, record the result
//! cargo metainfer ckb check          load the CKB and check its referential integrity
//! ```
//!
//! The workspace is the outermost cargo workspace around the current directory (every member
//! crate's sources and build scripts are scanned for engines); its cache is `<workspace>/cache`
//! unless `METAINFER_CACHE_DIR` says otherwise, the same directory the macro and build.rs use.

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use metainfer_build::cache::{Cache, CacheError, Entry};
use metainfer_build::scan::{scan_workspace, Reference};
use metainfer_build::workspace::{display_path, workspace_root};
use metainfer_build::{chain, ensure, BuildContext, Ckb, Constraints, Mode};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `println!` that ignores a closed stdout (`cargo metainfer show KEY | head`).
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

/// `print!` that ignores a closed stdout.
macro_rules! out_raw {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($t)*);
    }};
}

#[derive(Parser)]
#[command(
    name = "cargo-metainfer",
    bin_name = "cargo metainfer",
    version,
    about = "Prepare, check and inspect MetaInfer engine caches"
)]
struct Cli {
    /// The workspace [default: the outermost cargo workspace around the current directory].
    #[arg(long, global = true, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// The CKB [default: $METAINFER_CKB_DIR, else the ckb/ of the metainfer checkout this was built from].
    #[arg(long, global = true, value_name = "DIR")]
    ckb: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Generate every engine the workspace references that is missing or stale.
    Prepare {
        /// Only check: fail on missing, stale or tampered entries; generate nothing.
        #[arg(long, conflicts_with = "refresh")]
        check: bool,
        /// Regenerate every referenced engine, including current and tampered ones.
        #[arg(long)]
        refresh: bool,
    },
    /// Copy verified entries into DIR (as a cache directory: `DIR/<key>/`).
    Vendor {
        dir: PathBuf,
        /// Keys or unique key prefixes [default: every engine the workspace references].
        keys: Vec<String>,
    },
    /// List the cache's entries.
    Ls,
    /// Print an entry's manifest and gate report.
    Show { key: String },
    /// Re-run an entry's gates; rewrite its gates.toml (and manifest) if the result changed.
    Verify { key: String },
    /// Check source files against a contract's code policy (the allowlist the chain's reviewer
    /// applies to every section), and with --interface against its interface; prints each
    /// problem with its line and exits 1 when there is any.
    Review {
        /// The contract whose allowlist (and interface) applies, e.g. `dot_q4_k`.
        #[arg(long, value_name = "ID")]
        contract: String,
        /// Also check that the files define the contract's interface items.
        #[arg(long)]
        interface: bool,
        /// Rust files, each reviewed as one section.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Work with the CKB.
    Ckb {
        #[command(subcommand)]
        cmd: CkbCmd,
    },
}

#[derive(Subcommand)]
enum CkbCmd {
    /// Load every file and check referential integrity.
    Check,
    /// List what the CKB knows: model families (with their presets), targets, quants, contracts.
    Ls,
    /// List the proposals under ckb/proposals/ (LLM realizations that passed their gates).
    Proposals,
    /// Promote a proposal into the CKB: `<contract>/<dir>` as `ckb proposals` lists it, or its path.
    Adopt { proposal: String },
}

fn main() -> ExitCode {
    // `cargo metainfer X` runs `cargo-metainfer metainfer X`; `cargo-metainfer X` works too.
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "metainfer") {
        args.remove(1);
    }
    let cli = Cli::parse_from(args);
    match run(cli) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

struct Env {
    ws: PathBuf,
    ckb_root: PathBuf,
    cache: Cache,
}

impl Env {
    fn ckb(&self) -> anyhow::Result<Ckb> {
        Ok(Ckb::load(&self.ckb_root)?)
    }
    fn show(&self, p: &Path) -> String {
        display_path(p, &self.ws)
    }
    fn context(&self) -> anyhow::Result<BuildContext> {
        Ok(BuildContext::for_workspace(&self.ws)?)
    }
}

/// `Ok(false)`: problems were printed, exit nonzero.
fn run(cli: Cli) -> anyhow::Result<bool> {
    let ws = match cli.workspace {
        Some(w) => {
            std::fs::canonicalize(&w).with_context(|| format!("workspace {}", w.display()))?
        }
        None => workspace_root(&std::env::current_dir()?),
    };
    let ckb_root = cli.ckb.unwrap_or_else(Ckb::default_root);
    let env = Env {
        cache: Cache::from_env(&ws),
        ws,
        ckb_root,
    };
    match cli.cmd {
        Cmd::Prepare { check: true, .. } => prepare_check(&env),
        Cmd::Prepare { refresh, .. } => prepare(&env, refresh),
        Cmd::Vendor { dir, keys } => vendor(&env, &dir, &keys),
        Cmd::Ls => ls(&env),
        Cmd::Show { key } => show(&env, &key),
        Cmd::Verify { key } => verify(&env, &key),
        Cmd::Review {
            contract,
            interface,
            files,
        } => review(&env, &contract, interface, &files),
        Cmd::Ckb { cmd: CkbCmd::Check } => ckb_check(&env),
        Cmd::Ckb { cmd: CkbCmd::Ls } => ckb_ls(&env),
        Cmd::Ckb {
            cmd: CkbCmd::Proposals,
        } => ckb_proposals(&env),
        Cmd::Ckb {
            cmd: CkbCmd::Adopt { proposal },
        } => ckb_adopt(&env, &proposal),
    }
}

fn review(env: &Env, contract: &str, interface: bool, files: &[PathBuf]) -> anyhow::Result<bool> {
    let ckb = env.ckb()?;
    let Some(c) = ckb.contracts.get(contract) else {
        let mut ids: Vec<&str> = ckb.contracts.keys().map(String::as_str).collect();
        ids.sort();
        bail!(
            "no contract `{contract}` in {}; contracts: {}",
            env.show(&env.ckb_root),
            ids.join(", ")
        );
    };
    let mut sources = Vec::new();
    for f in files {
        let code =
            std::fs::read_to_string(f).with_context(|| format!("cannot read {}", f.display()))?;
        sources.push((f.display().to_string(), code));
    }
    let problems = chain::review::review_files(&sources, c, interface);
    for p in &problems {
        match p.line {
            Some(l) => out!("{}:{l}: {}", p.slot, p.message),
            None => out!("{}: {}", p.slot, p.message),
        }
    }
    if problems.is_empty() {
        let what = if interface {
            "policy and interface"
        } else {
            "policy"
        };
        out!(
            "metainfer review: {} file(s) pass the {what} of contract {contract}",
            files.len()
        );
    }
    Ok(problems.is_empty())
}

/// The values `model`, `hw` and `quant` take with this CKB, and its contracts.
fn ckb_ls(env: &Env) -> anyhow::Result<bool> {
    let ckb = env.ckb()?;
    out!("model families (model = \"<family>\" reads dims from the file; a preset bakes them in):");
    for (id, m) in &ckb.models {
        let presets: Vec<&str> = m.presets.iter().map(|p| p.name.as_str()).collect();
        let presets = if presets.is_empty() {
            String::new()
        } else {
            format!("; presets: {}", presets.join(", "))
        };
        out!("  {id:<10} GGUF architecture {:?}{presets}", m.gguf_arch);
    }
    out!("targets (hw = \"<target>\", or \"native\"):");
    for (id, t) in &ckb.targets {
        out!("  {id:<14} {}", t.summary);
    }
    // quant = takes quantizations of whole files; the others are tensor types inside them
    let (files, types): (Vec<_>, Vec<_>) = ckb.quants.values().partition(|q| Ckb::is_file_quant(q));
    let ids = |v: &[&metainfer_build::ckb::schema::Quant]| {
        v.iter()
            .map(|q| q.id.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    out!("quants (quant = \"<quant>\"): {}", ids(&files));
    out!("tensor types inside them: {}", ids(&types));
    let contracts: Vec<&str> = ckb.contracts.keys().map(String::as_str).collect();
    out!("contracts ({}): {}", contracts.len(), contracts.join(", "));
    Ok(true)
}

fn ckb_proposals(env: &Env) -> anyhow::Result<bool> {
    let all = metainfer_build::chain::adopt::list(&env.ckb_root);
    if all.is_empty() {
        out!(
            "metainfer: no proposals in {}",
            env.show(&env.ckb_root.join("proposals"))
        );
    }
    for (id, p) in all {
        match p {
            Ok(p) => {
                let gates: Vec<String> = p
                    .gate
                    .iter()
                    .map(|g| format!("{} {}", g.id, g.status))
                    .collect();
                out!(
                    "{id}  contract {} v{} for {} by {} in {} round(s); gates: {}",
                    p.contract,
                    p.contract_version,
                    p.target,
                    p.model.as_deref().unwrap_or("llm"),
                    p.rounds,
                    gates.join(", ")
                );
            }
            Err(e) => out!("{id}  unreadable: {e}"),
        }
    }
    Ok(true)
}

fn ckb_adopt(env: &Env, which: &str) -> anyhow::Result<bool> {
    let a =
        metainfer_build::chain::adopt::adopt(&env.ckb_root, which).map_err(anyhow::Error::msg)?;
    out!(
        "metainfer: adopted {}/{}: wrote {} and a [[realizations]] entry in {}",
        a.contract,
        a.variant,
        env.show(&a.realization),
        env.show(&a.contract_file)
    );
    out!("metainfer: the ckb digest changed, so cache entries are stale; run `cargo metainfer prepare` to regenerate them");
    Ok(true)
}

/// One engine the workspace references, with every place that references it.
struct Wanted {
    c: Constraints,
    refs: Vec<Reference>,
}

impl Wanted {
    fn describe(&self) -> String {
        let names: Vec<String> = self
            .refs
            .iter()
            .map(|r| format!("`{}` at {}", r.name, r.location()))
            .collect();
        format!(
            "{} ({}; {})",
            &self.c.key()[..16],
            self.c.summary(),
            names.join(", ")
        )
    }
}

/// The referenced engines by key, and the problems found on the way (one line each).
fn referenced(env: &Env, ckb: &Ckb) -> (BTreeMap<String, Wanted>, Vec<String>) {
    let scan = scan_workspace(&env.ws);
    let mut problems = scan.problems;
    let mut wanted: BTreeMap<String, Wanted> = BTreeMap::new();
    for r in scan.references {
        match Constraints::from_args(&r.args, ckb) {
            Ok(c) => wanted
                .entry(c.key())
                .or_insert_with(|| Wanted {
                    c,
                    refs: Vec::new(),
                })
                .refs
                .push(r),
            Err(e) => problems.push(format!(
                "{}: engine `{}`: {}",
                r.location(),
                r.name,
                e.message
            )),
        }
    }
    (wanted, problems)
}

/// The state of a referenced engine's entry.
enum State {
    Missing,
    Current,
    Stale(Vec<String>),
    GatesFailed,
    Broken(CacheError),
}

fn state(env: &Env, c: &Constraints, digest: &str) -> State {
    let key = c.key();
    if !env.cache.dir.join(&key).exists() {
        return State::Missing;
    }
    match env.cache.open(&key, Some(c)) {
        Err(e) => State::Broken(e),
        Ok(e) if !e.manifest.gates_passed => State::GatesFailed,
        Ok(e) => {
            let why = e.staleness(digest);
            if why.is_empty() {
                State::Current
            } else {
                State::Stale(why)
            }
        }
    }
}

/// What a current entry's origin proves (`chain::provenance::check`): an entry of the
/// deterministic implementers is re-derived from the ckb and compared byte for byte; one with
/// LLM-written sections meets the code policy again.
fn origin(env: &Env, ckb: &Ckb, c: &Constraints) -> Result<Entry, String> {
    let entry = env
        .cache
        .open(&c.key(), Some(c))
        .map_err(|e| e.to_string())?;
    chain::provenance::check(&entry, ckb)?;
    Ok(entry)
}

fn prepare_check(env: &Env) -> anyhow::Result<bool> {
    let ckb = env.ckb()?;
    let digest = ckb.digest();
    let (wanted, mut problems) = referenced(env, &ckb);
    let (mut ok, mut partly) = (0, 0);
    for w in wanted.values() {
        let key = w.c.key();
        let dir = format!("{}/{key}", env.cache.shown());
        match state(env, &w.c, &digest) {
            State::Current => match origin(env, &ckb, &w.c) {
                Ok(entry) => {
                    ok += 1;
                    let skipped = entry.skipped_gates();
                    // one line per reason: what did not run where the entry was verified
                    let mut by_reason: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
                    for (id, why) in &skipped {
                        by_reason.entry(why).or_default().push(id);
                    }
                    partly += usize::from(!by_reason.is_empty());
                    for (why, ids) in by_reason {
                        out!(
                            "note: {}: gate(s) {} skipped where it was verified: {why}",
                            w.describe(),
                            ids.join(", ")
                        );
                    }
                }
                Err(why) => problems.push(format!(
                    "tampered: {}: {dir}: {why}; run `cargo metainfer prepare --refresh`",
                    w.describe()
                )),
            },
            State::Missing => problems.push(format!(
                "missing: {}: no entry {dir}; run `cargo metainfer prepare`",
                w.describe()
            )),
            State::Stale(why) => problems.push(format!(
                "stale: {}: {}; run `cargo metainfer prepare`",
                w.describe(),
                why.join(", ")
            )),
            State::GatesFailed => problems.push(format!(
                "gates failed: {}: {dir} did not pass its gates; run `cargo metainfer prepare --refresh`",
                w.describe()
            )),
            State::Broken(e) => problems.push(format!("broken: {}: {e}", w.describe())),
        }
    }
    if problems.is_empty() {
        let partly = match partly {
            0 => String::new(),
            n => format!(
                " ({n} with gates that could not run where they were verified: the notes above)"
            ),
        };
        out!(
            "metainfer: {ok} engine(s) referenced, every entry in {} is current and verified{partly}",
            env.cache.shown()
        );
        return Ok(true);
    }
    for p in &problems {
        eprintln!("{p}");
    }
    eprintln!(
        "metainfer: prepare --check found {} problem(s) ({ok} engine(s) current)",
        problems.len()
    );
    Ok(false)
}

fn prepare(env: &Env, refresh: bool) -> anyhow::Result<bool> {
    let ckb = env.ckb()?;
    let digest = ckb.digest();
    let (wanted, problems) = referenced(env, &ckb);
    let mut failed = problems.len();
    for p in &problems {
        eprintln!("{p}");
    }
    let ctx = env.context()?;
    let swept = env.cache.sweep(std::time::Duration::from_secs(3600));
    if swept > 0 {
        out!(
            "metainfer: removed {swept} leftover temp director{} of interrupted writes",
            if swept == 1 { "y" } else { "ies" }
        );
    }
    for w in wanted.values() {
        let mode = match state(env, &w.c, &digest) {
            State::Current if !refresh => {
                out!("ok        {}", w.describe());
                continue;
            }
            State::Broken(e) if !refresh => {
                eprintln!("broken    {}: {e}", w.describe());
                failed += 1;
                continue;
            }
            State::Missing => Mode::Auto,
            _ => Mode::Refresh,
        };
        let ctx = ctx.clone().with_mode(mode, "metainfer prepare");
        match ensure(&w.c, &ckb, &ctx) {
            Ok(e) => out!("generated {} -> {}", w.describe(), env.show(&e.dir)),
            Err(e) => {
                eprintln!("failed    {}: {e}", w.describe());
                failed += 1;
            }
        }
    }
    if failed > 0 {
        eprintln!("metainfer: prepare: {failed} problem(s)");
    }
    Ok(failed == 0)
}

/// The full key for `key`, which may be a unique prefix of an entry's key.
fn resolve_key(env: &Env, key: &str) -> anyhow::Result<String> {
    let keys = env.cache.keys()?;
    let matches: Vec<&String> = keys.iter().filter(|k| k.starts_with(key)).collect();
    match matches.as_slice() {
        [one] => Ok((*one).clone()),
        [] => bail!(
            "no entry with key {key} in {}; `cargo metainfer ls` lists them",
            env.cache.shown()
        ),
        many => bail!(
            "key prefix {key} matches {} entries in {}; give more of the key",
            many.len(),
            env.cache.shown()
        ),
    }
}

fn vendor(env: &Env, dir: &Path, keys: &[String]) -> anyhow::Result<bool> {
    let keys: Vec<String> = if keys.is_empty() {
        let ckb = env.ckb()?;
        let (wanted, problems) = referenced(env, &ckb);
        if !problems.is_empty() {
            for p in &problems {
                eprintln!("{p}");
            }
            bail!("cannot tell which engines the workspace references; fix the problems above or name the keys");
        }
        wanted.into_keys().collect()
    } else {
        keys.iter()
            .map(|k| resolve_key(env, k))
            .collect::<anyhow::Result<_>>()?
    };
    let cwd = std::env::current_dir()?;
    let dest = Cache::new(metainfer_build::workspace::resolve(dir, &cwd), cwd);
    for key in &keys {
        if !env.cache.dir.join(key).exists() {
            bail!(
                "no entry {}/{key}; run `cargo metainfer prepare` first",
                env.cache.shown()
            );
        }
        let entry = env.cache.open(key, None)?;
        if !entry.manifest.gates_passed {
            bail!(
                "entry {} did not pass its gates and cannot be vendored",
                env.show(&entry.dir)
            );
        }
        let copied = dest.import(&entry)?;
        out!("vendored  {} -> {}", &key[..16], copied.dir.display());
    }
    out!(
        "metainfer: {} entr{} in {}",
        keys.len(),
        if keys.len() == 1 { "y" } else { "ies" },
        dest.dir.display()
    );
    Ok(true)
}

fn ls(env: &Env) -> anyhow::Result<bool> {
    let ckb = env.ckb()?;
    let digest = ckb.digest();
    let (wanted, _) = referenced(env, &ckb);
    let keys = env.cache.keys()?;
    if keys.is_empty() {
        out!("no entries in {}", env.cache.shown());
    }
    for key in &keys {
        let used = wanted
            .get(key)
            .map(|w| {
                w.refs
                    .iter()
                    .map(|r| r.name.clone())
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_else(|| "-".to_string());
        match env.cache.open(key, None) {
            Ok(e) => {
                let status = if !e.manifest.gates_passed {
                    "gates-failed".to_string()
                } else if !e.staleness(&digest).is_empty() {
                    "stale".to_string()
                } else {
                    "ok".to_string()
                };
                out!(
                    "{}  {status:<12}  {:<50}  used by: {used}",
                    &key[..16.min(key.len())],
                    e.manifest.constraints.summary()
                );
            }
            Err(err) => out!("{}  {:<12}  {err}", &key[..16.min(key.len())], "broken"),
        }
    }
    for (key, w) in &wanted {
        if !keys.contains(key) {
            out!(
                "{}  {:<12}  {:<50}  used by: {}",
                &key[..16],
                "missing",
                w.c.summary(),
                w.refs
                    .iter()
                    .map(|r| r.name.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            );
        }
    }
    Ok(true)
}

fn show(env: &Env, key: &str) -> anyhow::Result<bool> {
    let key = resolve_key(env, key)?;
    let dir = env.cache.dir.join(&key);
    for file in ["manifest.toml", "gates.toml"] {
        let p = dir.join(file);
        out!("# {}", env.show(&p));
        match std::fs::read_to_string(&p) {
            Ok(text) => out_raw!("{text}"),
            Err(e) => out!("(cannot read: {e})"),
        }
        out!();
    }
    match env.cache.open(&key, None) {
        Ok(e) => {
            let stale = e.staleness(&env.ckb()?.digest());
            let status = match (e.manifest.gates_passed, stale.is_empty()) {
                (false, _) => "gates failed".to_string(),
                (true, true) => "ok".to_string(),
                (true, false) => format!("stale: {}", stale.join(", ")),
            };
            out!("# status: {status}");
            Ok(true)
        }
        Err(e) => {
            out!("# status: broken: {e}");
            Ok(false)
        }
    }
}

fn verify(env: &Env, key: &str) -> anyhow::Result<bool> {
    let key = resolve_key(env, key)?;
    let ckb = env.ckb()?;
    let entry = env.cache.open(&key, None)?;
    let engine = std::fs::read_to_string(entry.engine_path())
        .with_context(|| format!("reading {}", env.show(&entry.engine_path())))?;
    let mut kernels = Vec::new();
    for f in entry
        .manifest
        .files
        .keys()
        .filter(|f| f.starts_with("kernels/"))
    {
        let bytes = std::fs::read(entry.path(f))
            .with_context(|| format!("reading {}", env.show(&entry.path(f))))?;
        kernels.push((f.clone(), bytes));
    }
    let ctx = env.context()?;
    let (gates, passed) = chain::reverify(
        &entry.manifest.constraints,
        &ckb,
        &engine,
        kernels,
        &ctx.chain_options()?,
    )
    .with_context(|| format!("verifying {}", env.show(&entry.dir)))?;
    let old = std::fs::read(entry.path("gates.toml")).unwrap_or_default();
    let gates_path = env.show(&entry.path("gates.toml"));
    if old != gates || entry.manifest.gates_passed != passed {
        env.cache.update_gates(&entry, &gates, passed)?;
        out!("metainfer: gate results changed; rewrote {gates_path} and its manifest.toml");
    } else {
        out!("metainfer: gate results unchanged ({gates_path})");
    }
    if passed {
        out!("metainfer: {} passed its gates", env.show(&entry.dir));
    } else {
        eprintln!(
            "metainfer: {} failed its gates (see {gates_path}); it will not be served until `cargo metainfer prepare --refresh` regenerates it",
            env.show(&entry.dir)
        );
    }
    Ok(passed)
}

fn ckb_check(env: &Env) -> anyhow::Result<bool> {
    let ckb = env.ckb()?;
    let problems = ckb.check();
    let root = env.show(&ckb.root);
    for p in &problems {
        eprintln!("{root}/{p}");
    }
    out!(
        "ckb {root}: {} contracts, {} model families, {} quants, {} targets, {} gates, {} failure modes; digest {}",
        ckb.contracts.len(),
        ckb.models.len(),
        ckb.quants.len(),
        ckb.targets.len(),
        ckb.gates.len(),
        ckb.failure_modes.len(),
        &ckb.digest()[..16]
    );
    if problems.is_empty() {
        out!("ckb check: no problems");
        Ok(true)
    } else {
        eprintln!("ckb check: {} problem(s)", problems.len());
        Ok(false)
    }
}
