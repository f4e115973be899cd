// The lane code compiled with AVX2 and FMA: vectorized 8-wide, the fmas instructions.

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn swiglu_avx2(gate: &mut [f32], up: &[f32]) {
    swiglu_lanes(gate, up)
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn attend_avx2(q: &[f32], hd: usize, kv: (&[rt::half::f16], &[rt::half::f16]), one: bool, out: &mut [f32]) {
    let k32: HeadKernels = (scores::<32>, accumulate_l::<32>, round_f16);
    head(q, hd, kv, one, widen_f16, [k32, (scores8, accumulate_l::<8>, round_f16)], out)
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn attend_many_avx2(q: &[f32], hd: usize, spans: &[std::ops::Range<usize>], kv: (&[rt::half::f16], &[rt::half::f16]), out: &mut [f32]) {
    heads::<8>(q, hd, spans, kv, widen_f16, (scores8, accumulate_l::<8>, round_f16), out)
}

// Q queries (at q, hd apart) x the n (even) rows at k: p[x * w + i] = dot::<8>(q_x, row i) *
// scale, two rows at a time: 2Q independent 8-lane sums, each row strip loaded once for the Q
// queries; the lanes folded as dot::<8> folds them, t = lo + hi, (t0 + t2) + (t1 + t3). Each
// product is of two f16 values (exact in f32), so an fma adds what `r + x * y` adds.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn scores8_tile<const Q: usize>(q: *const f32, hd: usize, k: *const f32, n: usize, scale: f32, p: *mut f32, w: usize) {
    use std::arch::x86_64::*;
    for i in (0..n).step_by(2) {
        let mut r = [[_mm256_setzero_ps(); 2]; Q];
        for c in (0..hd).step_by(8) {
            let ks = [_mm256_loadu_ps(k.add(i * hd + c)), _mm256_loadu_ps(k.add((i + 1) * hd + c))];
            for (x, r) in r.iter_mut().enumerate() {
                let qx = _mm256_loadu_ps(q.add(x * hd + c));
                r.iter_mut().zip(ks).for_each(|(r, k)| *r = _mm256_fmadd_ps(qx, k, *r));
            }
        }
        for (x, (z, r)) in r.iter().enumerate().flat_map(|(x, r)| r.iter().enumerate().map(move |z| (x, z))) {
            let t = _mm_add_ps(_mm256_castps256_ps128(*r), _mm256_extractf128_ps(*r, 1));
            let u = _mm_add_ps(t, _mm_movehl_ps(t, t));
            *p.add(x * w + i + z) = _mm_cvtss_f32(_mm_add_ss(u, _mm_movehdup_ps(u))) * scale;
        }
    }
}

/// `scores::<8>` with its bits: up to four queries by two rows at a time (scores8_tile), an odd
/// last row by `scores`.
fn scores8(q: &[f32], hd: usize, rows: &[f32], scale: f32, p: &mut [f32], w: usize) {
    let (g, n) = (q.len() / hd, rows.len() / hd);
    if hd % 8 != 0 || n < 2 || g == 0 {
        return scores::<8>(q, hd, rows, scale, p, w);
    }
    assert!(q.len() == g * hd && rows.len() == n * hd && p.len() >= (g - 1) * w + n && w >= n, "scores of {g} queries x {n} rows in {} values at stride {w}", p.len());
    let tiles = [scores8_tile::<1>, scores8_tile::<2>, scores8_tile::<3>, scores8_tile::<4>];
    for u in (0..g).step_by(4) {
        // SAFETY: check_cpu() verified the target's instruction sets when the engine loaded; the
        // loads are of 8 values at c < hd (a multiple of 8) in queries u.. < g and rows < n / 2 * 2,
        // the stores at x * w + i < (g - 1) * w + n <= p.len() (checked above).
        unsafe { tiles[(g - u).min(4) - 1](q[u * hd..].as_ptr(), hd, rows.as_ptr(), n / 2 * 2, scale, p[u * w..].as_mut_ptr(), w) }
    }
    if n % 2 == 1 {
        scores::<8>(q, hd, &rows[(n - 1) * hd..], scale, &mut p[n - 1..], w);
    }
}

// Q queries' lane rows (acc, each [L][hd], L * hd apart) += their weights (p, w apart) times the
// rows of `ng` whole groups of L positions at v (position L * gi + l in lane l), 16 columns at a
// time: per lane the 2Q accumulators stay in registers down every group, and each strip of a row
// is loaded once for the Q queries. An fma adds what `a + wt * v` adds (wt and v are f16 values,
// their product exact in f32).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn accumulate_tile<const Q: usize, const L: usize>(acc: *mut f32, hd: usize, p: *const f32, w: usize, v: *const f32, ng: usize) {
    use std::arch::x86_64::*;
    for (l, c) in (0..L).flat_map(|l| (0..hd).step_by(16).map(move |c| (l, c))) {
        let at = |x: usize, z: usize| acc.add(x * L * hd + l * hd + c + 8 * z);
        let mut r: [[__m256; 2]; Q] = std::array::from_fn(|x| [_mm256_loadu_ps(at(x, 0)), _mm256_loadu_ps(at(x, 1))]);
        for i in (l..L * ng).step_by(L) {
            let vs = [_mm256_loadu_ps(v.add(i * hd + c)), _mm256_loadu_ps(v.add(i * hd + c + 8))];
            for (x, r) in r.iter_mut().enumerate() {
                let b = _mm256_set1_ps(*p.add(x * w + i));
                r.iter_mut().zip(vs).for_each(|(r, v)| *r = _mm256_fmadd_ps(b, v, *r));
            }
        }
        r.iter().enumerate().for_each(|(x, r)| r.iter().enumerate().for_each(|(z, r)| _mm256_storeu_ps(at(x, z), *r)));
    }
}

