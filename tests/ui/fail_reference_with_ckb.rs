// Only the llm implementer reads `reference`; with generator = "ckb" it would change only the key.
#[metainfer::engine(model = "qwen2", hw = "x86_64-avx2", quant = "q4_k_m", reference = "sibling")]
pub struct Coder;

fn main() {}
