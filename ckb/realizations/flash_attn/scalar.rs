/// A tile of one kv head's queries over their spans in blocks with an online softmax (`flash`):
/// `q` `[spans.len()][g][hd]`, token t's g queries over rows `spans[t]` of `kv`.
pub(crate) fn attend_flash(q: &[f32], hd: usize, spans: &[std::ops::Range<usize>], kv: (&[rt::half::f16], &[rt::half::f16]), out: &mut [f32]) {
    flash(q, hd, spans, kv, (widen_f16, round_f16), (mac_lanes::<4, 16>, 16), out)
}
