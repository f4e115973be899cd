//! metainfer-build is the MetaInfer generator: it turns typed constraints into a verified
//! inference engine, cached under the blake3 hash of the constraints, and exposes that engine
//! to Rust code through the `#[metainfer::engine]` macro (via `metainfer-macros`), a build.rs
//! API, and the `cargo metainfer` CLI (the `metainfer-cli` crate).
//!
//! Features: none by default, so the proc-macro stays light. `llm` adds the LLM implementer's
//! HTTP client (ureq with TLS) for `generator = "llm" | "auto"`; `cuda` loads NVRTC to compile
//! the kernels of cuda engines. A miss that needs one of them while it is off fails with
//! [`feature::FeatureOff`] on the constraint's key; a cache hit needs neither.
//!
//! The path every entry point takes is [`ensure()`]:
//!
//! 1. [`Constraints::from_args`] validates `key = value` arguments against the [`Ckb`] (the
//!    contract knowledge base in `ckb/`), so unknown keys, unknown values and impossible
//!    combinations fail with a message naming the key and listing what is allowed;
//! 2. the [`Cache`] looks up `cache/<key>/` and verifies it (collision and tamper guards);
//! 3. on a miss, [`mode`] permitting, the [`chain`] plans, implements, reviews and verifies a
//!    candidate, and the cache writes it atomically if its gates passed;
//! 4. [`expand`] produces the Rust source the user's crate compiles: a newtype over the
//!    generated `Engine` that `include!`s the entry.
//!
//! Modules:
//!
//! - [`constraints`] (and [`constraints::canonical`]): the typed constraints, their canonical
//!   TOML and key;
//! - [`ckb`]: the CKB's schema, loader, digest and integrity check;
//! - [`cache`], [`manifest`]: cache entries, their verification and atomic writes;
//! - [`mode`]: `METAINFER_MODE` (auto, offline, refresh);
//! - [`nvrtc`]: CUDA C → PTX with NVRTC, loaded at run time (the `nvrtc` gate, CUDA engines);
//! - [`progress`]: the lines a user sees while an engine is generated;
//! - [`llm`]: the OpenAI-compatible chat client of the LLM implementer and its configuration;
//! - [`chain`]: plan → implement → review → verify → consolidate, and `ckb adopt`;
//! - [`ensure`](mod@ensure): lookup, generation, write;
//! - [`attr`], [`expand`]: the attribute macro's parsing and expansion;
//! - [`build_api`]: `Engine::new("Coder").model("qwen2")….emit()` for build scripts;
//! - [`scan`]: finding the engines a workspace references (for `cargo metainfer prepare`);
//! - [`env`](mod@env): the one place the process environment is read (every variable, listed);
//! - [`workspace`]: locating the workspace root and showing paths relative to it;
//! - [`feature`]: [`feature::FeatureOff`], a generator feature a constraint needs;
//! - [`error`]: [`BuildError`], the error of the entry points.
//!
//! No module names one above it (`tests/layering.rs` checks that there are no import cycles):
//! env, feature, progress, workspace; mode, ckb; constraints; manifest; cache; llm, nvrtc;
//! chain; error; ensure; expand; attr; build_api; scan.

pub mod attr;
pub mod build_api;
pub mod cache;
pub mod chain;
pub mod ckb;
pub mod constraints;
pub mod ensure;
pub mod env;
pub mod error;
pub mod expand;
pub mod feature;
pub mod llm;
pub mod manifest;
pub mod mode;
pub mod nvrtc;
pub mod progress;
pub mod scan;
pub mod workspace;

pub use build_api::Engine;
pub use cache::{Cache, CacheError, Entry};
pub use ckb::{Ckb, CkbError};
pub use constraints::{Arg, ArgValue, ConstraintError, Constraints};
pub use ensure::{ensure, BuildContext};
pub use error::BuildError;
pub use manifest::Manifest;
pub use mode::{Mode, ModeSetting};

/// This generator's version, recorded in every cache entry it writes; an entry written by
/// another version is stale.
pub const GENERATOR_VERSION: &str = env!("CARGO_PKG_VERSION");
