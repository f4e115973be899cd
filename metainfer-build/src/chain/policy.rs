//! The code policy, as an allowlist: what a section may name, invoke and declare.
//!
//! Every path a section uses (in expressions, types, patterns, `use` trees, and inside the
//! arguments of the macros it may call) is resolved through the section's `use` aliases and
//! must fall under an entry of its allowlist: a base every section gets (std's collections,
//! formatting, iterators, numbers, sync, threads and clocks; the runtime's error type, `half`,
//! `serde_json`, `minijinja`…), plus what its contract grants: `unsafe_allowed` adds
//! `std::arch` intrinsics and `unsafe`; `file_access` adds `std::fs`, `std::io` and
//! `rt::memmap2`; `may_use` names further entries (`rt::server` for the server section,
//! `rt::cudarc` for the CUDA forward). Paths rooted anywhere else than `std`/`core`/`alloc`/`rt`
//! are the engine's own items (other sections, the prelude) and are allowed, except
//! `crate::…`, which would reach the crate that includes the engine.
//!
//! Macros: only those on [`MACROS`], each with its arguments parsed (as expressions, or as the
//! macro's own grammar) and checked like any other code; `macro_rules!` and every other macro
//! are refused, since their expansions cannot be reviewed. Attributes: only those on
//! [`ATTRIBUTES`] (`target_feature` where unsafe is allowed; derives of std's traits only).
//! Items: no `extern crate`, `extern` blocks, `mod`, `static mut`, and `unsafe` (blocks, fns,
//! impls, traits, unions) only where the contract allows it. Glob imports only of a module the
//! allowlist covers whole (or `super::*`). A few methods reach the file system whatever the
//! type they are called on is spelled as (`Path::read_dir`, `metadata`, …): outside the model
//! reader they are refused by name.

