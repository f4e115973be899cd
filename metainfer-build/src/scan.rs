//! Finding every engine a workspace references, without building it: each `.rs` file of the
//! workspace's member crates is parsed with `syn` for `#[metainfer::engine(...)]` (or
//! `#[engine(...)]`) attributes on structs and for build-script chains
//! `Engine::new("X").model(..)….emit()` (a chain without `.emit()` references nothing).
//! `cargo metainfer prepare` generates what it finds.
//!
//! Skipped: `target/`, hidden directories, nested packages, and `tests/ui/` (trybuild cases
//! reference engines that are meant to be missing or invalid).

use crate::attr::parse_args;
use crate::constraints::{Arg, ArgValue};
use crate::workspace::display_path;
use std::path::{Path, PathBuf};
use syn::spanned::Spanned;
use syn::visit::Visit;

/// An engine referenced by source code.
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    /// The file, relative to the workspace root.
    pub file: String,
    pub line: usize,
    /// The struct (or `Engine::new`) name.
    pub name: String,
    pub args: Vec<Arg>,
}

impl Reference {
    /// `file:line`.
    pub fn location(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

/// Everything a scan found: references, and problems (unparsable files, arguments that are
/// not literals), one line each.
#[derive(Debug, Clone, Default)]
pub struct Scan {
    pub references: Vec<Reference>,
    pub problems: Vec<String>,
}

/// Scans every member crate of the workspace at `root`.
pub fn scan_workspace(root: &Path) -> Scan {
    let mut scan = Scan::default();
    for member in member_dirs(root) {
        let mut files = Vec::new();
        rust_files(&member, &mut files);
        files.sort();
        for f in files {
            let shown = display_path(&f, root);
            match std::fs::read_to_string(&f) {
                Ok(text) => {
                    let (refs, problems) = scan_source(&text, &shown);
                    scan.references.extend(refs);
                    scan.problems.extend(problems);
                }
                Err(e) => scan.problems.push(format!("{shown}: cannot read: {e}")),
            }
        }
    }
    scan
}

/// The directories of the workspace's member crates: `[workspace] members` (with `*` globs,
/// minus `exclude`), plus the root itself when it is a package.
pub fn member_dirs(root: &Path) -> Vec<PathBuf> {
    let text = std::fs::read_to_string(root.join("Cargo.toml")).unwrap_or_default();
    let table: toml::Table = text.parse().unwrap_or_default();
    let list = |key: &str| -> Vec<String> {
        table
            .get("workspace")
            .and_then(|w| w.get(key))
            .and_then(|m| m.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let excluded: Vec<PathBuf> = list("exclude").iter().map(|e| root.join(e)).collect();
    let mut dirs = Vec::new();
    if table.contains_key("package") {
        dirs.push(root.to_path_buf());
    }
    for pattern in list("members") {
        for dir in glob(root, &pattern) {
            let dir = if dir == root.join(".") {
                root.to_path_buf()
            } else {
                dir
            };
            if dir.join("Cargo.toml").is_file() && !excluded.contains(&dir) && !dirs.contains(&dir)
            {
                dirs.push(dir);
            }
        }
    }
    if dirs.is_empty() {
        dirs.push(root.to_path_buf());
    }
    dirs
}

/// Expands a `members` pattern whose components may contain `*`.
fn glob(root: &Path, pattern: &str) -> Vec<PathBuf> {
    let mut current = vec![root.to_path_buf()];
    for part in pattern.split('/').filter(|p| !p.is_empty()) {
        let mut next = Vec::new();
        for dir in &current {
            if part == "." {
                next.push(dir.clone());
            } else if part.contains('*') {
                let Ok(rd) = std::fs::read_dir(dir) else {
                    continue;
                };
                let mut found: Vec<PathBuf> = rd
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.is_dir())
                    .filter(|p| {
                        wildcard(part, &p.file_name().unwrap_or_default().to_string_lossy())
                    })
                    .collect();
                found.sort();
                next.extend(found);
            } else {
                next.push(dir.join(part));
            }
        }
        current = next;
    }
    current
}

fn wildcard(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((pre, rest)) => {
            name.starts_with(pre)
                && (0..=name.len() - pre.len()).any(|i| {
                    name.is_char_boundary(pre.len() + i) && wildcard(rest, &name[pre.len() + i..])
                })
        }
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.filter_map(|e| e.ok()) {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() {
            let nested_package = p.join("Cargo.toml").is_file();
            let ui = name == "ui" && dir.file_name().is_some_and(|d| d == "tests");
            if name.starts_with('.') || name == "target" || nested_package || ui {
                continue;
            }
            rust_files(&p, out);
        } else if name.ends_with(".rs") {
            out.push(p);
        }
    }
}

/// References in one file's source; `file` is how the file is named in the results.
pub fn scan_source(text: &str, file: &str) -> (Vec<Reference>, Vec<String>) {
    let ast = match syn::parse_file(text) {
        Ok(ast) => ast,
        Err(e) => {
            let line = e.span().start().line;
            return (
                Vec::new(),
                vec![format!("{file}:{line}: cannot parse: {e}")],
            );
        }
    };
    let mut v = Finder {
        file,
        in_test: false,
        refs: Vec::new(),
        problems: Vec::new(),
    };
    v.visit_file(&ast);
    (v.refs, v.problems)
}

struct Finder<'f> {
    file: &'f str,
    /// Inside a `#[test]` fn or `#[cfg(test)]` module: builder chains there are tests of the
    /// builder, not build scripts (attributes there are still compiled, so still count).
    in_test: bool,
    refs: Vec<Reference>,
    problems: Vec<String>,
}

/// `#[test]`, `#[tokio::test]`-style, or `#[cfg(test)]`.
fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        let last = a
            .path()
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default();
        last == "test"
            || (a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test"))
    })
}

