// Continuous batching runs in the cpu engines' server: `batch` > 1 on a cuda target is refused.
#[metainfer::engine(model = "qwen2", hw = "sm_89", quant = "q4_k_m", features = ["server"], batch = 8)]
pub struct Coder;

fn main() {}
