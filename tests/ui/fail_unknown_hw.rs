#[metainfer::engine(model = "qwen2", hw = "x86_64-avx3", quant = "q4_k_m")]
pub struct Coder;

fn main() {}