fn is_engine_attr(path: &syn::Path) -> bool {
    let segs: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
    matches!(segs.as_slice(), [one] if one == "engine")
        || matches!(segs.as_slice(), [m, e] if m == "metainfer" && e == "engine")
}

impl Finder<'_> {
    fn problem(&mut self, span: proc_macro2::Span, message: String) {
        self.problems
            .push(format!("{}:{}: {message}", self.file, span.start().line));
    }

    /// `Engine::new("X")` or `metainfer_build::Engine::new("X")`: the name.
    fn engine_new(&self, expr: &syn::Expr) -> Option<String> {
        let syn::Expr::Call(call) = expr else {
            return None;
        };
        let syn::Expr::Path(p) = &*call.func else {
            return None;
        };
        let segs: Vec<String> = p
            .path
            .segments
            .iter()
            .map(|s| s.ident.to_string())
            .collect();
        if segs.len() < 2 || segs[segs.len() - 1] != "new" || segs[segs.len() - 2] != "Engine" {
            return None;
        }
        match call.args.first() {
            Some(syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            })) if call.args.len() == 1 => Some(s.value()),
            _ => None,
        }
    }

    /// Walks a builder chain from its outermost call; returns false when it is not one.
    fn builder_chain(&mut self, outer: &syn::ExprMethodCall) -> bool {
        let mut calls = vec![outer];
        let mut receiver = &*outer.receiver;
        while let syn::Expr::MethodCall(m) = receiver {
            calls.push(m);
            receiver = &*m.receiver;
        }
        let Some(name) = self.engine_new(receiver) else {
            return false;
        };
        // Only an emitted engine is built; a chain without `.emit()` (a test of the builder,
        // `emit_to` with a hand-made context) references nothing.
        if !calls.iter().any(|c| c.method == "emit") {
            return true;
        }
        calls.reverse();
        let mut args: Vec<Arg> = Vec::new();
        for call in calls {
            let method = call.method.to_string();
            let set = |args: &mut Vec<Arg>, key: &str, v: ArgValue| {
                args.retain(|a| a.key != key);
                args.push(Arg::new(key, v));
            };
            let lit = call.args.first().map(literal);
            match method.as_str() {
                "model" | "hw" | "quant" | "format" | "generator" | "reference" | "max_seq"
                | "batch" | "tp" => match lit {
                    Some(Some(v)) => set(&mut args, &method, v),
                    _ => {
                        self.problem(
                            call.span(),
                            format!(
                                "engine `{name}`: the argument of `.{method}(…)` is not a literal, so `cargo metainfer prepare` cannot know this engine; use a literal"
                            ),
                        );
                        return true;
                    }
                },
                "feature" => match lit {
                    Some(Some(ArgValue::Str(f))) => {
                        match args.iter_mut().find(|a| a.key == "features") {
                            Some(Arg {
                                value: ArgValue::List(l),
                                ..
                            }) => l.push(f),
                            _ => args.push(Arg::new("features", ArgValue::List(vec![f]))),
                        }
                    }
                    _ => {
                        self.problem(
                            call.span(),
                            format!("engine `{name}`: `.feature(…)` takes a string literal"),
                        );
                        return true;
                    }
                },
                _ => {}
            }
        }
        self.refs.push(Reference {
            file: self.file.to_string(),
            line: outer.span().start().line,
            name,
            args,
        });
        true
    }
}