use super::review::{Allowances, Problem};
use proc_macro2::Span;
use std::collections::HashMap;
use syn::parse::{ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::visit::Visit;

/// Paths every section may use: a module (everything under it) or a single item.
const BASE: &[&str] = &[
    "std::any",
    "std::array",
    "std::ascii",
    "std::borrow",
    "std::boxed",
    "std::cell",
    "std::char",
    "std::clone",
    "std::cmp",
    "std::collections",
    "std::convert",
    "std::default",
    "std::error",
    "std::f32",
    "std::f64",
    "std::fmt",
    "std::hash",
    "std::hint",
    "std::iter",
    "std::marker",
    "std::mem",
    "std::num",
    "std::ops",
    "std::option",
    "std::primitive",
    "std::ptr",
    "std::rc",
    "std::result",
    "std::slice",
    "std::str",
    "std::string",
    "std::sync",
    "std::time",
    "std::vec",
    "std::panic::catch_unwind",
    "std::panic::resume_unwind",
    "std::panic::AssertUnwindSafe",
    "std::panic::UnwindSafe",
    "std::panic::RefUnwindSafe",
    "std::thread::spawn",
    "std::thread::scope",
    "std::thread::Scope",
    "std::thread::ScopedJoinHandle",
    "std::thread::Builder",
    "std::thread::JoinHandle",
    "std::thread::yield_now",
    "std::thread::sleep",
    "std::thread::available_parallelism",
    "std::path::Path",
    "std::path::PathBuf",
    "std::io::Error",
    "std::io::ErrorKind",
    "std::io::Result",
    "std::arch::is_x86_feature_detected",
    "rt::Error",
    "rt::Result",
    "rt::GenParams",
    "rt::Message",
    "rt::TemplateKwargs",
    "rt::TEMPLATE_ENGINE_VARS",
    "rt::Work",
    "rt::FinishReason",
    "rt::Stats",
    "rt::half",
    "rt::fancy_regex",
    "rt::serde_json",
    "rt::minijinja",
    "rt::minijinja_contrib",
];

/// Entries under an allowed module that are refused all the same (file access through a
/// re-exported crate).
const CARVED_OUT: &[&str] = &[
    "rt::minijinja::path_loader",
    "rt::minijinja::loader",
    "rt::tokenizers::Tokenizer::from_file",
    "rt::tokenizers::Tokenizer::from_pretrained",
];

/// What `unsafe_allowed` adds: the SIMD intrinsics.
const UNSAFE_EXTRA: &[&str] = &["std::arch::x86_64"];

/// What `file_access` adds.
const FILE_EXTRA: &[&str] = &["std::fs", "std::io", "rt::memmap2"];

/// Methods that touch the file system whatever their receiver is called; refused by name
/// outside sections with file access.
const FILE_METHODS: &[&str] = &[
    "read_dir",
    "metadata",
    "symlink_metadata",
    "canonicalize",
    "read_link",
    "exists",
    "try_exists",
    "is_file",
    "is_dir",
    "is_symlink",
    "save",
];

/// Macros a section may invoke; their arguments are parsed and checked.
pub const MACROS: &[&str] = &[
    "assert",
    "assert_eq",
    "assert_ne",
    "debug_assert",
    "debug_assert_eq",
    "debug_assert_ne",
    "panic",
    "unreachable",
    "format",
    "format_args",
    "write",
    "writeln",
    "vec",
    "matches",
    "cfg",
    "concat",
    "stringify",
    "line",
    "column",
    "file",
    "module_path",
    "is_x86_feature_detected",
];

/// Attributes a section may carry (`target_feature` only where unsafe is allowed).
pub const ATTRIBUTES: &[&str] = &[
    "inline",
    "cold",
    "derive",
    "allow",
    "expect",
    "warn",
    "must_use",
    "doc",
    "repr",
    "track_caller",
    "cfg",
    "non_exhaustive",
    "deprecated",
    "rustfmt::skip",
    "target_feature",
];

/// Traits a section may derive.
const DERIVES: &[&str] = &[
    "Clone",
    "Copy",
    "Debug",
    "Default",
    "PartialEq",
    "Eq",
    "PartialOrd",
    "Ord",
    "Hash",
];

/// Checks `file` (one section) against the allowlist of `allow`.
pub fn check(slot: &str, file: &syn::File, allow: &Allowances) -> Vec<Problem> {
    let mut aliases = Aliases::default();
    aliases.visit_file(file);
    let mut allowed: Vec<Vec<String>> = BASE.iter().map(|p| split(p)).collect();
    if allow.unsafe_code {
        allowed.extend(UNSAFE_EXTRA.iter().map(|p| split(p)));
    }
    if allow.file_access {
        allowed.extend(FILE_EXTRA.iter().map(|p| split(p)));
    }
    allowed.extend(allow.may_use.iter().map(|p| split(p)));
    let mut v = Checker {
        slot,
        allow,
        allowed,
        aliases: aliases.map,
        problems: Vec::new(),
    };
    if let Some(a) = file.attrs.first() {
        v.push(
            a.pound_token.span,
            "inner attributes (#![…]) are not allowed in a section".into(),
        );
    }
    for (module, span) in &aliases.globs {
        v.check_glob(module, *span);
    }
    v.visit_file(file);
    v.problems.sort_by_key(|p| p.line);
    v.problems
}

/// `p` with std's other roots (`core`, `alloc`) as `std`, the runtime's (`metainfer_rt`) as
/// `rt`, and `self::` / `super::` before those roots dropped; a path through `super::super`
/// (outside the engine) is rooted at `crate`, which is refused.
fn canonical(p: &[String]) -> Vec<String> {
    let mut p = p.to_vec();
    loop {
        match (p.first().map(String::as_str), p.get(1).map(String::as_str)) {
            (Some("self"), Some(_)) => {
                p.remove(0);
            }
            (Some("super"), Some("super")) => p[0] = "crate".into(),
            (Some("super"), Some("std" | "core" | "alloc" | "rt" | "metainfer_rt")) => {
                p.remove(0);
            }
            _ => break,
        }
    }
    match p.first().map(String::as_str) {
        Some("core" | "alloc") => p[0] = "std".into(),
        Some("metainfer_rt") => p[0] = "rt".into(),
        _ => {}
    }
    p
}

fn split(p: &str) -> Vec<String> {
    p.split("::").map(str::to_string).collect()
}

/// The section's `use` bindings: name -> the paths it may stand for (every `use` of the file,
/// whatever block it is in: a name bound twice is checked under each binding), and its globs.
#[derive(Default)]
struct Aliases {
    map: HashMap<String, Vec<Vec<String>>>,
    globs: Vec<(Vec<String>, Span)>,
}

impl<'ast> Visit<'ast> for Aliases {
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        fn walk(t: &syn::UseTree, prefix: &mut Vec<String>, a: &mut Aliases) {
            match t {
                syn::UseTree::Path(p) => {
                    prefix.push(p.ident.to_string());
                    walk(&p.tree, prefix, a);
                    prefix.pop();
                }
                syn::UseTree::Name(n) if n.ident == "self" => {
                    if let Some(last) = prefix.last() {
                        a.map.entry(last.clone()).or_default().push(prefix.clone());
                    }
                }
                syn::UseTree::Name(n) => {
                    let mut p = prefix.clone();
                    p.push(n.ident.to_string());
                    a.map.entry(n.ident.to_string()).or_default().push(p);
                }
                syn::UseTree::Rename(r) => {
                    let mut p = prefix.clone();
                    if r.ident != "self" {
                        p.push(r.ident.to_string());
                    }
                    a.map.entry(r.rename.to_string()).or_default().push(p);
                }
                syn::UseTree::Glob(g) => a.globs.push((prefix.clone(), g.star_token.span)),
                syn::UseTree::Group(g) => g.items.iter().for_each(|t| walk(t, prefix, a)),
            }
        }
        walk(&u.tree, &mut Vec::new(), self);
    }
}

