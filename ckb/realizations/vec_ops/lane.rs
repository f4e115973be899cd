/// ggml's vectorized expf (ggml_v_expf, which llama.cpp's softmax and silu use instead of libm's)
/// on one lane: the same operations (fma where it has fma), so the same bits.
#[inline(always)]
pub(crate) fn ggml_expf(x: f32) -> f32 {
    ggml_expf_lanes([x])[0]
}

/// `ggml_expf` of each lane without branches (each form's value selected per lane, as ggml's
/// blends select), so that lane loops over it vectorize.
#[inline(always)]
pub(crate) fn ggml_expf_lanes<const N: usize>(x: [f32; N]) -> [f32; N] {
    let f = f32::from_bits;
    let mut out = [0.0f32; N];
    for (o, &x) in out.iter_mut().zip(&x) {
        let r = f(0x4b40_0000); // 0x1.8p23
        let z = x.mul_add(f(0x3fb8_aa3b), r); // log2(e)
        let n = z - r;
        let b = (-n).mul_add(f(0x35bf_be8e), (-n).mul_add(f(0x3f31_7200), x)); // ln 2 in two parts
        let e = z.to_bits() << 23;
        let k = f(e.wrapping_add(1f32.to_bits()));
        let u = b * b;
        let p = f(0x3c07_2010).mul_add(b, f(0x3d2b_9f17)).mul_add(u, f(0x3e2a_af33).mul_add(b, f(0x3eff_fedb)));
        let j = p.mul_add(u, f(0x3f7f_fff6) * b);
        // The far forms (|n| > 126) take their operands only on the lanes that use them: computed
        // on every lane, an unused product underflowed (2^-125 squared, or 2^-126 times < 1) and
        // each underflow cost a microcode assist (swiglu took 5x its time). Past 192, 2^+-127 squared
        // is +inf or +0, given directly.
        let far = n.abs() > 126.0;
        let g = if n <= 0.0 { 0x8200_0000u32 } else { 0 };
        let (s1, s2) = if far { (f(g.wrapping_add(0x7f00_0000)), f(e.wrapping_sub(g))) } else { (1.0, 1.0) };
        let past = if n > 0.0 { f32::INFINITY } else { 0.0 };
        let far_v = if n.abs() > 192.0 { past } else { s2.mul_add(j, s2) * s1 };
        *o = if !far { j.mul_add(k, k) } else { far_v };
    }
    out
}

/// `gate = silu(gate) * up` as ggml_vec_swiglu_f32: x / (1 + expf(0 - x)), ggml's expf on the
/// groups of 8, libm's on the tail.
#[inline(always)]
fn swiglu_lanes(gate: &mut [f32], up: &[f32]) {
    let whole = gate.len() / 8 * 8;
    for (g, u) in gate[..whole].chunks_exact_mut(8).zip(up.chunks_exact(8)) {
        let (mut x, mut y, mut n) = ([0.0f32; 8], [0.0f32; 8], [0.0f32; 8]);
        x.copy_from_slice(g);
        y.copy_from_slice(u);
        (0..8).for_each(|i| n[i] = 0.0 - x[i]);
        let e = ggml_expf_lanes(n);
        (0..8).for_each(|i| x[i] = x[i] / (1.0 + e[i]) * y[i]);
        g.copy_from_slice(&x);
    }
    for (g, &u) in gate[whole..].iter_mut().zip(&up[whole..]) {
        *g = *g / (1.0 + (-*g).exp()) * u;
    }
}

