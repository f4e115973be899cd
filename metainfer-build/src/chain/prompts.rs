//! What the LLM roles are told. The implementer gets the contract, the target, the quant
//! layout, the failure modes to avoid and — by the `reference` constraint — nothing more
//! (`none`), the code of the sections it builds on (`contract`), or also a sibling realization
//! (`sibling`). The spec-reviewer gets only the code and the contract.

use super::plan::{Plan, Slot};
use crate::ckb::schema::Contract;
use crate::ckb::Ckb;
use quote::ToTokens;
use std::fmt::Write as _;

/// The implementer's standing instructions.
pub const IMPLEMENTER_SYSTEM: &str = "You are the implementer in MetaInfer, a compiler that builds a single-file Rust inference engine \
section by section. You write ONE section. Reply with exactly one ```rust code block holding the section's items \
(fns, structs, consts, impls) and nothing else of substance.\n\
Rules:\n\
- The section is wrapped in `mod <section> { use super::*; ... }` and its pub/pub(crate) items are re-exported, so \
everything the other sections expose is in scope by name; the runtime crate is `rt` (rt::Error, rt::Result, rt::half).\n\
- Do not write `mod` declarations, `#![...]` attributes, `extern crate`, `extern` blocks, or `use super::*;`.\n\
- The code policy is an allowlist, checked before anything compiles: std's collections, fmt, iter, num, ops, mem, \
slice, str, sync, thread, time (no std::process, std::net, std::env, std::os; std::fs and std::io only in the model file \
reader) and rt's Error, Result, half, serde_json, minijinja; macros: assert!, assert_eq!, assert_ne!, debug_assert!, \
panic!, unreachable!, format!, write!, writeln!, vec!, matches!, cfg! (no println!, include*!, env!, asm!, todo!, \
macro_rules!); attributes: inline, cold, derive of std traits, allow, cfg, repr, doc, must_use, and target_feature where \
unsafe is allowed. `unsafe` only when the contract says it is allowed.\n\
- Expose every interface item with exactly the signature given. The verifier compiles your section with the rest of \
the engine and runs numeric gates; when something fails you get the compiler errors or the gate output verbatim: fix \
exactly that and reply with the whole corrected section again.";

/// The spec-reviewer's standing instructions (the optional LLM pass; the static pass is syn).
pub const REVIEWER_SYSTEM: &str = "You are the spec-reviewer in MetaInfer. You see one section of Rust code and the contract it \
must meet, nothing else. Check the code against the contract's interface, pre/postconditions and pseudocode. Reply with \
`PASS` on the first line if it meets the contract, or `FAIL` on the first line followed by one line per concrete problem \
(quote the code). Do not rewrite the code.";

/// Which extra code the implementer sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reference {
    None,
    Contract,
    Sibling,
}

impl Reference {
    pub fn parse(s: &str) -> Reference {
        match s {
            "contract" => Reference::Contract,
            "sibling" => Reference::Sibling,
            _ => Reference::None,
        }
    }
}

/// The interface items the section must expose: the contract's, plus a dot kernel's entry.
pub fn required_items(slot: &Slot, contract: &Contract) -> Vec<String> {
    let mut items = contract.interface.clone();
    if let Some((entry, is_unsafe)) = &slot.entry {
        let u = if *is_unsafe { "unsafe " } else { "" };
        items.push(format!(
            "pub(crate) {u}fn {entry}(row: &[u8], x: &Act) -> f32"
        ));
    }
    items
}

