//! Review (the spec-reviewer): sees only code and contracts. Parses each section with `syn`,
//! checks that every item the contract's `interface` lists is present with that signature, and
//! enforces the code policy. It never compiles anything; the verifier does.

use crate::ckb::schema::Contract;
use quote::ToTokens;
use syn::visit::Visit;

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

/// What a section may do, from its contract.
#[derive(Debug, Clone, Copy, Default)]
pub struct Allowances {
    pub unsafe_code: bool,
    pub file_access: bool,
}

impl Allowances {
    pub fn of(c: Option<&Contract>) -> Self {
        match c {
            Some(c) => Allowances {
                unsafe_code: c.unsafe_allowed,
                file_access: c.file_access,
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
    let mut problems = policy(slot, &file, allow);
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

/// The code policy: no process, network, env or (outside the model file reader) file access,
/// no `include*!`, no `extern` blocks, no `mod` declarations, no inner attributes, no
/// `todo!`/`unimplemented!`, `unsafe` only where the contract allows it.
pub fn policy(slot: &str, file: &syn::File, allow: Allowances) -> Vec<Problem> {
    let mut v = PolicyVisitor {
        slot,
        allow,
        problems: Vec::new(),
    };
    if let Some(a) = file.attrs.first() {
        v.push(
            a.pound_token.span,
            "inner attributes (#![…]) are not allowed in a section".into(),
        );
    }
    v.visit_file(file);
    v.problems
}

struct PolicyVisitor<'a> {
    slot: &'a str,
    allow: Allowances,
    problems: Vec<Problem>,
}

impl PolicyVisitor<'_> {
    fn push(&mut self, span: proc_macro2::Span, message: String) {
        self.problems.push(Problem {
            slot: self.slot.into(),
            line: Some(span.start().line),
            message,
        });
    }

    fn check_path(&mut self, segs: &[String], span: proc_macro2::Span) {
        let joined = segs.join("::");
        let forbidden = [
            ("std::process", "process spawning"),
            ("std::net", "network access"),
            ("std::env", "environment access"),
            ("std::os", "os-specific APIs"),
            ("core::arch::asm", "inline assembly"),
        ];
        for (p, what) in forbidden {
            if joined == p || joined.starts_with(&format!("{p}::")) {
                self.push(
                    span,
                    format!("{what} ({joined}) is not allowed in generated engines"),
                );
            }
        }
        if !self.allow.file_access
            && (joined == "std::fs"
                || joined.starts_with("std::fs::")
                || joined.ends_with("File::open"))
        {
            self.push(
                span,
                format!("file access ({joined}) is only allowed in the model file reader"),
            );
        }
    }
}

fn path_segments(p: &syn::Path) -> Vec<String> {
    p.segments.iter().map(|s| s.ident.to_string()).collect()
}

impl<'ast> Visit<'ast> for PolicyVisitor<'_> {
    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segs = path_segments(p);
        if let Some(first) = p.segments.first() {
            self.check_path(&segs, first.ident.span());
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_use_tree(&mut self, t: &'ast syn::UseTree) {
        fn flatten(
            t: &syn::UseTree,
            prefix: &mut Vec<String>,
            out: &mut Vec<(Vec<String>, proc_macro2::Span)>,
        ) {
            match t {
                syn::UseTree::Path(p) => {
                    prefix.push(p.ident.to_string());
                    flatten(&p.tree, prefix, out);
                    prefix.pop();
                }
                syn::UseTree::Name(n) => {
                    let mut v = prefix.clone();
                    v.push(n.ident.to_string());
                    out.push((v, n.ident.span()));
                }
                syn::UseTree::Rename(r) => {
                    let mut v = prefix.clone();
                    v.push(r.ident.to_string());
                    out.push((v, r.ident.span()));
                }
                syn::UseTree::Glob(g) => out.push((prefix.clone(), g.star_token.span)),
                syn::UseTree::Group(g) => {
                    for t in &g.items {
                        flatten(t, prefix, out);
                    }
                }
            }
        }
        let mut out = Vec::new();
        flatten(t, &mut Vec::new(), &mut out);
        for (segs, span) in out {
            self.check_path(&segs, span);
        }
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        let name = m
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default();
        let span = m
            .path
            .segments
            .first()
            .map(|s| s.ident.span())
            .unwrap_or_else(proc_macro2::Span::call_site);
        match name.as_str() {
            "include" | "include_str" | "include_bytes" => {
                self.push(span, format!("{name}! is not allowed in generated engines"))
            }
            "todo" | "unimplemented" => self.push(
                span,
                format!("{name}! is not allowed: every path must be implemented"),
            ),
            "env" | "option_env" => self.push(
                span,
                format!("{name}! (build environment access) is not allowed"),
            ),
            "asm" | "global_asm" => {
                self.push(span, format!("{name}! (inline assembly) is not allowed"))
            }
            _ => {}
        }
        syn::visit::visit_macro(self, m);
    }

    fn visit_item_foreign_mod(&mut self, i: &'ast syn::ItemForeignMod) {
        self.push(
            i.abi.extern_token.span,
            "extern blocks are not allowed in generated engines".into(),
        );
    }

    fn visit_item_mod(&mut self, i: &'ast syn::ItemMod) {
        self.push(
            i.mod_token.span,
            format!(
                "module declarations (mod {}) are not allowed inside a section",
                i.ident
            ),
        );
    }

    fn visit_item_extern_crate(&mut self, i: &'ast syn::ItemExternCrate) {
        self.push(
            i.extern_token.span,
            "extern crate is not allowed; use rt:: re-exports".into(),
        );
    }

    fn visit_expr_unsafe(&mut self, e: &'ast syn::ExprUnsafe) {
        if !self.allow.unsafe_code {
            self.push(
                e.unsafe_token.span,
                "unsafe block in a section whose contract does not allow unsafe".into(),
            );
        }
        syn::visit::visit_expr_unsafe(self, e);
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if let Some(u) = &f.sig.unsafety {
            if !self.allow.unsafe_code {
                self.push(
                    u.span,
                    format!(
                        "unsafe fn {} in a section whose contract does not allow unsafe",
                        f.sig.ident
                    ),
                );
            }
        }
        for a in &f.attrs {
            if a.path().is_ident("no_mangle")
                || a.path().is_ident("export_name")
                || a.path().is_ident("link_section")
            {
                self.push(
                    a.pound_token.span,
                    "linkage attributes are not allowed".into(),
                );
            }
        }
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if let Some(u) = &i.unsafety {
            if !self.allow.unsafe_code {
                self.push(
                    u.span,
                    "unsafe impl in a section whose contract does not allow unsafe".into(),
                );
            }
        }
        syn::visit::visit_item_impl(self, i);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if let Some(u) = &f.sig.unsafety {
            if !self.allow.unsafe_code {
                self.push(
                    u.span,
                    format!(
                        "unsafe fn {} in a section whose contract does not allow unsafe",
                        f.sig.ident
                    ),
                );
            }
        }
        syn::visit::visit_impl_item_fn(self, f);
    }
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
