//! The contract knowledge base, loaded: every file of `ckb/` parsed into the typed
//! [`schema`], plus its digest (what a cache entry records to detect staleness) and a
//! referential-integrity check (`cargo metainfer ckb check`).

pub mod schema;

pub(crate) mod check;
mod digest;

pub use check::{realization_file, PSEUDO_SECTIONS};
pub use schema::*;

use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Errors while reading the CKB. Each names the file and what is wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum CkbError {
    #[error("ckb directory {} does not exist; set METAINFER_CKB_DIR to the ckb/ directory of a metainfer checkout", .root.display())]
    NoRoot { root: PathBuf },
    #[error("cannot read {}: {source}", .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {message}", .path.display())]
    Parse { path: PathBuf, message: String },
    #[error("duplicate {what} id `{id}` in {} and {}; ids must be unique", .first.display(), .second.display())]
    Duplicate {
        what: &'static str,
        id: String,
        first: PathBuf,
        second: PathBuf,
    },
}

/// The whole knowledge base, keyed by id.
#[derive(Debug, Clone, Default)]
pub struct Ckb {
    /// The `ckb/` directory it was loaded from.
    pub root: PathBuf,
    pub contracts: BTreeMap<String, Contract>,
    /// Model families, keyed by `family`.
    pub models: BTreeMap<String, ModelFamily>,
    pub quants: BTreeMap<String, Quant>,
    pub targets: BTreeMap<String, Target>,
    pub failure_modes: Vec<FailureMode>,
    pub gates: BTreeMap<String, Gate>,
    /// The file each id came from, relative to `root` (`"contracts/dot_f32.toml"`), keyed by
    /// `"<kind>/<id>"`; used by [`Ckb::check`] to compare file stems with ids.
    pub sources: BTreeMap<String, PathBuf>,
}

impl Ckb {
    /// The CKB this build uses: `METAINFER_CKB_DIR` if set (a relative path is taken from the
    /// current directory), else the `ckb/` directory next to this crate.
    pub fn default_root() -> PathBuf {
        crate::env::path("METAINFER_CKB_DIR")
            .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../ckb")))
    }

    /// Loads [`Ckb::default_root`].
    pub fn load_default() -> Result<Ckb, CkbError> {
        Ckb::load(Ckb::default_root())
    }

    /// Loads every file of the CKB under `root`. Missing directories are empty; a file that
    /// does not parse, or has a field the schema does not know, is an error naming the file.
    pub fn load(root: impl AsRef<Path>) -> Result<Ckb, CkbError> {
        let root = root.as_ref();
        if !root.is_dir() {
            return Err(CkbError::NoRoot {
                root: root.to_path_buf(),
            });
        }
        let root = normalize(root);
        let mut ckb = Ckb {
            root: root.clone(),
            ..Ckb::default()
        };

        for (rel, c) in load_dir::<Contract>(&root, "contracts")? {
            ckb.insert("contract", "contracts", c.id.clone(), rel, c, |k| {
                &mut k.contracts
            })?;
        }
        for (rel, m) in load_dir::<ModelFamily>(&root, "models")? {
            ckb.insert("model family", "models", m.family.clone(), rel, m, |k| {
                &mut k.models
            })?;
        }
        for (rel, q) in load_dir::<Quant>(&root, "quants")? {
            ckb.insert("quant", "quants", q.id.clone(), rel, q, |k| &mut k.quants)?;
        }
        for (rel, t) in load_dir::<Target>(&root, "targets")? {
            ckb.insert("target", "targets", t.id.clone(), rel, t, |k| {
                &mut k.targets
            })?;
        }
        for (rel, g) in load_dir::<Gate>(&root, "gates")? {
            ckb.insert("gate", "gates", g.id.clone(), rel, g, |k| &mut k.gates)?;
        }
        let fm = root.join("failure_modes.toml");
        if fm.is_file() {
            let modes: FailureModes = parse_file(&fm)?;
            ckb.failure_modes = modes.modes;
        }
        Ok(ckb)
    }

