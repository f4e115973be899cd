//! The `#[metainfer::engine(...)]` attribute: parsing its `key = value` arguments (also used
//! by [`crate::scan`]) and the whole expansion the `metainfer-macros` shim returns.

use crate::ckb::Ckb;
use crate::constraints::{Arg, ArgValue, ConstraintError, Constraints};
use crate::ensure::{ensure, BuildContext};
use proc_macro2::{Span, TokenStream};
use quote::{quote, ToTokens};
use syn::parse::{Parse, ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Lit, Token};

/// An argument with the spans of its key and value.
#[derive(Debug, Clone)]
pub struct SpannedArg {
    pub arg: Arg,
    pub key_span: Span,
    pub value_span: Span,
}

impl Parse for SpannedArg {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let key: syn::Ident = input.call(syn::ext::IdentExt::parse_any).map_err(|e| {
            syn::Error::new(e.span(), "expected `key = value`, e.g. model = \"qwen2\"")
        })?;
        let key_name = key.to_string();
        if !input.peek(Token![=]) {
            return Err(syn::Error::new(
                key.span(),
                format!("expected `=` after `{key_name}`: write {key_name} = <value>"),
            ));
        }
        input.parse::<Token![=]>()?;
        let expr: syn::Expr = input.parse()?;
        let value_span = expr.span();
        let value = literal_value(&key_name, &expr)?;
        Ok(SpannedArg {
            arg: Arg {
                key: key_name,
                value,
            },
            key_span: key.span(),
            value_span,
        })
    }
}

/// A literal argument value: string, integer (optionally negative), boolean, or an array of
/// string literals (optionally behind `&`).
fn literal_value(key: &str, expr: &syn::Expr) -> syn::Result<ArgValue> {
    let not_literal = || {
        syn::Error::new(
            expr.span(),
            format!("`{key}` takes a literal: a string, a positive integer or an array of strings"),
        )
    };
    match expr {
        syn::Expr::Lit(l) => match &l.lit {
            Lit::Str(s) => Ok(ArgValue::Str(s.value())),
            Lit::Int(i) => i
                .base10_parse::<i64>()
                .map(ArgValue::Int)
                .map_err(|_| syn::Error::new(i.span(), format!("`{key}` = {i} is too large"))),
            Lit::Bool(b) => Ok(ArgValue::Bool(b.value)),
            _ => Err(not_literal()),
        },
        syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => {
            match literal_value(key, &u.expr)? {
                ArgValue::Int(n) => Ok(ArgValue::Int(-n)),
                _ => Err(not_literal()),
            }
        }
        syn::Expr::Reference(r) => literal_value(key, &r.expr),
        syn::Expr::Array(a) => a
            .elems
            .iter()
            .map(|e| match e {
                syn::Expr::Lit(syn::ExprLit {
                    lit: Lit::Str(s), ..
                }) => Ok(s.value()),
                other => Err(syn::Error::new(
                    other.span(),
                    format!("`{key}` takes an array of string literals, e.g. {key} = [\"server\"]"),
                )),
            })
            .collect::<syn::Result<Vec<_>>>()
            .map(ArgValue::List),
        syn::Expr::Group(g) => literal_value(key, &g.expr),
        _ => Err(not_literal()),
    }
}

/// Parses the attribute's argument list (`model = "qwen2", hw = "…"`).
pub fn parse_args(tokens: TokenStream) -> syn::Result<Vec<SpannedArg>> {
    let list = Punctuated::<SpannedArg, Token![,]>::parse_terminated.parse2(tokens)?;
    Ok(list.into_iter().collect())
}

/// The span a [`ConstraintError`] belongs on.
pub fn error_span(e: &ConstraintError, args: &[SpannedArg], whole: Span) -> Span {
    match e.arg_index.and_then(|i| args.get(i)) {
        Some(a) if e.on_value => a.value_span,
        Some(a) => a.key_span,
        None => whole,
    }
}

