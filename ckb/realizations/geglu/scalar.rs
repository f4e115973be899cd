/// ggml's GELU constants (ggml-cpu/vec.h).
const GELU_COEF_A: f32 = 0.044715;
const SQRT_2_OVER_PI: f32 = 0.797_884_6;

/// gelu of every f16 (by its bits), rounded to f16: ggml_table_gelu_f16.
fn gelu_table() -> &'static [rt::half::f16] {
    static TABLE: std::sync::OnceLock<Vec<rt::half::f16>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let gelu = |x: f32| 0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + GELU_COEF_A * x * x)).tanh());
        (0..=u16::MAX).map(|h| rt::half::f16::from_f32(gelu(rt::half::f16::from_bits(h).to_f32()))).collect()
    })
}

/// `gate = gelu(gate) * up` as ggml_vec_geglu_f32: the f16-rounded gate looked up in the table,
/// 0 below -10, the identity above 10.
pub(crate) fn geglu(gate: &mut [f32], up: &[f32]) {
    let t = gelu_table();
    for (g, &u) in gate.iter_mut().zip(up) {
        *g = if *g <= -10.0 {
            0.0
        } else if *g >= 10.0 {
            *g * u
        } else {
            t[rt::half::f16::from_f32(*g).to_bits() as usize].to_f32() * u
        };
    }
}
