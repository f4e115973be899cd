// The only dot kernel for awq tensors is a CUDA one; the ckb implementer cannot build it for a CPU.
#[metainfer::engine(model = "qwen2", hw = "x86_64-avx2", quant = "awq")]
pub struct Coder;

fn main() {}
