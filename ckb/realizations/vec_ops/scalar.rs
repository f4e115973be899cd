/// `gate = silu(gate) * up`, bitwise ggml_vec_swiglu_f32 (swiglu_lanes).
pub(crate) fn swiglu(gate: &mut [f32], up: &[f32]) {
    swiglu_lanes(gate, up)
}

/// One head's attention, bitwise llama.cpp's (`head`; `one`: a single token); `kv` = (K, V, row stride, offset).
pub(crate) fn attend(q: &[f32], kv: (&[f32], &[f32], usize, usize), end: usize, one: bool, out: &mut [f32]) {
    if one { head::<32>(q, end, kv, out) } else { head::<8>(q, end, kv, out) }
}
