// `batch` is how many requests the server runs at once: without the server feature it is refused.
#[metainfer::engine(model = "qwen2", hw = "x86_64-avx2", quant = "q4_k_m", batch = 8)]
pub struct Coder;

fn main() {}