/// The implementer's first message for `slot`. `code_of` gives the code of another slot
/// (by contract id) as it stands in this build, when there is one.
pub fn implementer_prompt(
    plan: &Plan,
    slot: &Slot,
    contract: &Contract,
    ckb: &Ckb,
    reference: Reference,
    code_of: &dyn Fn(&str) -> Option<String>,
) -> String {
    let t = &plan.target;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Write section `{}` — {} (contract `{}` version {}).",
        slot.id, contract.title, contract.id, contract.version
    );
    let feats = if t.features.is_empty() {
        "none (portable scalar Rust only)".to_string()
    } else {
        t.features.join(", ")
    };
    let _ = writeln!(
        s,
        "Target: `{}` — {}. CPU features you may use: {feats}.",
        t.id, t.summary
    );
    let _ = writeln!(
        s,
        "Model family: {} ({}).",
        plan.family.family, plan.family.summary
    );
    let _ = writeln!(s, "\n## Contract\n{}", contract.summary);
    let _ = writeln!(
        s,
        "\nThe section must expose exactly these items (signatures verbatim):"
    );
    for i in required_items(slot, contract) {
        let _ = writeln!(s, "- `{i}`");
    }
    if let Some((entry, is_unsafe)) = &slot.entry {
        let _ = writeln!(
            s,
            "`{entry}` is the dot kernel the engine's dispatch calls for this tensor type."
        );
        if *is_unsafe {
            let _ = writeln!(
                s,
                "It must be `#[target_feature(enable = \"{}\")]` (the dispatch calls it in `unsafe` after checking the CPU).",
                t.features.join(",")
            );
        }
    }
    list(&mut s, "Preconditions", &contract.preconditions);
    list(&mut s, "Postconditions", &contract.postconditions);
    if !contract.shapes.is_empty() {
        let _ = writeln!(s, "\nShapes:");
        for (k, v) in &contract.shapes {
            let _ = writeln!(s, "- {k}: {v}");
        }
    }
    if !contract.pseudocode.trim().is_empty() {
        let _ = writeln!(s, "\nPseudocode:\n{}", contract.pseudocode.trim());
    }
    if !contract.tolerances.is_empty() {
        let tol: Vec<String> = contract
            .tolerances
            .iter()
            .map(|(k, v)| format!("{k} = {v:e}"))
            .collect();
        let _ = writeln!(s, "\nTolerances the gates apply: {}.", tol.join(", "));
    }
    let _ = writeln!(
        s,
        "`unsafe` is {} in this section.",
        if contract.unsafe_allowed {
            "allowed"
        } else {
            "NOT allowed"
        }
    );
    if let Some(q) = plan
        .tensor_types
        .iter()
        .find(|q| q.contract.as_deref() == Some(contract.id.as_str()))
    {
        let _ = writeln!(s, "\n## Quant layout: {} ({})", q.id, q.summary);
        let _ = writeln!(
            s,
            "Blocks of {} values in {} bytes. Activation form the kernel reads: {}.",
            q.block_elems.unwrap_or(0),
            q.block_bytes.unwrap_or(0),
            q.activation.as_deref().unwrap_or("f32")
        );
        for l in &q.layout {
            let _ = writeln!(s, "- {l}");
        }
        let _ = writeln!(s, "Dequantization: {}", q.dequant);
    }
    let modes: Vec<_> = contract
        .failure_modes
        .iter()
        .filter_map(|id| ckb.failure_modes.iter().find(|m| &m.id == id))
        .collect();
    if !modes.is_empty() {
        let _ = writeln!(s, "\n## Known failure modes to avoid");
        for m in modes {
            let _ = writeln!(s, "- {}: {} Fix: {}", m.id, m.symptom, m.fix);
        }
    }
    let sib = if reference == Reference::Sibling {
        sibling(slot, contract, plan, ckb)
    } else {
        None
    };
    // What the section is likely to use: names in its contract, and in the sibling it is shown.
    let mut context = required_items(slot, contract).join("\n");
    for t in [&contract.pseudocode, &contract.summary] {
        context.push_str(t);
    }
    context.push_str(&contract.preconditions.join("\n"));
    if let Some((_, code)) = &sib {
        context.push_str(code);
    }
    let wanted = |name: &str| mentions(&context, name);
    let _ = writeln!(s, "\n## What the sections it uses provide");
    for r in &contract.requires {
        let Some(rc) = ckb.contracts.get(r) else {
            continue;
        };
        match (reference, code_of(r)) {
            (Reference::None, _) | (_, None) => {
                let _ = writeln!(s, "\n### `{r}` — {}", rc.summary);
                for i in &rc.interface {
                    let _ = writeln!(s, "- `{i}`");
                }
            }
            (_, Some(code)) => {
                let outline = item_outline(&code, Some(&wanted));
                if !outline.is_empty() {
                    let _ = writeln!(s, "\n### `{r}` — {}\nThe items your section is likely to use (bodies elided):\n```rust\n{outline}```", rc.summary);
                }
            }
        }
    }
    if let Some((name, code)) = &sib {
        let _ = writeln!(s, "\n## A sibling realization ({name}), verified, for the conventions and helper types\n```rust\n{}\n```", code.trim_end());
    }
    let _ = writeln!(
        s,
        "\nReply with the complete section `{}` as one ```rust code block.",
        slot.id
    );
    s
}