struct Checker<'a> {
    slot: &'a str,
    allow: &'a Allowances,
    allowed: Vec<Vec<String>>,
    aliases: HashMap<String, Vec<Vec<String>>>,
    problems: Vec<Problem>,
}

/// Why a path is refused, when its root says so (else the generic allowlist message).
fn category(p: &[String]) -> Option<&'static str> {
    let at = |i: usize| p.get(i).map(String::as_str);
    if p.iter()
        .any(|s| matches!(s.as_str(), "asm" | "global_asm" | "naked_asm"))
    {
        return Some("inline assembly");
    }
    match (at(0), at(1)) {
        (Some("std"), Some("process")) => Some("process spawning"),
        (Some("std"), Some("net")) => Some("network access"),
        (Some("std"), Some("env")) => Some("environment access"),
        (Some("std"), Some("os")) => Some("os-specific APIs"),
        (Some("std"), Some("fs")) => Some("file access (only the model file reader has it)"),
        (Some("std"), Some("io")) => Some("io (only the model file reader has it)"),
        (Some("std"), Some("arch")) => Some("cpu intrinsics (only kernels have them)"),
        (Some("std"), Some("ffi")) => Some("foreign-function types"),
        (Some("rt"), Some("server")) => Some("the HTTP server (only the server section has it)"),
        (Some("rt"), Some("memmap2")) => Some("file mapping (only the model file reader has it)"),
        (Some("rt"), Some("minijinja")) => Some("template loading from files"),
        _ => None,
    }
}

