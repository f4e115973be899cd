//! The Rust source an engine struct expands to, shared by the `#[metainfer::engine]` macro and
//! the build.rs API: a newtype over the generated `Engine`, and a hidden module that
//! `include!`s the cache entry's `engine.rs` (and `include_str!`/`include_bytes!` of every
//! other file of the entry, so that editing any of them rebuilds the crate on stable, and the
//! rebuild re-verifies the entry).

use crate::cache::Entry;
use crate::ckb::{Ckb, TargetKind};
use proc_macro2::{Ident, Span, TokenStream};
use quote::{format_ident, quote};

/// Environment variables the expansion depends on; `option_env!` of each makes rustc track
/// them, so changing one rebuilds the crate.
pub const TRACKED_ENV: &[&str] = &[
    "METAINFER_MODE",
    "METAINFER_CACHE_DIR",
    "METAINFER_CKB_DIR",
    "CARGO_NET_OFFLINE",
];

/// `attrs vis struct name(Engine)` plus its impls and the hidden module. The `ckb` tells the
/// kind of the entry's target (a cuda engine needs the facade's `cuda` feature).
pub fn expand(
    attrs: TokenStream,
    vis: TokenStream,
    name: &Ident,
    entry: &Entry,
    ckb: &Ckb,
) -> TokenStream {
    let module = format_ident!("__metainfer_{}", snake_case(&name.to_string()));
    let key = &entry.key;
    let constraints = entry.manifest.constraints.canonical_toml();
    let lit = |p: std::path::PathBuf| p.to_string_lossy().into_owned();
    let engine = lit(entry.engine_path());
    let manifest = lit(entry.manifest_path());
    let gates = lit(entry.path("gates.toml"));
    let others: Vec<String> = entry
        .manifest
        .files
        .keys()
        .filter(|f| *f != "engine.rs" && *f != "gates.toml" && !f.starts_with("kernels/"))
        .map(|f| lit(entry.path(f)))
        .collect();
    let kernel_names: Vec<&str> = entry
        .manifest
        .files
        .keys()
        .filter_map(|f| f.strip_prefix("kernels/"))
        .collect();
    let kernel_paths: Vec<String> = kernel_names
        .iter()
        .map(|k| lit(entry.path(&format!("kernels/{k}"))))
        .collect();
    let env = TRACKED_ENV;
    let require = entry
        .manifest
        .constraints
        .has_feature(crate::constraints::Feature::Server)
        .then(|| quote!(::metainfer::__require_server_feature!();));
    let require_hf = (entry.manifest.constraints.format == crate::ckb::Format::Safetensors)
        .then(|| quote!(::metainfer::__require_hf_feature!();));
    let cuda = ckb.target_kind(&entry.manifest.constraints.hw) == Some(TargetKind::Cuda);
    let require_cuda = cuda.then(|| quote!(::metainfer::__require_cuda_feature!();));
    let summary = format!(
        "A generated inference engine for `{}` (cache key `{key}`).",
        entry.manifest.constraints.summary()
    );
    quote! {
        #attrs
        #[doc = ""]
        #[doc = #summary]
        #vis struct #name(#module::Engine);

        impl #name {
            /// The cache key of this engine (blake3 of [`Self::CONSTRAINTS`]).
            pub const KEY: &'static str = #key;
            /// The canonical constraints the engine was generated for.
            pub const CONSTRAINTS: &'static str = #constraints;

            /// Loads the model file; refuses one the engine was not generated for.
            pub fn load(
                path: impl ::core::convert::AsRef<::std::path::Path>,
            ) -> ::core::result::Result<Self, ::metainfer::rt::Error> {
                #module::Engine::load(::core::convert::AsRef::as_ref(&path)).map(#name)
            }

            /// The generated engine itself.
            pub fn into_inner(self) -> #module::Engine {
                self.0
            }
        }

        impl ::core::ops::Deref for #name {
            type Target = #module::Engine;
            fn deref(&self) -> &Self::Target {
                &self.0
            }
        }

        impl ::core::ops::DerefMut for #name {
            fn deref_mut(&mut self) -> &mut Self::Target {
                &mut self.0
            }
        }

        #[doc(hidden)]
        #[allow(dead_code, unused, clippy::all)]
        mod #module {
            #require
            #require_hf
            #require_cuda
            use ::metainfer::rt;
            include!(#engine);
            const _MANIFEST: &str = include_str!(#manifest);
            const _GATES: &str = include_str!(#gates);
            const _OTHER: &[&[u8]] = &[#(include_bytes!(#others)),*];
            /// CUDA sources / PTX of the entry's `kernels/`, by file name.
            pub(crate) const METAINFER_KERNELS: &[(&str, &[u8])] =
                &[#((#kernel_names, include_bytes!(#kernel_paths))),*];
            const _ENV: &[::core::option::Option<&str>] = &[#(option_env!(#env)),*];
        }
    }
}

/// The expansion as source text, for `OUT_DIR/metainfer_<Name>.rs` (build.rs API).
pub fn expand_source(name: &str, entry: &Entry, ckb: &Ckb) -> String {
    let ident = Ident::new(name, Span::call_site());
    let tokens = expand(TokenStream::new(), quote!(pub), &ident, entry, ckb);
    format!(
        "// generated by metainfer-build {} from cache entry {}; do not edit\n{}\n",
        crate::GENERATOR_VERSION,
        entry.key,
        tokens
    )
}

/// `CoderEngine` → `coder_engine`, `HTTPServer` → `http_server`.
pub fn snake_case(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() {
            let prev_lower =
                i > 0 && (chars[i - 1].is_lowercase() || chars[i - 1].is_ascii_digit());
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            let prev_upper = i > 0 && chars[i - 1].is_uppercase();
            if i > 0 && !out.ends_with('_') && (prev_lower || (prev_upper && next_lower)) {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::snake_case;

    #[test]
    fn snake() {
        assert_eq!(snake_case("Coder"), "coder");
        assert_eq!(snake_case("CoderEngine"), "coder_engine");
        assert_eq!(snake_case("HTTPServer"), "http_server");
        assert_eq!(snake_case("Qwen2Coder"), "qwen2_coder");
        assert_eq!(snake_case("coder_x"), "coder_x");
    }
}
