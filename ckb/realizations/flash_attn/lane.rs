/// Positions of K and V per block of `flash` (each block's rows, widened once, serve every query
/// of the tile); blocks start at multiples of it in the rows passed.
pub(crate) const FLASH_KB: usize = 64;

/// `c[a][r] += Σ_k b[a * sa + k * sk] · m[k][r]` for the rows `a` of `arows` and the lanes `r` of
/// `0..rp` (`c` and `m` `rp` apart; `rp` a multiple of the realization's lane count), k in order:
/// the tile product of `flash` (scores: a = position, k = head dim; the weighted sum: a = head
/// dim, k = position). Every product is of two f16 values, exact in f32, so an fma adds what
/// `s + b * m` adds.
type FlashMac = fn(&mut [f32], &[f32], usize, std::ops::Range<usize>, &[f32], (usize, usize), usize);

/// The lane form of `FlashMac`: `A` rows by `V` lanes at a time (the rows past the last whole
/// group of A one by one; rp a multiple of V).
#[inline(always)]
fn mac_lanes<const A: usize, const V: usize>(c: &mut [f32], m: &[f32], rp: usize, arows: std::ops::Range<usize>, b: &[f32], (sa, sk): (usize, usize), nk: usize) {
    assert!(rp % V == 0, "{rp} lanes are not whole groups of {V}");
    let tile = |c: &mut [f32], a0: usize, na: usize| {
        for r0 in (0..rp).step_by(V) {
            let mut acc = [[0.0f32; V]; A];
            (0..na).for_each(|a| acc[a].copy_from_slice(&c[(a0 + a) * rp + r0..][..V]));
            for k in 0..nk {
                let mk: &[f32; V] = m[k * rp + r0..][..V].try_into().unwrap();
                for (a, acc) in acc.iter_mut().enumerate().take(na) {
                    let bv = b[(a0 + a) * sa + k * sk];
                    acc.iter_mut().zip(mk).for_each(|(s, &x)| *s += bv * x);
                }
            }
            (0..na).for_each(|a| c[(a0 + a) * rp + r0..][..V].copy_from_slice(&acc[a]));
        }
    };
    let a1 = arows.start + arows.len() / A * A;
    (arows.start..a1).step_by(A).for_each(|a0| tile(c, a0, A));
    (a1..arows.end).for_each(|a0| tile(c, a0, 1));
}

/// A register tile of `FlashMac`: `A` rows (from `c`, `rp` apart; b at row a0 given) by one
/// group of the realization's lanes (at `c` and `m`), over k < nk, as
/// `(c, m, rp, b, (sa, sk), nk)`.
type MacTile = unsafe fn(*mut f32, *const f32, usize, *const f32, (usize, usize), usize);

/// `mac_lanes` with its bits by register tiles: four rows by `width` lanes at a time (`tile4`),
/// the rows past the last group of four one by one (`tile1`).
///
/// # Safety
/// The CPU has the tiles' instruction sets, and each tile reads and writes only its rows of `c`
/// from the pointer given, `width` lanes from it (and of `m`, rows k < nk), and `b` at
/// a * sa + k * sk: the bounds this checks.
unsafe fn mac_tiles(width: usize, (tile4, tile1): (MacTile, MacTile), c: &mut [f32], m: &[f32], rp: usize, arows: std::ops::Range<usize>, b: &[f32], (sa, sk): (usize, usize), nk: usize) {
    assert!(rp % width == 0 && c.len() >= arows.end * rp && m.len() >= nk * rp && (arows.is_empty() || nk == 0 || (arows.end - 1) * sa + (nk - 1) * sk < b.len()), "a tile product of rows {arows:?} x {rp} lanes x {nk} out of its slices");
    let a1 = arows.start + arows.len() / 4 * 4;
    for (a0, tile) in (arows.start..a1).step_by(4).map(|a| (a, tile4)).chain((a1..arows.end).map(|a| (a, tile1))) {
        for r0 in (0..rp).step_by(width) {
            // SAFETY: the caller's (instruction sets, the tiles' reach); the reach is in bounds:
            // lanes r0.. < rp of rows a0.. < arows.end of `c` and rows k < nk of `m`, `b` at
            // (a0 + a) * sa + k * sk < b.len() (checked above).
            unsafe { tile(c[a0 * rp + r0..].as_mut_ptr(), m[r0..].as_ptr(), rp, b[a0 * sa..].as_ptr(), (sa, sk), nk) }
        }
    }
}

