//! Finding the workspace a build belongs to, and showing paths relative to it.

use std::path::{Path, PathBuf};

/// The outermost directory at or above `start` whose `Cargo.toml` has a `[workspace]` table;
/// `start` itself when there is none.
pub fn workspace_root(start: &Path) -> PathBuf {
    let start = std::fs::canonicalize(start).unwrap_or_else(|_| start.to_path_buf());
    let mut found = None;
    for dir in start.ancestors() {
        let manifest = dir.join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else {
            continue;
        };
        if let Ok(table) = text.parse::<toml::Table>() {
            if table.contains_key("workspace") {
                found = Some(dir.to_path_buf());
            }
        }
    }
    found.unwrap_or(start)
}

/// The workspace root of the crate being built: from the `CARGO_MANIFEST_DIR` of the running
/// build (the crate that uses the macro, or whose build script runs), else the current
/// directory.
pub fn current_workspace_root() -> PathBuf {
    let start = crate::env::path("CARGO_MANIFEST_DIR")
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("."));
    workspace_root(&start)
}

/// `path` relative to `root` with `/` separators when it lies under it, else as is.
pub fn display_path(path: &Path, root: &Path) -> String {
    let canon_root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    for r in [root, canon_root.as_path()] {
        if let Ok(rel) = path.strip_prefix(r) {
            let s: Vec<_> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect();
            return if s.is_empty() {
                ".".to_string()
            } else {
                s.join("/")
            };
        }
    }
    path.display().to_string()
}

/// `path` made absolute against `root` when relative.
pub fn resolve(path: &Path, root: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        root.join(path)
    }
}