/// `s = expf(s - max)` (s.len() a multiple of 8) and their sum as ggml_vec_soft_max_f32 forms
/// it: each group of 8 folded ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) in f32, added in f64.
#[inline(always)]
pub(crate) fn softmax_exp(s: &mut [f32], max: f32) -> f64 {
    assert!(s.len() % 8 == 0, "softmax_exp takes whole groups of 8 (pad with -inf)");
    let mut sum = 0.0f64;
    for g in s.chunks_exact_mut(8) {
        let mut x = [0.0f32; 8];
        x.copy_from_slice(g);
        (0..8).for_each(|i| x[i] -= max);
        let g8 = ggml_expf_lanes(x);
        g.copy_from_slice(&g8);
        sum += (((g8[0] + g8[4]) + (g8[2] + g8[6])) + ((g8[1] + g8[5]) + (g8[3] + g8[7]))) as f64;
    }
    sum
}

/// a · b in `L` lanes (element i in lane i % L; the remainder first, zero-padded, which changes no
/// lane), folded as `fold` folds. Every product is of two f16 values, exact in f32, so llama.cpp's
/// fmas give the same sums. Lanes 8k..8k + 8 are in r[k], whole registers.
#[inline(always)]
fn dot<const L: usize>(a: &[f32], b: &[f32]) -> f32 {
    let mut r = [[0.0f32; 8]; 4];
    let mut add = |x: &[f32], y: &[f32]| {
        for (k, r) in r.iter_mut().enumerate().take(L / 8) {
            let (x, y): (&[f32; 8], &[f32; 8]) = (x[8 * k..][..8].try_into().unwrap(), y[8 * k..][..8].try_into().unwrap());
            *r = std::array::from_fn(|j| r[j] + x[j] * y[j]);
        }
    };
    let (ca, cb) = (a.chunks_exact(L), b.chunks_exact(L));
    if !ca.remainder().is_empty() {
        let (mut ra, mut rb) = ([0.0f32; L], [0.0f32; L]);
        ra[..ca.remainder().len()].copy_from_slice(ca.remainder());
        rb[..cb.remainder().len()].copy_from_slice(cb.remainder());
        add(&ra, &rb);
    }
    ca.zip(cb).for_each(|(x, y)| add(x, y));
    let s: [f32; 8] = std::array::from_fn(|l| if L == 32 { (r[0][l] + r[2][l]) + (r[1][l] + r[3][l]) } else { r[0][l] });
    let t: [f32; 4] = std::array::from_fn(|l| s[l] + s[l + 4]);
    if L == 32 { (t[0] + t[1]) + (t[2] + t[3]) } else { (t[0] + t[2]) + (t[1] + t[3]) }
}

/// The inner loops of `heads`: `scores`, `accumulate` and `round16` (their signatures).
type HeadKernels = (fn(&[f32], usize, &[f32], f32, &mut [f32], usize), fn(&mut [f32], usize, &[f32], usize, usize, &[f32]), fn(&mut [f32]));

/// The lane forms of the inner loops for one token (32 lanes) and for a batch (8): `head`'s
/// kernels in the scalar realization, and the gates' reference (`attend_lanes`).
const LANE_FORMS: [HeadKernels; 2] = [(scores::<32>, accumulate::<32>, round16), (scores::<8>, accumulate::<8>, round16)];

/// `x = f32(f16(x))` (round to nearest even), value by value.
#[inline(always)]
fn round16(x: &mut [f32]) {
    x.iter_mut().for_each(|v| *v = rt::half::f16::from_f32(*v).to_f32());
}

/// For the queries u of `q` (`[g][hd]`) and rows k of `rows` (`[n][hd]`): `p[u * w + k] =
/// dot::<L>(q_u, row k) * scale`, one dot at a time.
#[inline(always)]
fn scores<const L: usize>(q: &[f32], hd: usize, rows: &[f32], scale: f32, p: &mut [f32], w: usize) {
    for (u, q) in q.chunks_exact(hd).enumerate() {
        rows.chunks_exact(hd).zip(&mut p[u * w..]).for_each(|(k, s)| *s = dot::<L>(q, k) * scale);
    }
}

