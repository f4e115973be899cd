#[metainfer::engine(model = "qwen2", hw = "generic", quant = "f32")]
pub struct Coder {
    inner: u32,
}

fn main() {}
