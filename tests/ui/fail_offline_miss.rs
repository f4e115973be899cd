// No entry for these constraints in the fixture cache, and METAINFER_MODE=offline.
#[metainfer::engine(model = "qwen2", hw = "x86_64-avx2", quant = "q4_k_m")]
pub struct Coder;

fn main() {}
