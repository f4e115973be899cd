//! MetaInfer: inference engines as build artifacts.
//!
//! State the runtime constraints of the engine you need; at build time MetaInfer produces a
//! compact, single-path engine for exactly those constraints, verified against the contracts
//! of its knowledge base and cached under the blake3 hash of the constraints. Your crate
//! compiles it as ordinary Rust.
//!
//! ```ignore
//! use metainfer::GenParams;
//!
//! #[metainfer::engine(model = "qwen2", hw = "x86_64-avx2", quant = "q4_k_m")]
//! pub struct Coder;
//!
//! let mut coder = Coder::load("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")?;
//! let out = coder.generate("def fibonacci(n):", &GenParams::greedy(64))?;
//! ```
//!
//! Or from a build script, with `metainfer-build` as a build dependency:
//!
//! ```ignore
//! // build.rs
//! metainfer_build::Engine::new("Coder").model("qwen2").hw("sm_89").quant("awq").emit()?;
//! // src/lib.rs
//! metainfer::include_engine!(Coder);
//! ```
//!
//! The struct derefs to the generated `Engine`; `Coder::KEY` is its cache key and
//! `Coder::CONSTRAINTS` the canonical constraints. Whether a build may generate engines is
//! set by `METAINFER_MODE` (`auto`, `offline`, `refresh`); `cargo metainfer prepare` (the CLI,
//! `cargo install --path metainfer-cli`) generates every engine a workspace references, and
//! `cargo metainfer prepare --check` verifies the committed cache.
//!
//! Features: `server` (the OpenAI-compatible server section's runtime), `hf` (Hugging Face
//! checkpoints, `quant = "awq"`), `cuda` (cuda engines, and NVRTC for the generator), `llm`
//! (the generator's LLM client, for `generator = "llm" | "auto"`). None is on by default, so
//! the macro compiles only what expansion and CKB generation need.
//!
//! [`rt`] is the runtime vocabulary every generated engine shares; its main types are
//! re-exported here.

pub use metainfer_macros::engine;
pub use metainfer_rt as rt;
pub use rt::{Error, GenParams, Message, Stats, TemplateKwargs};

/// Includes an engine that a build script emitted with `metainfer_build::Engine::new("Name")
/// …emit()`: `OUT_DIR/metainfer_<Name>.rs`, which defines `pub struct Name`.
#[macro_export]
macro_rules! include_engine {
    ($name:ident) => {
        include!(concat!(
            env!("OUT_DIR"),
            "/metainfer_",
            stringify!($name),
            ".rs"
        ));
    };
}

/// Emitted by the expansion of an engine generated with `features = ["server"]`: nothing when
/// this crate's `server` feature is on, else a compile error that says how to turn it on.
#[doc(hidden)]
#[cfg(feature = "server")]
#[macro_export]
macro_rules! __require_server_feature {
    () => {};
}

#[doc(hidden)]
#[cfg(not(feature = "server"))]
#[macro_export]
macro_rules! __require_server_feature {
    () => {
        compile_error!(
            "this engine was generated with features = [\"server\"], which needs the `server` feature of the metainfer crate: in Cargo.toml, metainfer = { version = \"…\", features = [\"server\"] }"
        );
    };
}

/// Emitted by the expansion of an engine that loads Hugging Face checkpoints (a safetensors
/// quant such as `awq`): nothing when this crate's `hf` feature is on, else a compile error
/// that says how to turn it on.
#[doc(hidden)]
#[cfg(feature = "hf")]
#[macro_export]
macro_rules! __require_hf_feature {
    () => {};
}

#[doc(hidden)]
#[cfg(not(feature = "hf"))]
#[macro_export]
macro_rules! __require_hf_feature {
    () => {
        compile_error!(
            "this engine loads Hugging Face checkpoints (a safetensors quant such as awq), which needs the `hf` feature of the metainfer crate: in Cargo.toml, metainfer = { version = \"…\", features = [\"hf\"] }"
        );
    };
}

/// Emitted by the expansion of an engine generated for a cuda target (`hw = "sm_80"` …):
/// nothing when this crate's `cuda` feature is on, else a compile error that says how to turn
/// it on.
#[doc(hidden)]
#[cfg(feature = "cuda")]
#[macro_export]
macro_rules! __require_cuda_feature {
    () => {};
}

#[doc(hidden)]
#[cfg(not(feature = "cuda"))]
#[macro_export]
macro_rules! __require_cuda_feature {
    () => {
        compile_error!(
            "this engine was generated for a cuda target (hw = \"sm_XX\"), which needs the `cuda` feature of the metainfer crate: in Cargo.toml, metainfer = { version = \"…\", features = [\"cuda\"] } (building needs no CUDA install; the driver is loaded at run time)"
        );
    };
}
