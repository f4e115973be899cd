// Logit bias and penalties, then argmax (T = 0) or top-k → softmax(l / T) → top-p → min-p → a seeded draw.

/// xoshiro256** seeded through splitmix64: small, fast, and fully determined by the seed.
#[derive(Debug, Clone)]
pub(crate) struct SamplerRng {
    s: [u64; 4], // generator state, never all zero
}

impl SamplerRng {
    /// A generator seeded through splitmix64.
    pub(crate) fn new(seed: u64) -> SamplerRng {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let z = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            let z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        SamplerRng { s: [next(), next(), next(), next()] }
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let out = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        out
    }

    /// Uniform in [0, 1).
    pub(crate) fn next_f64(&mut self) -> f64 { (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64) }
}

/// Index of the largest logit; NaN is never chosen, ties go to the lowest id; 0 if all are NaN.
pub(crate) fn argmax(logits: &[f32]) -> u32 {
    let best = logits.iter().enumerate().filter(|c| !c.1.is_nan()).reduce(|b, c| if c.1 > b.1 { c } else { b });
    best.map_or(0, |(i, _)| i as u32)
}

/// p.logit_bias added, then llama.cpp's penalties on each distinct id seen c times in the last
/// p.repeat_last_n of `recent`: l = (l > 0 ? l / repeat : l * repeat) - c * frequency - presence.
pub(crate) fn apply_penalties(logits: &mut [f32], recent: &[u32], p: &rt::GenParams, scratch: &mut Vec<u32>) {
    for &(id, b) in &p.logit_bias {
        if let Some(l) = logits.get_mut(id as usize) {
            *l += b;
        }
    }
    let off = p.repeat_penalty == 1.0 && p.frequency_penalty == 0.0 && p.presence_penalty == 0.0;
    if off || p.repeat_last_n == 0 || recent.is_empty() {
        return;
    }
    scratch.clear();
    scratch.extend_from_slice(&recent[recent.len().saturating_sub(p.repeat_last_n)..]);
    scratch.sort_unstable();
    for run in scratch.chunk_by(|a, b| a == b) {
        if let Some(l) = logits.get_mut(run[0] as usize) {
            let r = if *l > 0.0 { *l / p.repeat_penalty } else { *l * p.repeat_penalty };
            *l = r - run.len() as f32 * p.frequency_penalty - p.presence_penalty;
        }
    }
}

/// Candidate order: higher logit first, then lower id (a total order; NaN was removed before).
fn cand_order(a: &(u32, f32), b: &(u32, f32)) -> std::cmp::Ordering {
    b.1.partial_cmp(&a.1).unwrap_or(std::cmp::Ordering::Equal).then(a.0.cmp(&b.0))
}

/// The sampler of one generation: parameters, its RNG, and scratch buffers.
#[derive(Debug, Clone)]
pub(crate) struct Sampler {
    pub(crate) p: rt::GenParams, // temperature, top_k, top_p, min_p, the penalties, logit_bias
    pub(crate) rng: SamplerRng,
    cand: Vec<(u32, f32)>, // [n_cand] (id, logit, later probability) of the surviving candidates
    seen: Vec<u32>,        // [repeat_last_n] distinct recent ids (scratch)
}

impl Sampler {
    /// A sampler for `p` (not validated here: `generate_ids` validates the parameters).
    pub(crate) fn new(p: &rt::GenParams) -> Sampler {
        Sampler { p: p.clone(), rng: SamplerRng::new(p.seed), cand: Vec::new(), seen: Vec::new() }
    }

    /// Picks the next token; `logits` [n_vocab] gets the penalty for `recent` (prompt and generated).
    pub(crate) fn sample(&mut self, logits: &mut [f32], recent: &[u32]) -> u32 {
        if let Some(id) = self.filter(logits, recent) {
            return id;
        }
        let r = self.rng.next_f64() * self.cand.iter().map(|c| c.1 as f64).sum::<f64>();
        let mut acc = 0.0f64;
        let hit = self.cand.iter().find(|c| {
            acc += c.1 as f64;
            r < acc
        });
        hit.or(self.cand.last()).map_or(0, |c| c.0)
    }

