// The lane code compiled with AVX2 and FMA: vectorized 8-wide, the fmas instructions.

#[target_feature(enable = "avx2,fma")]
unsafe fn swiglu_avx2(gate: &mut [f32], up: &[f32]) {
    swiglu_lanes(gate, up)
}

#[target_feature(enable = "avx2,fma")]
unsafe fn attend_avx2(q: &[f32], kv: (&[rt::half::f16], &[rt::half::f16]), one: bool, out: &mut [f32]) {
    if one { head::<32>(q, kv, widen_f16c, out) } else { head::<8>(q, kv, widen_f16c, out) }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn attend_many_avx2(q: &[f32], spans: &[std::ops::Range<usize>], kv: (&[rt::half::f16], &[rt::half::f16]), out: &mut [f32]) {
    heads::<8>(q, spans, kv, widen_f16c, (scores8, accumulate8, round16_f16c), out)
}

/// `scores::<8>` with its bits (`p[i] = dot::<8>(q, row i) * scale`), four rows at a time: four
/// independent 8-lane sums rather than one dependent chain. Each product is of two f16 values
/// (exact in f32), so an fma adds what `r + x * y` adds.
fn scores8(q: &[f32], rows: &[f32], scale: f32, p: &mut [f32]) {
    #[target_feature(enable = "avx2,fma")]
    unsafe fn run(q: &[f32], rows: &[f32], scale: f32, p: &mut [f32]) {
        use std::arch::x86_64::*;
        // The lane fold of dot::<8>: t = lo + hi (t[l] = s[l] + s[l + 4]), (t0 + t2) + (t1 + t3).
        let fold = |r: __m256| {
            let t = _mm_add_ps(_mm256_castps256_ps128(r), _mm256_extractf128_ps(r, 1));
            let u = _mm_add_ps(t, _mm_movehl_ps(t, t));
            _mm_cvtss_f32(_mm_add_ss(u, _mm_movehdup_ps(u)))
        };
        let hd = q.len();
        let (qp, n) = (q.as_ptr(), p.len());
        let mut i = 0;
        while i + 4 <= n {
            let k = rows[i * hd..(i + 4) * hd].as_ptr();
            let mut r = [_mm256_setzero_ps(); 4];
            for c in (0..hd).step_by(8) {
                let x = _mm256_loadu_ps(qp.add(c));
                for (u, r) in r.iter_mut().enumerate() {
                    *r = _mm256_fmadd_ps(x, _mm256_loadu_ps(k.add(u * hd + c)), *r);
                }
            }
            let [a, b, c, d] = r;
            p[i..i + 4].copy_from_slice(&[fold(a) * scale, fold(b) * scale, fold(c) * scale, fold(d) * scale]);
            i += 4;
        }
        for (k, s) in rows[i * hd..].chunks_exact(hd).zip(&mut p[i..]) {
            let mut r = _mm256_setzero_ps();
            for c in (0..hd).step_by(8) {
                r = _mm256_fmadd_ps(_mm256_loadu_ps(qp.add(c)), _mm256_loadu_ps(k.as_ptr().add(c)), r);
            }
            *s = fold(r) * scale;
        }
    }
    if q.len() % 8 != 0 {
        return scores::<8>(q, rows, scale, p);
    }
    assert!(rows.len() == p.len() * q.len(), "{} rows of {} values for {} scores", rows.len() / q.len().max(1), q.len(), p.len());
    // SAFETY: check_cpu() verified the target's instruction sets when the engine loaded; every
    // load is of 8 values at c < hd (hd a multiple of 8) inside q or a row of `rows` (checked).
    unsafe { run(q, rows, scale, p) }
}

/// `accumulate::<8>` with its bits: each whole group of 8 positions (lanes 0..8 in order) goes
/// eight registers at a time, one per lane row, down each 8-column strip, so `acc` is loaded and
/// stored once per strip and block rather than once per position; an fma adds what `a + w * v`
/// adds (w and v are f16 values, their product exact in f32).
fn accumulate8(acc: &mut [f32], p: &[f32], i0: usize, v: &[f32]) {
    #[target_feature(enable = "avx2,fma")]
    unsafe fn run(acc: &mut [f32], p: &[f32], v: &[f32]) {
        use std::arch::x86_64::*;
        let (hd, a, vp) = (acc.len() / 8, acc.as_mut_ptr(), v.as_ptr());
        for c in (0..hd).step_by(8) {
            let mut r: [__m256; 8] = std::array::from_fn(|l| _mm256_loadu_ps(a.add(l * hd + c)));
            for (g, pg) in p.chunks_exact(8).enumerate() {
                for (l, r) in r.iter_mut().enumerate() {
                    *r = _mm256_fmadd_ps(_mm256_set1_ps(pg[l]), _mm256_loadu_ps(vp.add((8 * g + l) * hd + c)), *r);
                }
            }
            r.iter().enumerate().for_each(|(l, r)| _mm256_storeu_ps(a.add(l * hd + c), *r));
        }
    }
    let hd = acc.len() / 8;
    if hd % 8 != 0 {
        return accumulate::<8>(acc, p, i0, v);
    }
    let n = p.len();
    let g0 = ((8 - i0 % 8) % 8).min(n); // the first position in lane 0
    let g1 = g0 + (n - g0) / 8 * 8;
    accumulate::<8>(acc, &p[..g0], i0, &v[..g0 * hd]);
    assert!(v.len() == n * hd, "{} value rows for {n} weights", v.len() / hd.max(1));
    // SAFETY: check_cpu() verified the target's instruction sets when the engine loaded; the
    // loads and stores are of 8 values at c < hd (a multiple of 8) in the 8 lane rows of `acc`
    // and the rows g0..g1 of `v` (checked above).
    unsafe { run(acc, &p[g0..g1], &v[g0 * hd..g1 * hd]) }
    accumulate::<8>(acc, &p[g1..], i0 + g1, &v[g1 * hd..]);
}

/// `round16` with F16C, eight values an instruction pair (round to nearest even, as `half`).
fn round16_f16c(x: &mut [f32]) {
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

/// Several queries of a batch over one kv head's rows (`heads`): query j's output bitwise
/// `attend(q_j, rows spans[j] of kv, false, out_j)`.
pub(crate) fn attend_many(q: &[f32], spans: &[std::ops::Range<usize>], kv: (&[rt::half::f16], &[rt::half::f16]), out: &mut [f32]) {
    // SAFETY: check_cpu() verified the target's instruction sets when the engine loaded.
    unsafe { attend_many_avx2(q, spans, kv, out) }
}
