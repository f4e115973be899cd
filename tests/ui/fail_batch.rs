// Engines decode one sequence at a time: `batch` > 1 is refused until it changes the engine.
#[metainfer::engine(model = "qwen2", hw = "x86_64-avx2", quant = "q4_k_m", batch = 8)]
pub struct Coder;

fn main() {}
