//! No import cycles between the generator's top-level modules: each module may name
//! (`crate::<module>`, in code, attributes and macro arguments alike) only modules below it, so
//! the crate reads bottom-up (env, feature, progress, workspace; mode, ckb; constraints;
//! manifest; cache; llm, nvrtc; chain; error; ensure; expand; attr; build_api; scan) and a module
//! can be understood and tested without the ones above it. Test modules (`#[cfg(test)]`) are
//! left out: a test may reach up.

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        let meta = quote::ToTokens::to_token_stream(&a.meta).to_string();
        meta.replace(' ', "") == "cfg(test)"
    })
}

/// The `#[path = "..."]` of a `mod` item, if any.
fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// The tokens of `file` and of every non-test module it declares, recursively (doc comments
/// left out: they are attributes holding a string, so their text is not scanned).
fn module_tokens(file: &Path, is_mod_rs: bool, out: &mut TokenStream) {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let parsed = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let dir = file.parent().unwrap();
    // Children of `a.rs` live in `a/`; of `a/mod.rs` (and lib.rs) in `a/`'s own directory.
    let child_dir = if is_mod_rs {
        dir.to_path_buf()
    } else {
        dir.join(file.file_stem().unwrap())
    };
    for item in parsed.items {
        if let syn::Item::Mod(m) = &item {
            if is_cfg_test(&m.attrs) {
                continue;
            }
            if m.content.is_none() {
                let (path, mod_rs) = match path_attr(&m.attrs) {
                    Some(p) => (dir.join(p), false),
                    None => {
                        let flat = child_dir.join(format!("{}.rs", m.ident));
                        if flat.exists() {
                            (flat, false)
                        } else {
                            (child_dir.join(m.ident.to_string()).join("mod.rs"), true)
                        }
                    }
                };
                module_tokens(&path, mod_rs, out);
                continue;
            }
        }
        if let Some(attrs) = item_attrs(&item) {
            if is_cfg_test(attrs) {
                continue;
            }
        }
        out.extend(quote::ToTokens::to_token_stream(&item));
    }
}

fn item_attrs(item: &syn::Item) -> Option<&[syn::Attribute]> {
    use syn::Item::*;
    Some(match item {
        Const(i) => &i.attrs,
        Enum(i) => &i.attrs,
        Fn(i) => &i.attrs,
        Impl(i) => &i.attrs,
        Macro(i) => &i.attrs,
        Mod(i) => &i.attrs,
        Static(i) => &i.attrs,
        Struct(i) => &i.attrs,
        Trait(i) => &i.attrs,
        Type(i) => &i.attrs,
        Use(i) => &i.attrs,
        _ => return None,
    })
}

/// Every `crate::<name>` (and `crate::{<name>, ...}`) in `ts`, at any depth.
fn crate_refs(ts: TokenStream, found: &mut BTreeSet<String>) {
    let toks: Vec<TokenTree> = ts.into_iter().collect();
    for (i, t) in toks.iter().enumerate() {
        match t {
            TokenTree::Group(g) => crate_refs(g.stream(), found),
            TokenTree::Ident(id) if id == "crate" => {
                let sep = matches!(
                    (toks.get(i + 1), toks.get(i + 2)),
                    (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
                        if a.as_char() == ':' && b.as_char() == ':'
                );
                if !sep {
                    continue;
                }
                match toks.get(i + 3) {
                    Some(TokenTree::Ident(m)) => {
                        found.insert(m.to_string());
                    }
                    Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Brace => {
                        // the first segment of each path in the use tree
                        let mut start = true;
                        for t in g.stream() {
                            match &t {
                                TokenTree::Ident(m) if start => {
                                    found.insert(m.to_string());
                                    start = false;
                                }
                                TokenTree::Punct(p) if p.as_char() == ',' => start = true,
                                _ => start = false,
                            }
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    // Macro arguments and attribute arguments are token groups too, so `#[error(...)]` and
    // `format!(...)` bodies are covered by the recursion above.
}

/// Top-level module -> the top-level modules it names.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let lib = src().join("lib.rs");
    let parsed = syn::parse_file(&std::fs::read_to_string(&lib).unwrap()).unwrap();
    let mut tops = BTreeMap::new();
    for item in &parsed.items {
        if let syn::Item::Mod(m) = item {
            if m.content.is_none() && !is_cfg_test(&m.attrs) {
                let flat = src().join(format!("{}.rs", m.ident));
                let (file, mod_rs) = if flat.exists() {
                    (flat, false)
                } else {
                    (src().join(m.ident.to_string()).join("mod.rs"), true)
                };
                tops.insert(m.ident.to_string(), (file, mod_rs));
            }
        }
    }
    assert!(tops.len() > 10, "lib.rs declares the modules: {tops:?}");
    let mut g = BTreeMap::new();
    for (name, (file, mod_rs)) in &tops {
        let mut ts = TokenStream::new();
        module_tokens(file, *mod_rs, &mut ts);
        let mut refs = BTreeSet::new();
        crate_refs(ts, &mut refs);
        refs.retain(|r| r != name && tops.contains_key(r));
        g.insert(name.clone(), refs);
    }
    g
}

/// A cycle through the graph, as module names, if there is one.
fn find_cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|s| s == n) {
            let mut c = stack[at..].to_vec();
            c.push(n.to_string());
            return Some(c);
        }
        if done.contains(n) {
            return None;
        }
        stack.push(n.to_string());
        for m in g.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, g, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for n in g.keys() {
        if let Some(c) = visit(n, g, &mut Vec::new(), &mut done) {
            return Some(c);
        }
    }
    None
}

#[test]
fn the_generators_modules_have_no_import_cycles() {
    let g = graph();
    if let Some(c) = find_cycle(&g) {
        let edges: Vec<String> = g
            .iter()
            .map(|(k, v)| {
                format!(
                    "  {k} -> {}",
                    v.iter().cloned().collect::<Vec<_>>().join(", ")
                )
            })
            .collect();
        panic!(
            "import cycle: {}; move the shared item below both modules (the graph:\n{})",
            c.join(" -> "),
            edges.join("\n")
        );
    }
}

#[test]
fn the_cycle_finder_finds_cycles() {
    let g: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(find_cycle(&g).unwrap(), ["a", "b", "c", "a"]);
    let mut refs = BTreeSet::new();
    crate_refs(
        "use crate::{a::X, b}; fn f() { format!(\"{}\", crate::c::y()); } #[e(crate::d::z)] struct S;"
            .parse()
            .unwrap(),
        &mut refs,
    );
    assert_eq!(refs, ["a", "b", "c", "d"].map(String::from).into());
}