impl Checker<'_> {
    fn push(&mut self, span: Span, message: String) {
        self.problems.push(Problem {
            slot: self.slot.into(),
            line: Some(span.start().line),
            message,
        });
    }

    /// Every path `p` may stand for after the section's aliases, with std's roots (`core`,
    /// `alloc`) and the runtime's (`metainfer_rt`) made canonical.
    fn resolve(&self, p: &[String], depth: usize) -> Vec<Vec<String>> {
        let Some(first) = p.first() else {
            return vec![];
        };
        if depth < 8 {
            if let Some(bindings) = self.aliases.get(first) {
                let rest = &p[1..];
                return bindings
                    .iter()
                    .filter(|b| b.first() != Some(first) || b.len() > 1)
                    .flat_map(|b| {
                        let full: Vec<String> = b.iter().chain(rest).cloned().collect();
                        self.resolve(&full, depth + 1)
                    })
                    .collect();
            }
        }
        if self.aliases.contains_key(first) {
            // an alias chain deeper than any honest section needs
            return vec![vec!["<alias chain too deep>".into()]];
        }
        vec![canonical(p)]
    }

    /// Whether the resolved path `p` is allowed (`prefix_ok`: also when `p` is a module that
    /// holds an allowed entry, as a `use` of a module may be).
    fn allowed(&self, p: &[String], prefix_ok: bool) -> bool {
        match p.first().map(String::as_str) {
            Some("std" | "rt") => {}
            Some("crate" | "<alias chain too deep>") => return false,
            _ => return true,
        }
        if CARVED_OUT.iter().any(|c| p.starts_with(&split(c))) {
            return false;
        }
        self.allowed
            .iter()
            .any(|a| p.starts_with(a) || (prefix_ok && a.starts_with(p)))
    }

    fn refuse(&mut self, p: &[String], span: Span) {
        let joined = p.join("::");
        let message = if p.first().map(String::as_str) == Some("<alias chain too deep>") {
            "this path goes through more `use` aliases than the reviewer follows (8); name the item by its own path".to_string()
        } else if p.first().map(String::as_str) == Some("crate") {
            format!("`{joined}` reaches outside the engine; name the engine's items directly or through `super::`")
        } else if let Some(what) = category(p) {
            format!("{what} (`{joined}`) is not allowed in this section")
        } else {
            format!(
                "`{joined}` is not on this section's allowlist (sections may use std's collections, fmt, iter, num, ops, sync, thread, time, …, and rt's Error, half, serde_json, minijinja)"
            )
        };
        self.push(span, message);
    }

    fn check_path(&mut self, segs: &[String], span: Span, prefix_ok: bool) {
        for p in self.resolve(segs, 0) {
            if !self.allowed(&p, prefix_ok) {
                self.refuse(&p, span);
                return;
            }
            if !self.allow.file_access {
                if let Some(m) = p
                    .iter()
                    .skip(1)
                    .find(|s| FILE_METHODS.contains(&s.as_str()))
                {
                    let m = m.clone();
                    self.push(
                        span,
                        format!("`{m}` reaches the file system; only the model file reader may"),
                    );
                    return;
                }
            }
        }
    }

    fn check_glob(&mut self, module: &[String], span: Span) {
        if module.len() == 1 && module[0] == "super" {
            return;
        }
        for p in self.resolve(module, 0) {
            let whole = match p.first().map(String::as_str) {
                Some("std" | "rt" | "crate") => {
                    self.allowed.iter().any(|a| p.starts_with(a))
                        && !CARVED_OUT.iter().any(|c| split(c).starts_with(&p))
                }
                _ => true,
            };
            if !whole {
                self.push(
                    span,
                    format!(
                        "glob import of `{}::*` is not allowed: import the items you use by name",
                        p.join("::")
                    ),
                );
                return;
            }
        }
    }

    /// The macro's name after aliases, when it is one the section may call.
    fn macro_name(&mut self, m: &syn::Macro) -> Option<String> {
        let segs = path_segments(&m.path);
        let span = first_span(&m.path);
        if segs == ["macro_rules"] {
            self.push(
                span,
                "macro_rules! is not allowed: its expansions cannot be reviewed; write a function"
                    .into(),
            );
            return None;
        }
        let resolved = self.resolve(&segs, 0);
        for p in &resolved {
            let name = p.last().cloned().unwrap_or_default();
            let root_ok = p.len() == 1 || p[0] == "std";
            if !MACROS.contains(&name.as_str()) || !root_ok {
                let what = match name.as_str() {
                    "include" | "include_str" | "include_bytes" => {
                        "reads files at compile time".to_string()
                    }
                    "env" | "option_env" => "reads the build environment".to_string(),
                    "asm" | "global_asm" | "naked_asm" => "is inline assembly".to_string(),
                    "todo" | "unimplemented" => "leaves a path unimplemented".to_string(),
                    _ => "is not on the list of macros a section may call".to_string(),
                };
                self.push(
                    span,
                    format!(
                        "{}! {what}; allowed macros: {}",
                        p.join("::"),
                        MACROS.join(", ")
                    ),
                );
                return None;
            }
        }
        resolved.first().and_then(|p| p.last().cloned())
    }

    /// Parses the arguments of an allowed macro and checks them like any other code.
    fn macro_args(&mut self, name: &str, m: &syn::Macro) {
        let span = first_span(&m.path);
        let exprs =
            |input: ParseStream| Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated(input);
        // (expressions, patterns) to check
        type Args = (Vec<syn::Expr>, Vec<syn::Pat>);
        let parsed: syn::Result<Args> = match name {
            "stringify" => Ok((vec![], vec![])), // makes a string of its tokens; nothing runs
            "line" | "column" | "file" | "module_path" if m.tokens.is_empty() => {
                Ok((vec![], vec![]))
            }
            "cfg" => m.parse_body::<syn::Meta>().map(|_| (vec![], vec![])),
            "vec" => (|input: ParseStream| {
                let fork = input.fork();
                if fork.parse::<syn::Expr>().is_ok() && fork.peek(syn::Token![;]) {
                    let e: syn::Expr = input.parse()?;
                    input.parse::<syn::Token![;]>()?;
                    let n: syn::Expr = input.parse()?;
                    return Ok((vec![e, n], vec![]));
                }
                Ok((exprs(input)?.into_iter().collect(), vec![]))
            })
            .parse2(m.tokens.clone()),
            "matches" => (|input: ParseStream| {
                let mut es = vec![input.parse::<syn::Expr>()?];
                input.parse::<syn::Token![,]>()?;
                let pat = syn::Pat::parse_multi_with_leading_vert(input)?;
                if input.peek(syn::Token![if]) {
                    input.parse::<syn::Token![if]>()?;
                    es.push(input.parse()?);
                }
                if input.peek(syn::Token![,]) {
                    input.parse::<syn::Token![,]>()?;
                }
                Ok((es, vec![pat]))
            })
            .parse2(m.tokens.clone()),
            _ => exprs
                .parse2(m.tokens.clone())
                .map(|p| (p.into_iter().collect(), vec![])),
        };
        match parsed {
            Ok((es, pats)) => {
                es.iter().for_each(|e| self.visit_expr(e));
                pats.iter().for_each(|p| self.visit_pat(p));
            }
            Err(e) => self.push(
                span,
                format!("the arguments of {name}! could not be checked ({e}); write them as plain expressions"),
            ),
        }
    }

    fn check_unsafe(&mut self, span: Span, what: &str) {
        if !self.allow.unsafe_code {
            self.push(
                span,
                format!("{what} in a section whose contract does not allow unsafe"),
            );
        }
    }
}

