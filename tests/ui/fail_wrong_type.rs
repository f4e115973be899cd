#[metainfer::engine(model = "qwen2", hw = "x86_64-avx2", quant = "q4_k_m", max_seq = "4096")]
pub struct Coder;

fn main() {}
