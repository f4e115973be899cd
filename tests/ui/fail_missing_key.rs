#[metainfer::engine(model = "qwen2", hw = "x86_64-avx2")]
pub struct Coder;

fn main() {}
