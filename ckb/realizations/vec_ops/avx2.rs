// The lane code compiled with AVX2 and FMA: vectorized 8-wide, the fmas instructions.

#[target_feature(enable = "avx2,fma")]
unsafe fn swiglu_avx2(gate: &mut [f32], up: &[f32]) {
    swiglu_lanes(gate, up)
}

#[target_feature(enable = "avx2,fma")]
unsafe fn attend_avx2(q: &[f32], kv: (&[f32], &[f32], usize, usize), end: usize, one: bool, out: &mut [f32]) {
    if one { head::<32>(q, end, kv, out) } else { head::<8>(q, end, kv, out) }
}

/// `gate = silu(gate) * up`, bitwise ggml_vec_swiglu_f32 (swiglu_lanes).
pub(crate) fn swiglu(gate: &mut [f32], up: &[f32]) {
    // SAFETY: check_cpu() verified the target's instruction sets when the engine loaded.
    unsafe { swiglu_avx2(gate, up) }
}

/// One head's attention, bitwise llama.cpp's (`head`; `one`: a single token); `kv` = (K, V, row stride, offset).
pub(crate) fn attend(q: &[f32], kv: (&[f32], &[f32], usize, usize), end: usize, one: bool, out: &mut [f32]) {
    // SAFETY: check_cpu() verified the target's instruction sets when the engine loaded.
    unsafe { attend_avx2(q, kv, end, one, out) }
}