fn list(s: &mut String, title: &str, items: &[String]) {
    if items.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n{title}:");
    for i in items {
        let _ = writeln!(s, "- {i}");
    }
}

/// A realization to learn from: another variant of this contract, else a realization of a
/// contract with the same gates (another dot kernel for a dot kernel), that fits the target.
fn sibling(slot: &Slot, contract: &Contract, plan: &Plan, ckb: &Ckb) -> Option<(String, String)> {
    let read = |cid: &str, variants: &[String]| -> Option<String> {
        let mut out = String::new();
        for v in variants {
            out.push_str(
                &std::fs::read_to_string(
                    ckb.root
                        .join("realizations")
                        .join(cid)
                        .join(format!("{v}.rs")),
                )
                .ok()?,
            );
            out.push('\n');
        }
        Some(out)
    };
    let fits = |r: &crate::ckb::schema::RealizationRef| {
        r.isa.iter().all(|f| plan.target.features.contains(f))
    };
    let pick = |c: &Contract| -> Option<(String, String)> {
        let r = c
            .realizations
            .iter()
            .filter(|r| r.entry.is_some() == slot.entry.is_some() || slot.entry.is_none())
            .filter(|r| fits(r) && r.variant != "blocks")
            .min_by_key(|r| r.isa.len())?;
        let mut vs = r.with.clone();
        vs.push(r.variant.clone());
        Some((format!("{}/{}", c.id, vs.join("+")), read(&c.id, &vs)?))
    };
    if let Some(x) = pick(contract) {
        return Some(x);
    }
    ckb.contracts
        .values()
        .filter(|c| c.id != contract.id && !c.gates.is_empty() && c.gates == contract.gates)
        .filter(|c| c.requires == contract.requires)
        .find_map(pick)
}

/// The items of a section with function bodies elided: what another section can call. With
/// `wanted`, only the items (and impl blocks of the types) whose name it accepts.
pub fn item_outline(code: &str, wanted: Option<&dyn Fn(&str) -> bool>) -> String {
    let Ok(file) = syn::parse_file(code) else {
        return code.to_string();
    };
    let keep = |name: &str| wanted.is_none_or(|w| w(name));
    let public = |v: &syn::Visibility| !matches!(v, syn::Visibility::Inherited);
    let mut items: Vec<syn::Item> = Vec::new();
    for item in &file.items {
        match item {
            syn::Item::Fn(f) if public(&f.vis) && keep(&f.sig.ident.to_string()) => {
                let mut f = f.clone();
                f.attrs.clear();
                f.block.stmts.clear();
                items.push(syn::Item::Fn(f));
            }
            syn::Item::Impl(i) => {
                let ty = i.self_ty.to_token_stream().to_string();
                if !keep(&ty) {
                    continue;
                }
                let mut i = i.clone();
                i.attrs.clear();
                i.items.retain_mut(|ii| match ii {
                    syn::ImplItem::Fn(f) if public(&f.vis) || i.trait_.is_some() => {
                        f.attrs.clear();
                        f.block.stmts.clear();
                        true
                    }
                    _ => false,
                });
                if !i.items.is_empty() || i.trait_.is_some() {
                    items.push(syn::Item::Impl(i));
                }
            }
            syn::Item::Struct(_)
            | syn::Item::Enum(_)
            | syn::Item::Const(_)
            | syn::Item::Type(_)
            | syn::Item::Static(_) => {
                let (vis, name) = match item {
                    syn::Item::Struct(x) => (&x.vis, x.ident.to_string()),
                    syn::Item::Enum(x) => (&x.vis, x.ident.to_string()),
                    syn::Item::Const(x) => (&x.vis, x.ident.to_string()),
                    syn::Item::Type(x) => (&x.vis, x.ident.to_string()),
                    syn::Item::Static(x) => (&x.vis, x.ident.to_string()),
                    _ => unreachable!(),
                };
                if public(vis) && keep(&name) {
                    let mut it = item.clone();
                    strip_attrs(&mut it);
                    items.push(it);
                }
            }
            _ => {}
        }
    }
    if items.is_empty() {
        return String::new();
    }
    let text = prettyplease::unparse(&syn::File {
        shebang: None,
        attrs: Vec::new(),
        items,
    });
    // `fn f(..) -> T {}` reads as a definition; show signatures.
    text.lines()
        .map(|l| {
            l.strip_suffix(" {}")
                .map(|s| format!("{s};"))
                .unwrap_or_else(|| l.to_string())
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// Drops doc comments and other attributes from an outlined item.
fn strip_attrs(item: &mut syn::Item) {
    match item {
        syn::Item::Struct(x) => {
            x.attrs.clear();
            for f in x.fields.iter_mut() {
                f.attrs.clear();
            }
        }
        syn::Item::Enum(x) => {
            x.attrs.clear();
            for v in x.variants.iter_mut() {
                v.attrs.clear();
            }
        }
        syn::Item::Const(x) => x.attrs.clear(),
        syn::Item::Type(x) => x.attrs.clear(),
        syn::Item::Static(x) => x.attrs.clear(),
        _ => {}
    }
}

/// Whether `name` appears as a word in `text`.
fn mentions(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + name.len()..].chars().next();
        let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !word(before) && !word(after)
    })
}

