// The lane code compiled with AVX2 and FMA: vectorized 8-wide, the fmas instructions.

#[target_feature(enable = "avx2,fma")]
unsafe fn swiglu_avx2(gate: &mut [f32], up: &[f32]) {
    swiglu_lanes(gate, up)
}

#[target_feature(enable = "avx2,fma")]
unsafe fn attend_avx2(q: &[f32], kv: (&[rt::half::f16], &[rt::half::f16]), one: bool, out: &mut [f32]) {
    if one { head::<32>(q, kv, widen_f16c, out) } else { head::<8>(q, kv, widen_f16c, out) }
}

/// dst = src widened to f32 (exact), eight values an F16C instruction.
fn widen_f16c(src: &[rt::half::f16], dst: &mut [f32]) {
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn widen(src: &[rt::half::f16], dst: &mut [f32]) {
        use std::arch::x86_64::{__m128i, _mm256_cvtph_ps, _mm256_storeu_ps, _mm_loadu_si128};
        let ((s8, st), (d8, dt)) = (src.split_at(src.len() / 8 * 8), dst.split_at_mut(src.len() / 8 * 8));
        st.iter().zip(dt).for_each(|(s, d)| *d = s.to_f32());
        for (s, d) in s8.chunks_exact(8).zip(d8.chunks_exact_mut(8)) {
            _mm256_storeu_ps(d.as_mut_ptr(), _mm256_cvtph_ps(_mm_loadu_si128(s.as_ptr() as *const __m128i)));
        }
    }
    // SAFETY: check_cpu() verified the target's instruction sets when the engine loaded; the
    // loads and stores are of whole chunks of 8 inside `src` and `dst` (a shorter `dst` panics).
    unsafe { widen(src, dst) }
}

/// `gate = silu(gate) * up`, bitwise ggml_vec_swiglu_f32 (swiglu_lanes).
pub(crate) fn swiglu(gate: &mut [f32], up: &[f32]) {
    // SAFETY: check_cpu() verified the target's instruction sets when the engine loaded.
    unsafe { swiglu_avx2(gate, up) }
}

/// One head's attention, bitwise llama.cpp's (`head`; `one`: a single token); `kv` = the head's (K, V), `[positions][head_dim]` each.
pub(crate) fn attend(q: &[f32], kv: (&[rt::half::f16], &[rt::half::f16]), one: bool, out: &mut [f32]) {
    // SAFETY: check_cpu() verified the target's instruction sets when the engine loaded.
    unsafe { attend_avx2(q, kv, one, out) }
}
