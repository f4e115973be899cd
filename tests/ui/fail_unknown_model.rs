#[metainfer::engine(model = "llama9", hw = "x86_64-avx2", quant = "q4_k_m")]
pub struct Coder;

fn main() {}