    /// The (id, renormalised probability) set the draw chooses from, most likely first; [(id, 1)] if fixed.
    pub(crate) fn candidates(&mut self, logits: &mut [f32], recent: &[u32]) -> Vec<(u32, f32)> {
        if let Some(id) = self.filter(logits, recent) {
            return vec![(id, 1.0)];
        }
        self.cand.sort_unstable_by(cand_order);
        let total: f64 = self.cand.iter().map(|c| c.1 as f64).sum();
        self.cand.iter().map(|&(id, p)| (id, (p as f64 / total) as f32)).collect()
    }

    /// Bias, penalties and filters; `Some(id)` when no draw is needed, else the kept candidates are in `self.cand`.
    fn filter(&mut self, logits: &mut [f32], recent: &[u32]) -> Option<u32> {
        apply_penalties(logits, recent, &self.p, &mut self.seen);
        if !(self.p.temperature > 0.0) {
            return Some(argmax(logits));
        }
        // Candidates without NaN / -inf; a +inf logit wins outright (lowest such id).
        if let Some(i) = logits.iter().position(|&l| l == f32::INFINITY) {
            return Some(i as u32);
        }
        self.cand.clear();
        self.cand.extend(logits.iter().enumerate().filter(|c| *c.1 > f32::NEG_INFINITY).map(|(i, &l)| (i as u32, l)));
        if self.cand.is_empty() {
            return Some(argmax(logits));
        }
        // Top-k: partial selection, then only the k survivors are sorted.
        let (k, sorted) = (self.p.top_k, self.p.top_k > 0 && self.p.top_k < self.cand.len());
        if sorted {
            self.cand.select_nth_unstable_by(k - 1, cand_order);
            self.cand.truncate(k);
            self.cand.sort_unstable_by(cand_order);
        }
        // Softmax with temperature (in place: .1 becomes the probability).
        let max = self.cand.iter().fold(f32::NEG_INFINITY, |m, c| m.max(c.1));
        let inv_t = 1.0 / self.p.temperature;
        let mut sum = 0.0f64;
        for c in self.cand.iter_mut() {
            let e = (((c.1 - max) * inv_t) as f64).exp();
            c.1 = e as f32;
            sum += e;
        }
        let inv_sum = (1.0 / sum) as f32;
        self.cand.iter_mut().for_each(|c| c.1 *= inv_sum);
        // Top-p: the smallest prefix (by probability) whose mass reaches top_p. Unless top-k sorted already,
        // sort only the p >= 1e-6 head when its mass reaches top_p (the cut falls inside it), else all.
        if self.p.top_p < 1.0 && self.cand.len() > 1 {
            if !sorted {
                let mut w = 0;
                for r in 0..self.cand.len() {
                    if self.cand[r].1 >= 1e-6 {
                        self.cand.swap(w, r);
                        w += 1;
                    }
                }
                self.cand[..w].sort_unstable_by(cand_order);
                if self.cand[..w].iter().map(|c| c.1 as f64).sum::<f64>() < self.p.top_p as f64 {
                    self.cand.sort_unstable_by(cand_order);
                }
            }
            let mut cum = 0.0f64;
            let keep = self.cand.iter().position(|c| {
                cum += c.1 as f64;
                cum >= self.p.top_p as f64
            });
            self.cand.truncate(keep.map_or(self.cand.len(), |j| j + 1));
        }
        // Min-p: drop tokens below min_p × the top probability.
        if self.p.min_p > 0.0 && self.cand.len() > 1 {
            let thr = self.p.min_p * self.cand.iter().fold(0.0f32, |m, c| m.max(c.1));
            self.cand.retain(|c| c.1 >= thr);
        }
        None
    }
}
