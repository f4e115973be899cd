// `chat` is in every engine already: asking for it would change only the cache key.
#[metainfer::engine(model = "qwen2", hw = "x86_64-avx2", quant = "q4_k_m", features = ["chat"])]
pub struct Coder;

fn main() {}
