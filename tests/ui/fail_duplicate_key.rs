#[metainfer::engine(model = "qwen2", hw = "x86_64-avx2", quant = "q4_k_m", hw = "generic")]
pub struct Coder;

fn main() {}
