// The fixture cache holds this entry, but its engine.rs was edited after it was written.
#[metainfer::engine(model = "qwen2", hw = "generic", quant = "q8_0")]
pub struct Coder;

fn main() {}
