//! Review (the spec-reviewer): sees only code and contracts. Parses each section with `syn`,
//! checks that every item the contract's `interface` lists is present with that signature, and
//! enforces the code policy. It never compiles anything; the verifier does.

use crate::ckb::schema::Contract;
use quote::ToTokens;

/// One problem the reviewer found; `line` is 1-based within the section's code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub slot: String,
    pub line: Option<usize>,
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(l) => write!(f, "section {} line {l}: {}", self.slot, self.message),
            None => write!(f, "section {}: {}", self.slot, self.message),
        }
    }
}

/// What a section may do, from its contract (see [`super::policy`]).
#[derive(Debug, Clone, Default)]
pub struct Allowances {
    pub unsafe_code: bool,
    pub file_access: bool,
    /// Further allowlist entries (paths or modules) the contract grants, e.g. `rt::server`.
    pub may_use: Vec<String>,
}

impl Allowances {
    pub fn of(c: Option<&Contract>) -> Self {
        match c {
            Some(c) => Allowances {
                unsafe_code: c.unsafe_allowed,
                file_access: c.file_access,
                may_use: c.may_use.clone(),
            },
            None => Allowances::default(),
        }
    }
}

/// Reviews one section's code (the body, before it is wrapped in its module).
pub fn review_section(
    slot: &str,
    code: &str,
    contract: Option<&Contract>,
    allow: Allowances,
    extra_interface: &[String],
) -> Vec<Problem> {
    let file = match syn::parse_file(code) {
        Ok(f) => f,
        Err(e) => {
            return vec![Problem {
                slot: slot.into(),
                line: Some(e.span().start().line),
                message: format!("does not parse as Rust: {e}"),
            }]
        }
    };
    let mut problems = policy(slot, &file, &allow);
    let mut wanted: Vec<String> = contract.map(|c| c.interface.clone()).unwrap_or_default();
    wanted.extend(extra_interface.iter().cloned());
    for item in &wanted {
        if let Err(m) = has_interface_item(&file, item) {
            problems.push(Problem {
                slot: slot.into(),
                line: None,
                message: m,
            });
        }
    }
    problems
}

/// Reviews source files `(name, code)` for contract `c` as `metainfer review` does: each file
/// against the contract's code policy (as [`review_section`] applies it to every section the
/// chain reviews), and with `interface` the files together (a realization is often several
/// files: blocks and kernels) against the contract's interface items.
pub fn review_files(files: &[(String, String)], c: &Contract, interface: bool) -> Vec<Problem> {
    let mut problems = Vec::new();
    for (name, code) in files {
        problems.extend(review_section(
            name,
            code,
            None,
            Allowances::of(Some(c)),
            &[],
        ));
    }
    let all: String = files.iter().map(|(_, code)| format!("{code}\n")).collect();
    if let (true, Ok(file)) = (interface, syn::parse_file(&all)) {
        let slot: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
        for item in &c.interface {
            if let Err(message) = has_interface_item(&file, item) {
                problems.push(Problem {
                    slot: slot.join(" + "),
                    line: None,
                    message,
                });
            }
        }
    }
    problems
}

/// The code policy (an allowlist per contract; see [`super::policy`]).
pub fn policy(slot: &str, file: &syn::File, allow: &Allowances) -> Vec<Problem> {
    super::policy::check(slot, file, allow)
}

