//! The build.rs API: the same engine as the attribute, declared from a build script and
//! written to `OUT_DIR/metainfer_<Name>.rs`, which `metainfer::include_engine!(Name)` includes.
//!
//! ```no_run
//! // build.rs
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     metainfer_build::Engine::new("Coder").model("qwen2").hw("x86_64-avx2").quant("q4_k_m").emit()?;
//!     Ok(())
//! }
//! ```

use crate::cache::Entry;
use crate::ckb::Ckb;
use crate::constraints::{Arg, ArgValue, Constraints};
use crate::ensure::{ensure, BuildContext};
use crate::error::BuildError;
use crate::expand::{expand_source, TRACKED_ENV};
use std::path::{Path, PathBuf};

/// An engine declared by a build script. Setters replace an earlier value of the same key;
/// [`Engine::feature`] adds to the feature list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Engine {
    name: String,
    args: Vec<Arg>,
}

/// What [`Engine::emit`] wrote.
#[derive(Debug, Clone)]
pub struct Emitted {
    /// `OUT_DIR/metainfer_<Name>.rs`.
    pub path: PathBuf,
    pub key: String,
    /// The cache files the generated source consumes.
    pub consumed: Vec<PathBuf>,
}

impl Engine {
    /// An engine whose struct is named `name` (a Rust type name such as `Coder`).
    pub fn new(name: impl Into<String>) -> Engine {
        Engine {
            name: name.into(),
            args: Vec::new(),
        }
    }

    /// Sets `key` to `value`, replacing an earlier value.
    pub fn arg(mut self, key: &str, value: ArgValue) -> Engine {
        self.args.retain(|a| a.key != key);
        self.args.push(Arg::new(key, value));
        self
    }

    pub fn model(self, v: impl Into<String>) -> Engine {
        self.arg("model", ArgValue::Str(v.into()))
    }
    pub fn hw(self, v: impl Into<String>) -> Engine {
        self.arg("hw", ArgValue::Str(v.into()))
    }
    pub fn quant(self, v: impl Into<String>) -> Engine {
        self.arg("quant", ArgValue::Str(v.into()))
    }
    pub fn format(self, v: impl Into<String>) -> Engine {
        self.arg("format", ArgValue::Str(v.into()))
    }
    pub fn generator(self, v: impl Into<String>) -> Engine {
        self.arg("generator", ArgValue::Str(v.into()))
    }
    pub fn reference(self, v: impl Into<String>) -> Engine {
        self.arg("reference", ArgValue::Str(v.into()))
    }
    pub fn max_seq(self, n: u32) -> Engine {
        self.arg("max_seq", ArgValue::Int(n.into()))
    }
    pub fn batch(self, n: u32) -> Engine {
        self.arg("batch", ArgValue::Int(n.into()))
    }
    pub fn tp(self, n: u32) -> Engine {
        self.arg("tp", ArgValue::Int(n.into()))
    }
    /// Adds a feature (`server`, `chat`).
    pub fn feature(mut self, f: impl Into<String>) -> Engine {
        let f = f.into();
        match self.args.iter_mut().find(|a| a.key == "features") {
            Some(Arg {
                value: ArgValue::List(list),
                ..
            }) => list.push(f),
            _ => self
                .args
                .push(Arg::new("features", ArgValue::List(vec![f]))),
        }
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn args(&self) -> &[Arg] {
        &self.args
    }

    /// Validated constraints.
    pub fn constraints(&self, ckb: &Ckb) -> Result<Constraints, BuildError> {
        Constraints::from_args(&self.args, ckb).map_err(|e| self.context(e.into()))
    }

    fn context(&self, e: BuildError) -> BuildError {
        BuildError::InEngine {
            name: self.name.clone(),
            source: Box::new(e),
        }
    }

    /// From a build script: validates, ensures the cache entry (mode and cache directory from
    /// the environment), writes `OUT_DIR/metainfer_<Name>.rs` and prints the
    /// `cargo:rerun-if-changed` / `cargo:rerun-if-env-changed` lines. Writes nothing outside
    /// `OUT_DIR` except, on a miss in auto mode, the new cache entry.
    pub fn emit(&self) -> Result<Emitted, BuildError> {
        let out_dir = crate::env::var_os("OUT_DIR").ok_or(BuildError::Env {
            var: "OUT_DIR",
            why: "Engine::emit runs inside a build script (build.rs); call it from there",
        })?;
        for var in TRACKED_ENV.iter().chain(crate::mode::MODE_ENV) {
            println!("cargo:rerun-if-env-changed={var}");
        }
        let ckb = Ckb::load(Ckb::default_root()).map_err(|e| self.context(e.into()))?;
        let ctx = BuildContext::from_env().map_err(|e| self.context(e))?;
        // cargo shows a build script's stderr only when it fails: generation progress also
        // goes to the terminal.
        crate::progress::also_to_terminal();
        let emitted = self.emit_to(Path::new(&out_dir), &ckb, &ctx)?;
        for f in &emitted.consumed {
            println!("cargo:rerun-if-changed={}", f.display());
        }
        Ok(emitted)
    }

    /// [`Engine::emit`] with everything given and nothing printed.
    pub fn emit_to(
        &self,
        out_dir: &Path,
        ckb: &Ckb,
        ctx: &BuildContext,
    ) -> Result<Emitted, BuildError> {
        if syn::parse_str::<syn::Ident>(&self.name).is_err() {
            return Err(BuildError::BadName {
                name: self.name.clone(),
            });
        }
        let c = self.constraints(ckb)?;
        let entry: Entry = ensure(&c, ckb, ctx).map_err(|e| self.context(e))?;
        let source = expand_source(&self.name, &entry, ckb);
        let path = out_dir.join(format!("metainfer_{}.rs", self.name));
        let unchanged = std::fs::read_to_string(&path).is_ok_and(|old| old == source);
        if !unchanged {
            std::fs::write(&path, source).map_err(|source| BuildError::Io {
                action: "write",
                path: path.display().to_string(),
                source,
            })?;
        }
        Ok(Emitted {
            path,
            key: entry.key.clone(),
            consumed: entry.files(),
        })
    }
}
