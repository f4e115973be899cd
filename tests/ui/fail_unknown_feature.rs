#[metainfer::engine(model = "qwen2", hw = "x86_64-avx2", quant = "q4_k_m", features = ["server", "grpc"])]
pub struct Coder;

fn main() {}