fn norm(ts: impl ToTokens) -> String {
    ts.to_token_stream()
        .to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn vis_ok(have: &syn::Visibility, want: &syn::Visibility) -> bool {
    let rank = |v: &syn::Visibility| match v {
        syn::Visibility::Public(_) => 2,
        syn::Visibility::Restricted(_) => 1,
        syn::Visibility::Inherited => 0,
    };
    rank(have) >= rank(want)
}

/// Checks that `item` (a signature from a contract's `interface`) is present in `file`,
/// at top level or as a method of an inherent impl.
pub fn has_interface_item(file: &syn::File, item: &str) -> Result<(), String> {
    let item = item.trim();
    let kinds = ["fn", "struct", "enum", "const", "type", "trait", "static"];
    let tokens: Vec<&str> = item.split_whitespace().collect();
    let kind = tokens
        .iter()
        .find(|t| kinds.contains(t))
        .copied()
        .ok_or_else(|| format!("contract interface item '{item}' has no item keyword"))?;
    if kind == "fn" {
        let want: syn::ItemFn = syn::parse_str(&format!("{item} {{}}"))
            .map_err(|e| format!("contract interface item '{item}' does not parse: {e}"))?;
        let want_sig = norm(&want.sig);
        let mut found_name = false;
        let mut check = |vis: &syn::Visibility, sig: &syn::Signature| -> bool {
            if sig.ident == want.sig.ident {
                found_name = true;
                norm(sig) == want_sig && vis_ok(vis, &want.vis)
            } else {
                false
            }
        };
        for it in &file.items {
            match it {
                syn::Item::Fn(f) if check(&f.vis, &f.sig) => return Ok(()),
                syn::Item::Impl(imp) if imp.trait_.is_none() => {
                    for ii in &imp.items {
                        if let syn::ImplItem::Fn(f) = ii {
                            if check(&f.vis, &f.sig) {
                                return Ok(());
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        return Err(if found_name {
            format!(
                "`{}` exists but its signature or visibility differs from the contract's `{item}`",
                want.sig.ident
            )
        } else {
            format!("missing interface item `{item}`")
        });
    }
    let pos = tokens.iter().position(|t| *t == kind).unwrap_or(0);
    let name = tokens
        .get(pos + 1)
        .map(|n| n.trim_end_matches(|c: char| !c.is_alphanumeric() && c != '_'))
        .map(|n| n.split(['<', ':', '(', '{']).next().unwrap_or(n))
        .ok_or_else(|| format!("contract interface item '{item}' has no name"))?;
    let present = file.items.iter().any(|it| {
        let (ident, k) = match it {
            syn::Item::Struct(s) => (&s.ident, "struct"),
            syn::Item::Enum(e) => (&e.ident, "enum"),
            syn::Item::Const(c) => (&c.ident, "const"),
            syn::Item::Type(t) => (&t.ident, "type"),
            syn::Item::Trait(t) => (&t.ident, "trait"),
            syn::Item::Static(s) => (&s.ident, "static"),
            _ => return false,
        };
        k == kind && ident == name
    });
    if present {
        Ok(())
    } else {
        Err(format!("missing interface item `{item}`"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_flags_forbidden_things_with_lines() {
        let code = "fn a() {\n    let _ = std::process::Command::new(\"x\");\n}\nfn b() { todo!() }\nextern \"C\" { fn c(); }\nfn d() { unsafe { } }\n";
        let p = review_section("s", code, None, Allowances::default(), &[]);
        let msgs: Vec<String> = p.iter().map(|p| p.to_string()).collect();
        assert!(
            msgs.iter()
                .any(|m| m.contains("line 2") && m.contains("process")),
            "{msgs:?}"
        );
        assert!(
            msgs.iter()
                .any(|m| m.contains("line 4") && m.contains("todo!")),
            "{msgs:?}"
        );
        assert!(
            msgs.iter()
                .any(|m| m.contains("line 5") && m.contains("extern")),
            "{msgs:?}"
        );
        assert!(
            msgs.iter()
                .any(|m| m.contains("line 6") && m.contains("unsafe")),
            "{msgs:?}"
        );
    }

    #[test]
    fn use_of_env_and_fs_is_flagged() {
        let code =
            "use std::env;\nuse std::{fs::File, io};\nfn f() { let _ = include_str!(\"x\"); }\n";
        let p = review_section("s", code, None, Allowances::default(), &[]);
        assert_eq!(p.len(), 3, "{p:?}");
    }

    #[test]
    fn interface_items_are_checked_by_signature() {
        let code = "pub struct Engine;\nimpl Engine { pub fn load(path: &std::path::Path) -> rt::Result<Engine> { todo_free() } }\npub(crate) const Q: u8 = 1;\nfn todo_free() -> ! { loop {} }";
        let f = syn::parse_file(code).unwrap();
        assert!(has_interface_item(&f, "pub struct Engine").is_ok());
        assert!(has_interface_item(
            &f,
            "pub fn load(path: &std::path::Path) -> rt::Result<Engine>"
        )
        .is_ok());
        assert!(has_interface_item(&f, "pub(crate) const Q: u8").is_ok());
        let e =
            has_interface_item(&f, "pub fn load(path: &str) -> rt::Result<Engine>").unwrap_err();
        assert!(e.contains("signature"), "{e}");
        assert!(has_interface_item(&f, "pub fn forward(&mut self)")
            .unwrap_err()
            .contains("missing"));
    }
}