/// The whole `#[metainfer::engine(attr)] item` expansion. Every error becomes a
/// `compile_error!` on the offending key's or value's span (or the attribute), followed by
/// the item unchanged.
pub fn engine_attribute(attr: TokenStream, item: TokenStream) -> TokenStream {
    match expand_attribute(attr, item.clone()) {
        Ok(tokens) => tokens,
        Err(e) => {
            let err = e.to_compile_error();
            quote!(#err #item)
        }
    }
}

fn expand_attribute(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let whole = Span::call_site();
    let args = parse_args(attr)?;
    let strukt: syn::ItemStruct = syn::parse2(item.clone()).map_err(|_| {
        syn::Error::new(
            item.span(),
            "#[metainfer::engine] goes on a unit struct, e.g. `pub struct Coder;`",
        )
    })?;
    if !matches!(strukt.fields, syn::Fields::Unit) {
        return Err(syn::Error::new(
            strukt.fields.span(),
            format!(
                "#[metainfer::engine] goes on a unit struct: write `struct {};` (the macro supplies the fields)",
                strukt.ident
            ),
        ));
    }
    if !strukt.generics.params.is_empty() || strukt.generics.where_clause.is_some() {
        return Err(syn::Error::new(
            strukt.generics.span(),
            "#[metainfer::engine] structs take no generic parameters",
        ));
    }
    let ckb = Ckb::load(Ckb::default_root()).map_err(|e| syn::Error::new(whole, e.to_string()))?;
    let plain: Vec<Arg> = args.iter().map(|a| a.arg.clone()).collect();
    let c = Constraints::from_args(&plain, &ckb)
        .map_err(|e| syn::Error::new(error_span(&e, &args, whole), e.message))?;
    let ctx = BuildContext::from_env().map_err(|e| syn::Error::new(whole, e.to_string()))?;
    let entry = ensure(&c, &ckb, &ctx).map_err(|e| {
        // A generator feature that is off belongs on the key that needs it.
        let span = match &e {
            crate::BuildError::Chain { source, .. } => match source.as_ref() {
                crate::chain::ChainError::FeatureOff(off) => args
                    .iter()
                    .find(|a| a.arg.key == off.key)
                    .map(|a| a.value_span)
                    .unwrap_or(whole),
                _ => whole,
            },
            _ => whole,
        };
        syn::Error::new(span, e.to_string())
    })?;
    let attrs = strukt
        .attrs
        .iter()
        .map(|a| a.to_token_stream())
        .collect::<TokenStream>();
    let vis = strukt.vis.to_token_stream();
    Ok(crate::expand::expand(
        attrs,
        vis,
        &strukt.ident,
        &entry,
        &ckb,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_value_kind() {
        let args = parse_args(quote!(
            model = "qwen2",
            max_seq = 4096,
            tp = -1,
            x = true,
            features = ["server", "chat"],
            f = &["a"]
        ))
        .unwrap();
        let v: Vec<Arg> = args.into_iter().map(|a| a.arg).collect();
        assert_eq!(
            v,
            vec![
                Arg::str("model", "qwen2"),
                Arg::new("max_seq", ArgValue::Int(4096)),
                Arg::new("tp", ArgValue::Int(-1)),
                Arg::new("x", ArgValue::Bool(true)),
                Arg::new(
                    "features",
                    ArgValue::List(vec!["server".into(), "chat".into()])
                ),
                Arg::new("f", ArgValue::List(vec!["a".into()])),
            ]
        );
    }

    #[test]
    fn rejects_non_literals() {
        let e = parse_args(quote!(model = some_const)).unwrap_err();
        assert!(e.to_string().contains("`model` takes a literal"), "{e}");
        let e = parse_args(quote!(model: "x")).unwrap_err();
        assert!(e.to_string().contains("expected `=` after `model`"), "{e}");
        let e = parse_args(quote!(features = [1])).unwrap_err();
        assert!(e.to_string().contains("array of string literals"), "{e}");
    }

    #[test]
    fn trailing_comma_and_empty() {
        assert_eq!(parse_args(quote!(model = "a",)).unwrap().len(), 1);
        assert!(parse_args(quote!()).unwrap().is_empty());
    }
}
