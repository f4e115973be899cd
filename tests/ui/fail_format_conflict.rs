#[metainfer::engine(model = "qwen2", hw = "sm_89", quant = "awq", format = "gguf")]
pub struct Coder;

fn main() {}