fn literal(e: &syn::Expr) -> Option<ArgValue> {
    match e {
        syn::Expr::Lit(l) => match &l.lit {
            syn::Lit::Str(s) => Some(ArgValue::Str(s.value())),
            syn::Lit::Int(i) => i.base10_parse().ok().map(ArgValue::Int),
            syn::Lit::Bool(b) => Some(ArgValue::Bool(b.value)),
            _ => None,
        },
        syn::Expr::Group(g) => literal(&g.expr),
        syn::Expr::Paren(p) => literal(&p.expr),
        _ => None,
    }
}

impl<'ast> Visit<'ast> for Finder<'_> {
    fn visit_item_struct(&mut self, s: &'ast syn::ItemStruct) {
        for attr in &s.attrs {
            if !is_engine_attr(attr.path()) {
                continue;
            }
            let tokens = match &attr.meta {
                syn::Meta::List(l) => l.tokens.clone(),
                _ => proc_macro2::TokenStream::new(),
            };
            match parse_args(tokens) {
                Ok(args) => self.refs.push(Reference {
                    file: self.file.to_string(),
                    line: attr.span().start().line,
                    name: s.ident.to_string(),
                    args: args.into_iter().map(|a| a.arg).collect(),
                }),
                Err(e) => self.problem(e.span(), format!("engine `{}`: {e}", s.ident)),
            }
        }
        syn::visit::visit_item_struct(self, s);
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        let was = self.in_test;
        self.in_test |= is_test(&f.attrs);
        syn::visit::visit_item_fn(self, f);
        self.in_test = was;
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        let was = self.in_test;
        self.in_test |= is_test(&m.attrs);
        syn::visit::visit_item_mod(self, m);
        self.in_test = was;
    }

    fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
        if !self.in_test && self.builder_chain(m) {
            // Arguments may hold further chains, the receiver chain does not.
            for a in &m.args {
                self.visit_expr(a);
            }
        } else {
            syn::visit::visit_expr_method_call(self, m);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_attributes_and_chains() {
        let src = r#"
            use metainfer::engine;

            #[metainfer::engine(model = "qwen2", hw = "x86_64-avx2", quant = "q4_k_m", features = ["server"])]
            pub struct Coder;

            #[derive(Debug)]
            #[engine(model = "qwen2.5-0.5b", hw = "generic", quant = "f32")]
            struct Small;

            #[serde(rename = "x")]
            struct NotAnEngine;

            fn main() {
                metainfer_build::Engine::new("Gpu").model("qwen2").hw("sm_89").quant("awq")
                    .feature("server").feature("chat").max_seq(4096).emit().unwrap();
                let other = Engine::new("Bad").model(MODEL).emit();
                let unemitted = Engine::new("Test").model("qwen2").emit_to(&out, &ckb, &ctx);
                foo.bar().baz();
            }

            #[test]
            fn builder_test() {
                Engine::new("InTest").model("qwen2").hw("generic").quant("f32").emit().unwrap_err();
                #[metainfer::engine(model = "qwen2", hw = "generic", quant = "f32")]
                struct CompiledInTests;
            }
        "#;
        let (refs, problems) = scan_source(src, "demo/src/main.rs");
        let names: Vec<&str> = refs.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["Coder", "Small", "Gpu", "CompiledInTests"]);
        assert_eq!(refs[0].line, 4);
        assert_eq!(refs[0].location(), "demo/src/main.rs:4");
        assert_eq!(
            refs[0].args[3],
            Arg::new("features", ArgValue::List(vec!["server".into()]))
        );
        assert_eq!(
            refs[2].args,
            vec![
                Arg::str("model", "qwen2"),
                Arg::str("hw", "sm_89"),
                Arg::str("quant", "awq"),
                Arg::new(
                    "features",
                    ArgValue::List(vec!["server".into(), "chat".into()])
                ),
                Arg::new("max_seq", ArgValue::Int(4096)),
            ]
        );
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with(
                "demo/src/main.rs:17: engine `Bad`: the argument of `.model(…)` is not a literal"
            ),
            "{problems:?}"
        );
    }

    #[test]
    fn unparsable_file_is_a_problem() {
        let (refs, problems) = scan_source("fn main( {", "x.rs");
        assert!(refs.is_empty());
        assert!(
            problems[0].starts_with("x.rs:1: cannot parse"),
            "{problems:?}"
        );
    }

    #[test]
    fn wildcards() {
        assert!(wildcard("*", "abc"));
        assert!(wildcard("crates-*", "crates-x"));
        assert!(!wildcard("crates-*", "crate"));
        assert!(wildcard("a*c", "abbc"));
    }
}
