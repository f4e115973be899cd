//! The `#[metainfer::engine(...)]` attribute. A thin shim: the parsing, validation, cache
//! lookup, generation and expansion all live in `metainfer-build`
//! ([`metainfer_build::attr::engine_attribute`]), so they can be tested and reused without a
//! proc-macro context. Use it through the `metainfer` facade crate.

use proc_macro::TokenStream;

/// Turns a unit struct into an inference engine generated for the given constraints.
///
/// ```ignore
/// #[metainfer::engine(model = "qwen2", hw = "x86_64-avx2", quant = "q4_k_m", features = ["server"])]
/// pub struct Coder;
/// ```
///
/// Keys: `model`, `hw`, `quant` (required), `format`, `max_seq`, `batch`, `tp`, `features`,
/// `generator`, `reference`. The engine comes from the workspace's `cache/` (or is generated
/// there, depending on `METAINFER_MODE`); every error points at the offending key or value.
#[proc_macro_attribute]
pub fn engine(attr: TokenStream, item: TokenStream) -> TokenStream {
    metainfer_build::attr::engine_attribute(attr.into(), item.into()).into()
}
