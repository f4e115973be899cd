/// `gate = silu(gate) * up`, bitwise ggml_vec_swiglu_f32 (swiglu_lanes).
pub(crate) fn swiglu(gate: &mut [f32], up: &[f32]) {
    swiglu_lanes(gate, up)
}

/// One head's attention, bitwise llama.cpp's (`head`; `one`: a single token); `kv` = the head's (K, V), `[positions][head_dim]` each.
pub(crate) fn attend(q: &[f32], hd: usize, kv: (&[rt::half::f16], &[rt::half::f16]), one: bool, out: &mut [f32]) {
    head(q, hd, kv, one, widen_f16, LANE_FORMS, out)
}

/// A batch's attention over one kv head's rows (`heads`): `q` `[spans.len()][g][hd]`, token t's
/// g queries over rows `spans[t]`; each query's output bitwise `attend(q, its rows, false, ..)`.
pub(crate) fn attend_many(q: &[f32], hd: usize, spans: &[std::ops::Range<usize>], kv: (&[rt::half::f16], &[rt::half::f16]), out: &mut [f32]) {
    heads::<8>(q, hd, spans, kv, widen_f16, LANE_FORMS[1], out)
}

/// `x = f32(f16(x))` (round to nearest even), value by value.
pub(crate) fn round_f16(x: &mut [f32]) {
    round16(x)
}

/// dst = src widened to f32 (exact).
pub(crate) fn widen_f16(src: &[rt::half::f16], dst: &mut [f32]) {
    <[rt::half::f16] as rt::half::slice::HalfFloatSliceExt>::convert_to_f32_slice(src, dst)
}
