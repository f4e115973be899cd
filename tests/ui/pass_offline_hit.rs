// The fixture cache holds a valid entry (a tiny hand-written engine) for these constraints.
use std::ops::Deref;

/// The attribute keeps doc comments and derives.
#[metainfer::engine(
    quant = "f32",
    hw = "generic",
    model = "qwen2",
)]
pub(crate) struct Tiny;

fn main() {
    let tiny = Tiny::load("model.gguf").unwrap();
    assert_eq!(tiny.path(), std::path::Path::new("model.gguf"));
    assert_eq!(tiny.deref().path(), std::path::Path::new("model.gguf"));
    assert_eq!(Tiny::KEY.len(), 64);
    assert!(Tiny::CONSTRAINTS.contains("hw = \"generic\"\n"));
    let _engine = tiny.into_inner();
}