    fn insert<T>(
        &mut self,
        what: &'static str,
        kind: &str,
        id: String,
        rel: PathBuf,
        value: T,
        map: impl FnOnce(&mut Ckb) -> &mut BTreeMap<String, T>,
    ) -> Result<(), CkbError> {
        let source_key = format!("{kind}/{id}");
        if let Some(first) = self.sources.get(&source_key) {
            return Err(CkbError::Duplicate {
                what,
                id,
                first: self.root.join(first),
                second: self.root.join(rel),
            });
        }
        self.sources.insert(source_key, rel);
        map(self).insert(id, value);
        Ok(())
    }

    /// The directory above the CKB root: for the CKB of a metainfer checkout, the checkout
    /// (its own tools keep their cache and scratch dirs there). Nothing a gate reads is found
    /// from it: gate paths are relative to [`Ckb::root`].
    pub fn workspace_root(&self) -> PathBuf {
        self.root
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| self.root.clone())
    }

    /// The kind of target `id` (None: the CKB has no such target).
    pub fn target_kind(&self, id: &str) -> Option<TargetKind> {
        self.targets.get(id).map(|t| t.kind)
    }

    /// Model family of `model`, which is a family name or a preset name; with the preset.
    pub fn resolve_model(&self, model: &str) -> Option<(&ModelFamily, Option<&Preset>)> {
        if let Some(f) = self.models.get(model) {
            return Some((f, None));
        }
        self.models.values().find_map(|f| {
            f.presets
                .iter()
                .find(|p| p.name == model)
                .map(|p| (f, Some(p)))
        })
    }

    /// Whether `quant` may be asked for as the quantization of a whole model file: every
    /// mixture, and every tensor type with `file_types` (an all-f16 file, say).
    pub fn is_file_quant(q: &Quant) -> bool {
        match q.kind {
            QuantKind::Mixture => true,
            QuantKind::TensorType => !q.file_types.is_empty(),
        }
    }

    /// The tensor types a file quantized as `quant` may contain: its `tensor_types`, or (a
    /// tensor type that lists none) the tensor type itself. Unknown ids are skipped
    /// ([`Ckb::check`] reports them).
    pub fn tensor_types<'a>(&'a self, quant: &'a Quant) -> Vec<&'a Quant> {
        if quant.tensor_types.is_empty() && quant.kind == QuantKind::TensorType {
            return vec![quant];
        }
        quant
            .tensor_types
            .iter()
            .filter_map(|t| self.quants.get(t))
            .collect()
    }

    /// blake3 hex digest of every file under the root except `proposals/` and `README.md`;
    /// see the `digest` module.
    pub fn digest(&self) -> String {
        digest::digest(&self.root)
    }

    /// Referential-integrity problems, one line each; empty when the CKB is consistent.
    pub fn check(&self) -> Vec<String> {
        check::check(self)
    }
}

/// Absolute, `..`-free form of `p` when it exists (so messages show a clean path).
fn normalize(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Parses every `<dir>/*.toml` (sorted by name); returns (path relative to root, value).
fn load_dir<T: DeserializeOwned>(root: &Path, dir: &str) -> Result<Vec<(PathBuf, T)>, CkbError> {
    let path = root.join(dir);
    if !path.is_dir() {
        return Ok(Vec::new());
    }
    let mut files = Vec::new();
    let rd = std::fs::read_dir(&path).map_err(|source| CkbError::Io {
        path: path.clone(),
        source,
    })?;
    for entry in rd {
        let entry = entry.map_err(|source| CkbError::Io {
            path: path.clone(),
            source,
        })?;
        let p = entry.path();
        if p.is_file() && p.extension().is_some_and(|e| e == "toml") {
            files.push(p);
        }
    }
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let v = parse_file(&p)?;
            let rel = p.strip_prefix(root).unwrap_or(&p).to_path_buf();
            Ok((rel, v))
        })
        .collect()
}

fn parse_file<T: DeserializeOwned>(path: &Path) -> Result<T, CkbError> {
    let text = std::fs::read_to_string(path).map_err(|source| CkbError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    toml::from_str(&text).map_err(|e| CkbError::Parse {
        path: path.to_path_buf(),
        message: e.to_string().trim_end().to_string(),
    })
}

#[cfg(test)]
mod tests;