/// The spec-reviewer's message: the contract and the code, nothing else.
pub fn reviewer_prompt(slot: &Slot, contract: &Contract, code: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Contract `{}` v{} — {}\n{}",
        contract.id, contract.version, contract.title, contract.summary
    );
    let _ = writeln!(s, "\nInterface (exact signatures):");
    for i in required_items(slot, contract) {
        let _ = writeln!(s, "- `{i}`");
    }
    list(&mut s, "Preconditions", &contract.preconditions);
    list(&mut s, "Postconditions", &contract.postconditions);
    if !contract.pseudocode.trim().is_empty() {
        let _ = writeln!(s, "\nPseudocode:\n{}", contract.pseudocode.trim());
    }
    let _ = writeln!(s, "\nThe code of section `{}`:\n```rust\n{}\n```\nReply PASS or FAIL (first line), then the problems.", slot.id, code.trim_end());
    s
}

/// The reviewer's verdict: `Some(problems)` when it said FAIL, `None` for PASS or a reply that
/// is neither (the LLM reviewer is advisory; only the verifier can pass a section).
pub fn reviewer_verdict(reply: &str) -> Option<String> {
    let first = reply
        .trim_start()
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .trim_matches(|c: char| c == '*' || c == '`');
    if first.to_ascii_uppercase().starts_with("FAIL") {
        let rest: String = reply
            .trim_start()
            .lines()
            .skip(1)
            .collect::<Vec<_>>()
            .join("\n");
        let detail = first[4..].trim_start_matches([':', ' ', '*']).to_string();
        Some(format!("{detail}\n{rest}").trim().to_string())
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outline_elides_bodies_and_private_items() {
        let code = "/// doc\npub struct Act { pub f32: Vec<f32>, q: Vec<i8> }\nimpl Act { pub fn new(x: &[f32]) -> Act { todo() } fn private(&self) {} }\nfn hidden() {}\npub(crate) fn dot(a: &[u8], x: &Act) -> f32 { 0.0 }\n";
        let o = item_outline(code, None);
        assert!(o.contains("pub struct Act"), "{o}");
        assert!(o.contains("pub fn new(x: &[f32]) -> Act;"), "{o}");
        assert!(
            !o.contains("private") && !o.contains("hidden") && !o.contains("todo"),
            "{o}"
        );
        assert!(
            o.contains("pub(crate) fn dot(a: &[u8], x: &Act) -> f32;"),
            "{o}"
        );
        assert!(!o.contains("doc"), "{o}");
        let only_dot = item_outline(code, Some(&|n: &str| n == "dot"));
        assert!(
            only_dot.contains("fn dot") && !only_dot.contains("Act {"),
            "{only_dot}"
        );
        assert!(mentions("x: &Act) -> f32", "Act") && !mentions("Action", "Act"));
    }

    #[test]
    fn reviewer_replies() {
        assert_eq!(reviewer_verdict("PASS\nlooks fine"), None);
        assert_eq!(
            reviewer_verdict("**FAIL**: wrong sign\n- `a - b`"),
            Some("wrong sign\n- `a - b`".into())
        );
        assert_eq!(reviewer_verdict("I think it is ok"), None);
    }
}