/// `accumulate::<L>` with its bits: the whole groups of L positions (lanes 0..L in order) by
/// accumulate_tile, up to four queries at a time; the positions before the first and after the
/// last whole group by `accumulate`.
fn accumulate_l<const L: usize>(acc: &mut [f32], hd: usize, p: &[f32], w: usize, i0: usize, v: &[f32]) {
    let (g, n) = (acc.len() / (L * hd), v.len() / hd);
    let g0 = ((L - i0 % L) % L).min(n); // the first position in lane 0
    let g1 = g0 + (n - g0) / L * L;
    if hd % 16 != 0 || g1 == g0 || g == 0 {
        return accumulate::<L>(acc, hd, p, w, i0, v);
    }
    assert!(acc.len() == g * L * hd && v.len() == n * hd && p.len() >= (g - 1) * w + n && w >= n, "{g} queries x {n} rows: weights {} values at stride {w}", p.len());
    accumulate::<L>(acc, hd, p, w, i0, &v[..g0 * hd]);
    let tiles = [accumulate_tile::<1, L>, accumulate_tile::<2, L>, accumulate_tile::<3, L>, accumulate_tile::<4, L>];
    for u in (0..g).step_by(4) {
        // SAFETY: check_cpu() verified the target's instruction sets when the engine loaded; the
        // loads and stores are of 8 values at columns < hd (a multiple of 16) in the lane rows of
        // queries u.. < g in `acc`, in rows g0..g1 of `v` and at weights x * w + g0 + i <
        // (g - 1) * w + n (all checked above).
        unsafe { tiles[(g - u).min(4) - 1](acc[u * L * hd..].as_mut_ptr(), hd, p[u * w + g0..].as_ptr(), w, v[g0 * hd..].as_ptr(), (g1 - g0) / L) }
    }
    accumulate::<L>(acc, hd, &p[g1..], w, i0 + g1, &v[g1 * hd..]);
}

/// `x = f32(f16(x))` with F16C, eight values an instruction pair (round to nearest even, as
/// `half`).
pub(crate) fn round_f16(x: &mut [f32]) {
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn run(x8: &mut [f32]) {
        use std::arch::x86_64::*;
        for c in x8.chunks_exact_mut(8) {
            let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_loadu_ps(c.as_ptr()));
            _mm256_storeu_ps(c.as_mut_ptr(), _mm256_cvtph_ps(h));
        }
    }
    let (x8, tail) = x.split_at_mut(x.len() / 8 * 8);
    // SAFETY: check_cpu() verified the target's instruction sets when the engine loaded; the
    // loads and stores are of whole chunks of 8 inside `x8`.
    unsafe { run(x8) }
    round16(tail);
}

/// dst = src widened to f32 (exact), eight values an F16C instruction.
pub(crate) fn widen_f16(src: &[rt::half::f16], dst: &mut [f32]) {
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
pub(crate) fn attend(q: &[f32], hd: usize, kv: (&[rt::half::f16], &[rt::half::f16]), one: bool, out: &mut [f32]) {
    // SAFETY: check_cpu() verified the target's instruction sets when the engine loaded.
    unsafe { attend_avx2(q, hd, kv, one, out) }
}

/// A batch's attention over one kv head's rows (`heads`): `q` `[spans.len()][g][hd]`, token t's
/// g queries over rows `spans[t]`; each query's output bitwise `attend(q, its rows, false, ..)`.
pub(crate) fn attend_many(q: &[f32], hd: usize, spans: &[std::ops::Range<usize>], kv: (&[rt::half::f16], &[rt::half::f16]), out: &mut [f32]) {
    // SAFETY: check_cpu() verified the target's instruction sets when the engine loaded.
    unsafe { attend_many_avx2(q, hd, spans, kv, out) }
}