/// For the queries u of `acc` (`[g][L][hd]`, each `L` lane rows) and rows k of `v` (`[n][hd]`):
/// lane row (i0 + k) % L of query u += p[u * w + k] * v[k], each lane row summed in position order
/// as llama.cpp's f16 matmul sums it, one position at a time.
#[inline(always)]
fn accumulate<const L: usize>(acc: &mut [f32], hd: usize, p: &[f32], w: usize, i0: usize, v: &[f32]) {
    for (u, acc) in acc.chunks_exact_mut(L * hd).enumerate() {
        for (k, v) in v.chunks_exact(hd).enumerate() {
            let wt = p[u * w + k];
            acc[(i0 + k) % L * hd..][..hd].iter_mut().zip(v).for_each(|(a, &v)| *a += wt * v);
        }
    }
}

/// Attention in llama.cpp's order (no flash attention) for a batch's queries of one kv head:
/// `q` is `[spans.len()][g][hd]` (each token's g heads), token t's queries attend to rows
/// `spans[t]` of `(K, V)` (`[positions][hd]` f16 each): softmax(f16(q) · K / sqrt(hd)) · V with
/// the probabilities rounded to f16, the dots summed in `L` lanes as its f16 matmuls sum them (one
/// token as ggml_vec_dot_f16, 32 lanes; a batch as tinyBLAS, 8). The rows are widened (exact)
/// `kv_block` (8 L) at a time once for all the queries, and `kernels` (these lane forms, or faster ones
/// with their bits) take a token's g queries at once.
#[inline(always)]
fn heads<const L: usize>(q: &[f32], hd: usize, spans: &[std::ops::Range<usize>], (kh, vh): (&[rt::half::f16], &[rt::half::f16]), widen: fn(&[rt::half::f16], &mut [f32]), kernels: HeadKernels, out: &mut [f32]) {
    // 8 positions per lane row and block: the accumulate tiles keep a lane row's sums in
    // registers down its positions of the block
    let kv_block = 8 * L;
    let nt = spans.len();
    let g = q.len() / (hd * nt).max(1);
    assert!(hd > 0 && q.len() == nt * g * hd && out.len() == q.len(), "{nt} tokens of {hd}-value heads: q of {} and out of {} values", q.len(), out.len());
    let (lo, hi) = (spans.iter().map(|s| s.start).min().unwrap_or(0), spans.iter().map(|s| s.end).max().unwrap_or(0));
    assert!(hi * hd <= kh.len() && kh.len() == vh.len(), "spans up to row {hi} of {} rows", kh.len() / hd);
    let scale = 1.0 / (hd as f32).sqrt();
    let mut q = q.to_vec();
    (kernels.2)(&mut q);
    // Query (t, u)'s scores at p[(t * g + u) * w..], padded to a multiple of 32 with -inf as
    // llama.cpp's mask pads them.
    let w = spans.iter().map(|s| s.len().div_ceil(32) * 32).max().unwrap_or(0);
    let mut p = vec![f32::NEG_INFINITY; nt * g * w];
    let mut rows = vec![0.0f32; kv_block * hd];
    // Token t's rows in s..e: (t, rows of the block, its scores' range in p).
    let each = |s: usize, e: usize, f: &mut dyn FnMut(usize, std::ops::Range<usize>, std::ops::Range<usize>)| {
        for (t, sp) in spans.iter().enumerate() {
            let (a, b) = (sp.start.max(s), sp.end.min(e));
            if a < b && g > 0 {
                f(t, (a - s) * hd..(b - s) * hd, t * g * w + a - sp.start..(t * g + g - 1) * w + b - sp.start);
            }
        }
    };
    for s in (lo..hi).step_by(kv_block) {
        let e = (s + kv_block).min(hi);
        widen(&kh[s * hd..e * hd], &mut rows[..(e - s) * hd]);
        each(s, e, &mut |t, r, pr| (kernels.0)(&q[t * g * hd..][..g * hd], hd, &rows[r], scale, &mut p[pr], w));
    }
    for (j, pj) in p.chunks_exact_mut(w.max(1)).enumerate() {
        let n = spans[j / g].len();
        let pj = &mut pj[..n.div_ceil(32) * 32];
        let max = pj[..n].iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s));
        let inv = (1.0 / softmax_exp(pj, max)) as f32;
        pj.iter_mut().for_each(|v| *v *= inv);
        (kernels.2)(pj);
    }
    let mut acc = vec![0.0f32; nt * g * L * hd]; // query j's lane rows at acc[j * L * hd..]
    for s in (lo..hi).step_by(kv_block) {
        let e = (s + kv_block).min(hi);
        widen(&vh[s * hd..e * hd], &mut rows[..(e - s) * hd]);
        each(s, e, &mut |t, r, pr| {
            let i0 = pr.start - t * g * w;
            (kernels.1)(&mut acc[t * g * L * hd..][..g * L * hd], hd, &p[pr], w, i0, &rows[r]);
        });
    }
    for (o, a) in out.chunks_exact_mut(hd).zip(acc.chunks_exact_mut(L * hd)) {
        o.copy_from_slice(fold::<L>(a, hd));
    }
}

