//! `cargo metainfer ckb adopt`: promote a proposal (an LLM realization that passed its gates, under
//! `ckb/proposals/`) into verified knowledge: its code becomes
//! `realizations/<contract>/<variant>.rs` and the contract gains a `[[realizations]]` entry.
//! The CKB is re-checked afterwards; on any problem both edits are undone.

use super::consolidate::Proposal;
use crate::ckb::Ckb;
use std::path::{Path, PathBuf};

/// What adoption did.
#[derive(Debug, Clone)]
pub struct Adopted {
    pub contract: String,
    pub variant: String,
    pub realization: PathBuf,
    pub contract_file: PathBuf,
}

/// Proposals under `root/proposals/`, as `<contract>/<dir>` ids, sorted.
pub fn list(root: &Path) -> Vec<(String, Result<Proposal, String>)> {
    let mut out = Vec::new();
    let Ok(contracts) = std::fs::read_dir(root.join("proposals")) else {
        return out;
    };
    for c in contracts.flatten().filter(|e| e.path().is_dir()) {
        let Ok(dirs) = std::fs::read_dir(c.path()) else {
            continue;
        };
        for d in dirs.flatten() {
            let name = d.file_name().to_string_lossy().to_string();
            if name.starts_with('.') || !d.path().is_dir() {
                continue;
            }
            let id = format!("{}/{name}", c.file_name().to_string_lossy());
            out.push((id, read(&d.path())));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn read(dir: &Path) -> Result<Proposal, String> {
    let p = dir.join("proposal.toml");
    let text =
        std::fs::read_to_string(&p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
    toml::from_str(&text).map_err(|e| format!("{}: {}", p.display(), e.to_string().trim_end()))
}

/// Adopts the proposal `which` (`<contract>/<dir>` under `root/proposals/`, or a path).
pub fn adopt(root: &Path, which: &str) -> Result<Adopted, String> {
    let dir = if Path::new(which).join("proposal.toml").exists() {
        PathBuf::from(which)
    } else {
        root.join("proposals").join(which)
    };
    if !dir.join("proposal.toml").exists() {
        let known: Vec<String> = list(root).into_iter().map(|(id, _)| id).collect();
        return Err(format!(
            "no proposal `{which}` (looked in {}); proposals: {}",
            dir.display(),
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        ));
    }
    let p = read(&dir)?;
    let code = std::fs::read_to_string(dir.join("realization.rs"))
        .map_err(|e| format!("cannot read {}/realization.rs: {e}", dir.display()))?;
    let have = blake3::hash(code.as_bytes()).to_hex().to_string();
    if have != p.blake3 {
        return Err(format!(
            "{}/realization.rs was edited after its gates passed (blake3 {have}, the proposal says {}); an edited proposal is not verified knowledge: regenerate it",
            dir.display(),
            p.blake3
        ));
    }
    let ckb = Ckb::load(root).map_err(|e| e.to_string())?;
    let contract = ckb
        .contracts
        .get(&p.contract)
        .ok_or_else(|| format!("the ckb has no contract `{}` any more", p.contract))?;
    if contract.version != p.contract_version {
        return Err(format!(
            "the proposal was verified against contract `{}` v{}, but the ckb now has v{}; regenerate the engine to get a proposal for the new version",
            p.contract, p.contract_version, contract.version
        ));
    }
    if let Some(fail) = p
        .gate
        .iter()
        .find(|g| g.status != "pass" && g.status != "skipped")
    {
        return Err(format!(
            "the proposal's gate `{}` is `{}`, not pass; it cannot be adopted",
            fail.id, fail.status
        ));
    }
    let rs = root
        .join("realizations")
        .join(&p.contract)
        .join(format!("{}.rs", p.variant));
    if rs.exists() || contract.realizations.iter().any(|r| r.variant == p.variant) {
        return Err(format!(
            "contract `{}` already has a realization `{}` ({}); remove it from the contract and delete the file first if the proposal should replace it",
            p.contract,
            p.variant,
            rs.display()
        ));
    }
    let toml_path = root.join("contracts").join(format!("{}.toml", p.contract));
    let before = std::fs::read_to_string(&toml_path)
        .map_err(|e| format!("cannot read {}: {e}", toml_path.display()))?;
    let mut entry = format!(
        "\n# Adopted from proposals/{}: written by the llm implementer ({}, {} round(s)), passed gates {} on engine {}.\n[[realizations]]\nvariant = {:?}\nisa = {:?}\n",
        dir.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default(),
        p.model.as_deref().unwrap_or("unknown model"),
        p.rounds,
        p.gate.iter().map(|g| g.id.as_str()).collect::<Vec<_>>().join(", "),
        &p.engine_key[..16.min(p.engine_key.len())],
        p.variant,
        p.isa
    );
    if let Some(e) = &p.entry {
        entry.push_str(&format!("entry = {e:?}\n"));
        if p.entry_unsafe {
            entry.push_str("entry_unsafe = true\n");
        }
    }
    let undo = |why: String| -> String {
        let _ = std::fs::write(&toml_path, &before);
        let _ = std::fs::remove_file(&rs);
        format!("{why}; the adoption was undone")
    };
    std::fs::create_dir_all(rs.parent().expect("a realization path has a parent"))
        .map_err(|e| format!("cannot create {}: {e}", rs.display()))?;
    std::fs::write(&rs, &code).map_err(|e| undo(format!("cannot write {}: {e}", rs.display())))?;
    std::fs::write(
        &toml_path,
        format!(
            "{}{entry}",
            before.trim_end_matches('\n').to_string() + "\n"
        ),
    )
    .map_err(|e| undo(format!("cannot write {}: {e}", toml_path.display())))?;
    let problems = match Ckb::load(root) {
        Ok(k) => k.check(),
        Err(e) => vec![e.to_string()],
    };
    if !problems.is_empty() {
        return Err(undo(format!(
            "the ckb does not check after adopting: {}",
            problems.join("; ")
        )));
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Adopted {
        contract: p.contract,
        variant: p.variant,
        realization: rs,
        contract_file: toml_path,
    })
}
