//! The CKB digest: what a cache entry records so that `cargo metainfer prepare --check` can tell the
//! knowledge it was generated from has changed since.

use std::path::{Path, PathBuf};

/// blake3 hex over every file under `root`, sorted by relative path (`/`-separated), hashing for
/// each file its path, a NUL, its length (u64 little-endian) and its bytes. Left out:
/// `proposals/` (not yet adopted knowledge), the top-level `README.md`, and hidden or cache
/// files (`.*`, `__pycache__/`, `*.pyc`), so editor and interpreter droppings do not make
/// every entry stale. An unreadable file is hashed as its path plus the marker `unreadable`.
pub fn digest(root: &Path) -> String {
    let mut files = Vec::new();
    collect(root, root, &mut files);
    files.sort();
    let mut h = blake3::Hasher::new();
    for rel in &files {
        h.update(rel.as_bytes());
        h.update(&[0]);
        match std::fs::read(root.join(rel)) {
            Ok(bytes) => {
                h.update(&(bytes.len() as u64).to_le_bytes());
                h.update(&bytes);
            }
            Err(_) => {
                h.update(b"unreadable");
            }
        }
    }
    h.finalize().to_hex().to_string()
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.starts_with('.') || name == "__pycache__" || name.ends_with(".pyc") {
            continue;
        }
        let rel = relative(root, &p);
        if p.is_dir() {
            if rel == "proposals" {
                continue;
            }
            collect(root, &p, out);
        } else if rel != "README.md" {
            out.push(rel);
        }
    }
}

fn relative(root: &Path, p: &Path) -> String {
    let rel = p.strip_prefix(root).unwrap_or(p);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}