/// One token's attention over all the rows of a kv head for its queries `q` (`[g][hd]`, the heads
/// sharing it; `heads` with one token, the rows widened once for the g): 32 lanes for a single
/// token (`one`, ggml_vec_dot_f16; `kernels[0]`), 8 for a batch (tinyBLAS; `kernels[1]`): the lane
/// forms of the inner loops, or faster ones with their bits.
#[inline(always)]
fn head(q: &[f32], hd: usize, kv: (&[rt::half::f16], &[rt::half::f16]), one: bool, widen: fn(&[rt::half::f16], &mut [f32]), kernels: [HeadKernels; 2], out: &mut [f32]) {
    let rows = [0..kv.0.len() / hd.max(1)];
    if one { heads::<32>(q, hd, &rows, kv, widen, kernels[0], out) } else { heads::<8>(q, hd, &rows, kv, widen, kernels[1], out) }
}

/// `attend` by the lane forms of the inner loops alone: the gates' reference for the faster
/// kernels a realization passes to `head` (their bits must be these).
#[cfg(test)]
pub(crate) fn attend_lanes(q: &[f32], hd: usize, kv: (&[rt::half::f16], &[rt::half::f16]), one: bool, out: &mut [f32]) {
    let widen = <[rt::half::f16] as rt::half::slice::HalfFloatSliceExt>::convert_to_f32_slice;
    head(q, hd, kv, one, widen, LANE_FORMS, out)
}

/// Folds the `L` lane rows of `acc` (`[L][hd]`) into row 0 as llama.cpp folds its f16 dots' lanes,
/// and returns it. 8 lanes (tinyBLAS's hsum): ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)).
/// 32 lanes (ggml_vec_dot_f16's four registers x0..x3): s = (x0 + x2) + (x1 + x3) per lane,
/// t = s[0..4] + s[4..8], then two horizontal adds: (t0 + t1) + (t2 + t3).
#[inline(always)]
fn fold<const L: usize>(acc: &mut [f32], hd: usize) -> &[f32] {
    let mut add = |a: usize, b: usize| {
        let (x, y) = acc.split_at_mut(b * hd); // row a += row b
        x[a * hd..][..hd].iter_mut().zip(&y[..hd]).for_each(|(p, &q)| *p += q);
    };
    for l in (0..8).filter(|_| L == 32) {
        [(l, 16 + l), (8 + l, 24 + l), (l, 8 + l)].into_iter().for_each(|(a, b)| add(a, b));
    }
    (0..4).for_each(|l| add(l, l + 4));
    let last = if L == 32 { [(0, 1), (2, 3), (0, 2)] } else { [(0, 2), (1, 3), (0, 1)] };
    last.iter().for_each(|&(a, b)| add(a, b));
    &acc[..hd]
}
