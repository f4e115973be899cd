// Engines run on one device: `tp` > 1 is refused until it changes the engine.
#[metainfer::engine(model = "qwen2", hw = "sm_89", quant = "awq", tp = 2)]
pub struct Coder;

fn main() {}