fn path_segments(p: &syn::Path) -> Vec<String> {
    p.segments.iter().map(|s| s.ident.to_string()).collect()
}

fn first_span(p: &syn::Path) -> Span {
    p.segments
        .first()
        .map(|s| s.ident.span())
        .unwrap_or_else(Span::call_site)
}

impl<'ast> Visit<'ast> for Checker<'_> {
    fn visit_path(&mut self, p: &'ast syn::Path) {
        self.check_path(&path_segments(p), first_span(p), false);
        syn::visit::visit_path(self, p);
    }

    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {
        // `pub(crate)`, `pub(super)`: a visibility names no item
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        fn leaves(t: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, Span)>) {
            match t {
                syn::UseTree::Path(p) => {
                    prefix.push(p.ident.to_string());
                    leaves(&p.tree, prefix, out);
                    prefix.pop();
                }
                syn::UseTree::Name(n) if n.ident == "self" => {
                    out.push((prefix.clone(), n.ident.span()))
                }
                syn::UseTree::Name(n) => {
                    let mut v = prefix.clone();
                    v.push(n.ident.to_string());
                    out.push((v, n.ident.span()));
                }
                syn::UseTree::Rename(r) => {
                    let mut v = prefix.clone();
                    if r.ident != "self" {
                        v.push(r.ident.to_string());
                    }
                    out.push((v, r.ident.span()));
                }
                syn::UseTree::Glob(_) => {} // check_glob
                syn::UseTree::Group(g) => g.items.iter().for_each(|t| leaves(t, prefix, out)),
            }
        }
        let mut out = Vec::new();
        leaves(&u.tree, &mut Vec::new(), &mut out);
        for (segs, span) in out {
            // a binding is checked as what it names, not through itself
            let mut p = segs.clone();
            match p.first().map(String::as_str) {
                Some("core" | "alloc") => p[0] = "std".into(),
                Some("metainfer_rt") => p[0] = "rt".into(),
                Some(first) if self.aliases.contains_key(first) && segs.len() > 1 => {
                    self.check_path(&segs, span, true);
                    continue;
                }
                _ => {}
            }
            if !self.allowed(&p, true) {
                self.refuse(&p, span);
            }
        }
    }

    fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
        let name = m.method.to_string();
        if !self.allow.file_access && FILE_METHODS.contains(&name.as_str()) {
            self.push(
                m.method.span(),
                format!("`.{name}()` reaches the file system; only the model file reader may"),
            );
        }
        syn::visit::visit_expr_method_call(self, m);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        if let Some(name) = self.macro_name(m) {
            self.macro_args(&name, m);
        }
        // the macro's path itself is not visited as a path: macro_name checked it
    }

    fn visit_attribute(&mut self, a: &'ast syn::Attribute) {
        let name = path_segments(a.path()).join("::");
        let span = a.pound_token.span;
        if !ATTRIBUTES.contains(&name.as_str())
            || (name == "target_feature" && !self.allow.unsafe_code)
        {
            self.push(
                span,
                format!(
                    "attribute #[{name}] is not allowed in a section (allowed: {}; target_feature only where the contract allows unsafe)",
                    ATTRIBUTES.join(", ")
                ),
            );
            return;
        }
        match name.as_str() {
            "derive" => {
                let paths =
                    a.parse_args_with(Punctuated::<syn::Path, syn::Token![,]>::parse_terminated);
                let ok = paths.as_ref().is_ok_and(|ps| {
                    ps.iter().all(|p| {
                        let s = path_segments(p);
                        s.last().is_some_and(|l| DERIVES.contains(&l.as_str()))
                            && (s.len() == 1 || self.resolve(&s, 0).iter().all(|r| r[0] == "std"))
                    })
                });
                if !ok {
                    self.push(
                        span,
                        format!("only std's traits may be derived ({})", DERIVES.join(", ")),
                    );
                }
            }
            "doc" => {
                if let syn::Meta::NameValue(nv) = &a.meta {
                    self.visit_expr(&nv.value);
                }
            }
            _ => {}
        }
    }

    fn visit_item_macro(&mut self, i: &'ast syn::ItemMacro) {
        // item-position invocations: macro_rules! definitions and the like
        self.visit_macro(&i.mac);
        for a in &i.attrs {
            self.visit_attribute(a);
        }
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

    fn visit_item_static(&mut self, s: &'ast syn::ItemStatic) {
        if let syn::StaticMutability::Mut(m) = &s.mutability {
            self.push(
                m.span,
                format!(
                    "static mut {} is not allowed; use an atomic or a Mutex",
                    s.ident
                ),
            );
        }
        syn::visit::visit_item_static(self, s);
    }

    fn visit_item_union(&mut self, u: &'ast syn::ItemUnion) {
        self.check_unsafe(u.union_token.span, &format!("union {}", u.ident));
        syn::visit::visit_item_union(self, u);
    }

    fn visit_expr_unsafe(&mut self, e: &'ast syn::ExprUnsafe) {
        self.check_unsafe(e.unsafe_token.span, "unsafe block");
        syn::visit::visit_expr_unsafe(self, e);
    }

    fn visit_signature(&mut self, s: &'ast syn::Signature) {
        if let Some(u) = &s.unsafety {
            self.check_unsafe(u.span, &format!("unsafe fn {}", s.ident));
        }
        syn::visit::visit_signature(self, s);
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if let Some(u) = &i.unsafety {
            self.check_unsafe(u.span, "unsafe impl");
        }
        syn::visit::visit_item_impl(self, i);
    }

    fn visit_item_trait(&mut self, t: &'ast syn::ItemTrait) {
        if let Some(u) = &t.unsafety {
            self.check_unsafe(u.span, &format!("unsafe trait {}", t.ident));
        }
        syn::visit::visit_item_trait(self, t);
    }
}