/// Attention for a tile of one kv head's queries in blocks with an online softmax (flash
/// attention): `q` is `[spans.len()][g][hd]`, token t's g queries attend to rows `spans[t]` of
/// `(K, V)` (`[positions][hd]` f16; spans nondecreasing in both ends, as a prefill's are). The
/// queries, rounded to f16, are lanes (`qt[d][r]`, `rp` = the rows rounded up to whole groups of
/// `rv`, padding lanes repeating the last query's span); per block of FLASH_KB positions (at
/// multiples of FLASH_KB of the rows, so a query's blocks depend on its span alone), widened once
/// for all of them:
///   s[j][r] = Σ_d qt[d][r] k[j][d] (d in order) · 1/sqrt(hd), -inf outside r's span
///   m' = max(m, max_j s) ; a = expf(m - m') where m' > m, else 1
///   p = f16(expf(s - m')) (0 outside the span) ; l = l·a + Σ_j p_j ; o = o·a + Σ_j p_j v_j (j in order)
/// and out = o / l. Every value's operations are the same whatever the lane count (realizations
/// differ only in how many lanes run at once), so every realization has these bits.
#[inline(always)]
fn flash(q: &[f32], hd: usize, spans: &[std::ops::Range<usize>], (kh, vh): (&[rt::half::f16], &[rt::half::f16]), (widen, round): (fn(&[rt::half::f16], &mut [f32]), fn(&mut [f32])), (mac, rv): (FlashMac, usize), out: &mut [f32]) {
    let nt = spans.len();
    let g = q.len() / (hd * nt).max(1);
    assert!(hd > 0 && nt > 0 && q.len() == nt * g * hd && out.len() == q.len(), "{nt} tokens of {hd}-value heads: q of {} and out of {} values", q.len(), out.len());
    let (lo, hi) = (spans[0].start, spans[nt - 1].end);
    assert!(hi * hd <= kh.len() && kh.len() == vh.len(), "spans up to row {hi} of {} rows", kh.len() / hd);
    assert!(spans.windows(2).all(|w| w[0].start <= w[1].start && w[0].end <= w[1].end) && rv % 16 == 0, "spans must be nondecreasing, lanes whole groups of 16");
    let (rows, scale) = (nt * g, 1.0 / (hd as f32).sqrt());
    let rp = rows.div_ceil(rv) * rv;
    let (st, en): (Vec<u32>, Vec<u32>) = (0..rp).map(|r| &spans[(r / g.max(1)).min(nt - 1)]).map(|s| (s.start as u32, s.end as u32)).unzip();
    let mut qt = vec![0.0f32; hd * rp]; // [hd][rp]
    for (r, qr) in q.chunks_exact(hd).enumerate() {
        qr.iter().enumerate().for_each(|(d, &v)| qt[d * rp + r] = v);
    }
    round(&mut qt);
    // per lane: max, sum of weights, weighted sum of values ([hd][rp])
    let (mut m, mut l, mut ot) = (vec![f32::NEG_INFINITY; rp], vec![0.0f32; rp], vec![0.0f32; hd * rp]);
    let (mut s, mut kr, mut vr, mut a) = (vec![0.0f32; FLASH_KB * rp], vec![0.0f32; FLASH_KB * hd], vec![0.0f32; FLASH_KB * hd], vec![0.0f32; rp]);
    // 16 lanes of a slice as an array, and back (loads and stores of whole groups, so that
    // the lane loops vectorize)
    fn get(x: &[f32], at: usize) -> [f32; 16] {
        x[at..at + 16].try_into().unwrap()
    }
    fn put(x: &mut [f32], at: usize, v: [f32; 16]) {
        x[at..at + 16].copy_from_slice(&v)
    }
    for b in (lo / FLASH_KB * FLASH_KB..hi).step_by(FLASH_KB) {
        let nb = (hi - b).min(FLASH_KB);
        widen(&kh[b * hd..(b + nb) * hd], &mut kr[..nb * hd]);
        widen(&vh[b * hd..(b + nb) * hd], &mut vr[..nb * hd]);
        let s = &mut s[..nb * rp];
        s.iter_mut().for_each(|v| *v = 0.0);
        mac(s, &qt, rp, 0..nb, &kr, (hd, 1), hd);
        // the scaled scores in each lane's span (else -inf), and their max with m into `a`
        let full = st.iter().zip(&en).all(|(&a, &e)| a as usize <= b && e as usize >= b + nb);
        a.copy_from_slice(&m);
        for j in 0..nb {
            let p = (b + j) as u32;
            for c in (0..rp).step_by(16) {
                let (mut v, mut mx, s16, e16) = (get(s, j * rp + c), get(&a, c), &st[c..c + 16], &en[c..c + 16]);
                for i in 0..16 {
                    v[i] = if full || (p >= s16[i]) & (p < e16[i]) { v[i] * scale } else { f32::NEG_INFINITY };
                    mx[i] = if v[i] > mx[i] { v[i] } else { mx[i] };
                }
                put(s, j * rp + c, v);
                put(&mut a, c, mx);
            }
        }
        // a = the rescale of what is summed so far (1 where the max stays); m = the new max
        for c in (0..rp).step_by(16) {
            let (mut mx, mut mm, mut ll, mut d) = (get(&a, c), get(&m, c), get(&l, c), [0.0f32; 16]);
            (0..16).for_each(|i| d[i] = mm[i] - mx[i]);
            let e = ggml_expf_lanes(d);
            for i in 0..16 {
                let grew = mx[i] > mm[i];
                mm[i] = if grew { mx[i] } else { mm[i] };
                mx[i] = if grew { e[i] } else { 1.0 };
                ll[i] *= mx[i];
            }
            put(&mut a, c, mx);
            put(&mut m, c, mm);
            put(&mut l, c, ll);
        }
        if a.iter().any(|&x| x != 1.0) {
            for d in 0..hd {
                for c in (0..rp).step_by(16) {
                    let (mut o, x) = (get(&ot, d * rp + c), get(&a, c));
                    (0..16).for_each(|i| o[i] *= x[i]);
                    put(&mut ot, d * rp + c, o);
                }
            }
        }
        // p = f16(expf(s - m)) (0 outside the span), summed into l in position order
        for j in 0..nb {
            for c in (0..rp).step_by(16) {
                let (v, mm, mut d) = (get(s, j * rp + c), get(&m, c), [0.0f32; 16]);
                (0..16).for_each(|i| d[i] = v[i] - mm[i]);
                let e = ggml_expf_lanes(d);
                (0..16).for_each(|i| d[i] = if v[i] > f32::NEG_INFINITY { e[i] } else { 0.0 });
                put(s, j * rp + c, d);
            }
        }
        round(s);
        for j in 0..nb {
            for c in (0..rp).step_by(16) {
                let (v, mut ll) = (get(s, j * rp + c), get(&l, c));
                (0..16).for_each(|i| ll[i] += v[i]);
                put(&mut l, c, ll);
            }
        }
        mac(&mut ot, s, rp, 0..hd, &vr, (1, hd), nb);
    }
    for (r, o) in out.chunks_exact_mut(hd).enumerate() {
        o.iter_mut().enumerate().for_each(|(d, o)| *o = ot[d * rp + r] / l[r]);
    }
}

/// `attend_flash` by the lane forms alone (one row at a time, `half`'s conversions): the gates'
/// reference for the realizations' kernels (their bits must be these).
#[cfg(test)]
pub(crate) fn attend_flash_lanes(q: &[f32], hd: usize, spans: &[std::ops::Range<usize>], kv: (&[rt::half::f16], &[rt::half::f16]), out: &mut [f32]) {
    let widen = <[rt::half::f16] as rt::half::slice::HalfFloatSliceExt>::convert_to_f32_slice;
    let round = |x: &mut [f32]| x.iter_mut().for_each(|v| *v = rt::half::f16::from_f32(*v).to_f32());
    flash(q, hd, spans, kv, (widen, round), (mac_lanes::<1, 16>, 16), out)
}
