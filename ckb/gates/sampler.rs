// Gate `sampler`: greedy = argmax (NaN-safe, lowest id on ties), seeded determinism, the sets
// top-k / top-p / min-p keep on handcrafted distributions, temperature scaling, llama.cpp's
// repetition, frequency and presence penalties, logit bias, draw frequencies. Compiled inside the
// engine crate.

fn gate_samp_params(temperature: f32, top_k: usize, top_p: f32, min_p: f32) -> rt::GenParams {
    rt::GenParams { temperature, top_k, top_p, min_p, seed: 1234, ..rt::GenParams::greedy(16) }
}

fn gate_samp_ids(c: &[(u32, f32)]) -> Vec<u32> {
    let mut v: Vec<u32> = c.iter().map(|x| x.0).collect();
    v.sort_unstable();
    v
}

fn gate_samp_random_logits(n: usize, seed: u64) -> Vec<f32> {
    let mut r = SamplerRng::new(seed);
    (0..n).map(|_| (r.next_f64() * 20.0 - 10.0) as f32).collect()
}

#[test]
fn gate_sampler() {
    let mut cases = 0usize;
    let mut failures = 0usize;
    let mut check = |ok: bool, what: &str| {
        cases += 1;
        if !ok {
            failures += 1;
            println!("sampler check failed: {what}");
        }
    };
    let ln = |p: f32| p.ln();
    let dist = [ln(0.5), ln(0.25), ln(0.15), ln(0.1)]; // probabilities 0.5 0.25 0.15 0.1 at T = 1

    // Greedy.
    let mut s = Sampler::new(&rt::GenParams::greedy(1));
    check(s.sample(&mut [1.0, 3.0, f32::NAN, 3.0, f32::NEG_INFINITY], &[]) == 1, "greedy: ties go to the lowest id, NaN skipped");
    check(s.sample(&mut [f32::NAN, f32::NAN], &[]) == 0, "greedy: all NaN gives 0");
    check(s.sample(&mut [f32::NAN, -5.0, -7.0], &[]) == 1, "greedy: NaN first is skipped");
    let big = gate_samp_random_logits(151_936, 7);
    let naive = big.iter().enumerate().fold((0usize, f32::NEG_INFINITY), |b, (i, &v)| if v > b.1 { (i, v) } else { b }).0 as u32;
    check(s.sample(&mut big.clone(), &[]) == naive, "greedy on a full-size vocab equals argmax");
    check(argmax(&big) == naive, "argmax helper");

    // Seeded determinism.
    let run = |seed: u64| -> Vec<u32> {
        let mut p = gate_samp_params(0.9, 0, 1.0, 0.0);
        p.seed = seed;
        let mut s = Sampler::new(&p);
        let base = gate_samp_random_logits(1000, 3).iter().map(|x| x * 0.3).collect::<Vec<f32>>();
        (0..200).map(|_| s.sample(&mut base.clone(), &[])).collect()
    };
    check(run(42) == run(42), "same seed gives the same tokens");
    check(run(42) != run(43), "different seeds give different tokens");
    let mut a = SamplerRng::new(0);
    let mut b = SamplerRng::new(0);
    check((0..100).all(|_| a.next_u64() == b.next_u64()), "rng is a function of the seed");
    let mut r = SamplerRng::new(5);
    check((0..10_000).all(|_| { let x = r.next_f64(); (0.0..1.0).contains(&x) }), "next_f64 in [0, 1)");

    // Top-k.
    let mut s = Sampler::new(&gate_samp_params(1.0, 2, 1.0, 0.0));
    check(gate_samp_ids(&s.candidates(&mut dist.to_vec(), &[])) == vec![0, 1], "top-k 2 keeps the two largest");
    let mut s = Sampler::new(&gate_samp_params(1.0, 2, 1.0, 0.0));
    check(gate_samp_ids(&s.candidates(&mut vec![1.0, 2.0, 2.0, 2.0, 0.0], &[])) == vec![1, 2], "top-k ties keep the lowest ids");
    let mut s = Sampler::new(&gate_samp_params(1.0, 40, 1.0, 0.0));
    let mut order: Vec<u32> = (0..big.len() as u32).collect();
    order.sort_by(|&x, &y| big[y as usize].partial_cmp(&big[x as usize]).unwrap().then(x.cmp(&y)));
    let mut top40 = order[..40].to_vec();
    top40.sort_unstable();
    check(gate_samp_ids(&s.candidates(&mut big.clone(), &[])) == top40, "top-k 40 on a full-size vocab");

    // Top-p: smallest prefix whose mass reaches p.
    for (p, want) in [(0.4f32, vec![0u32]), (0.7, vec![0, 1]), (0.8, vec![0, 1, 2]), (0.95, vec![0, 1, 2, 3]), (1.0, vec![0, 1, 2, 3])] {
        let mut s = Sampler::new(&gate_samp_params(1.0, 0, p, 0.0));
        check(gate_samp_ids(&s.candidates(&mut dist.to_vec(), &[])) == want, &format!("top-p {p}"));
    }
    // Top-p on a full-size vocab (no top-k) equals the naive full sort.
    let peaked: Vec<f32> = big.iter().map(|x| x * 2.0).collect();
    let mx = peaked.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
    let ps: Vec<f64> = peaked.iter().map(|&x| ((x - mx) as f64).exp()).collect();
    let z: f64 = ps.iter().sum();
    let mut ord: Vec<u32> = (0..ps.len() as u32).collect();
    ord.sort_by(|&x, &y| ps[y as usize].partial_cmp(&ps[x as usize]).unwrap().then(x.cmp(&y)));
    let mut cum = 0.0;
    let mut want = Vec::new();
    for &i in &ord {
        want.push(i);
        cum += ps[i as usize] / z;
        if cum >= 0.9 {
            break;
        }
    }
    want.sort_unstable();
    let mut s = Sampler::new(&gate_samp_params(1.0, 0, 0.9, 0.0));
    let got = gate_samp_ids(&s.candidates(&mut peaked.clone(), &[]));
    let diff = got.len().abs_diff(want.len());
    check(diff <= 1 && got.iter().filter(|x| want.binary_search(x).is_ok()).count() + 1 >= want.len(), "top-p 0.9 on a full-size vocab (set within one boundary token)");

    // Min-p: keep p >= min_p * p_max.
    for (m, want) in [(0.25f32, vec![0u32, 1, 2]), (0.4, vec![0, 1]), (0.6, vec![0]), (0.1, vec![0, 1, 2, 3])] {
        let mut s = Sampler::new(&gate_samp_params(1.0, 0, 1.0, m));
        check(gate_samp_ids(&s.candidates(&mut dist.to_vec(), &[])) == want, &format!("min-p {m}"));
    }
    // Chain: top-k 3 then top-p 0.7 then min-p 0.6 → {0}.
    let mut s = Sampler::new(&gate_samp_params(1.0, 3, 0.7, 0.6));
    check(gate_samp_ids(&s.candidates(&mut dist.to_vec(), &[])) == vec![0], "top-k, top-p, min-p chained");

    // Temperature: probabilities ∝ p^(1/T), renormalised.
    let mut s = Sampler::new(&gate_samp_params(2.0, 0, 1.0, 0.0));
    let c = s.candidates(&mut dist.to_vec(), &[]);
    let raw: Vec<f64> = [0.5f64, 0.25, 0.15, 0.1].iter().map(|p| p.sqrt()).collect();
    let zs: f64 = raw.iter().sum();
    let ok = c.len() == 4 && c.iter().all(|&(id, p)| ((p as f64) - raw[id as usize] / zs).abs() < 1e-5);
    check(ok, "temperature 2 gives p^(1/2) renormalised");
    let mut s = Sampler::new(&gate_samp_params(0.0, 40, 0.5, 0.2));
    check(s.candidates(&mut dist.to_vec(), &[]) == vec![(0, 1.0)], "temperature 0 is greedy regardless of filters");

    // Draw frequencies follow the distribution.
    let mut s = Sampler::new(&gate_samp_params(1.0, 0, 1.0, 0.0));
    let mut counts = [0usize; 4];
    let n = 40_000;
    for _ in 0..n {
        counts[s.sample(&mut dist.to_vec(), &[]) as usize] += 1;
    }
    let ok = counts.iter().zip([0.5f64, 0.25, 0.15, 0.1]).all(|(&c, p)| ((c as f64 / n as f64) - p).abs() < 0.015);
    check(ok, &format!("draw frequencies {counts:?} match 0.5/0.25/0.15/0.1"));
    let mut s = Sampler::new(&gate_samp_params(1.0, 0, 1.0, 0.0));
    check(s.sample(&mut [0.0, f32::INFINITY, 1.0], &[]) == 1, "a +inf logit wins");
    check(s.sample(&mut [f32::NAN, 0.0, f32::NAN], &[]) == 1, "NaN logits are never drawn");

    // Repetition penalty (llama.cpp): positive logits divided, others multiplied, once per id.
    let pen = |repeat: f32, frequency: f32, presence: f32, last_n: usize| rt::GenParams { repeat_penalty: repeat, frequency_penalty: frequency, presence_penalty: presence, repeat_last_n: last_n, ..rt::GenParams::greedy(1) };
    let mut l = vec![2.0f32, -1.0, 0.5, 3.0, 0.0];
    let mut scratch = Vec::new();
    apply_penalties(&mut l, &[0, 1, 0, 0, 99], &pen(2.0, 0.0, 0.0, 64), &mut scratch);
    check(l == vec![1.0, -2.0, 0.5, 3.0, 0.0], "repeat penalty rule, applied once per distinct id, bad ids ignored");
    let mut l = vec![2.0f32, -1.0, 0.5];
    apply_penalties(&mut l, &[1, 2, 0], &pen(2.0, 0.0, 0.0, 1), &mut scratch);
    check(l == vec![1.0, -1.0, 0.5], "repeat_last_n limits the window to the last tokens");
    // Frequency (per occurrence) and presence (once) penalties, after the repetition rule (llama.cpp's order).
    let mut l = vec![2.0f32, -1.0, 0.5];
    apply_penalties(&mut l, &[0, 0, 1, 7], &pen(1.0, 0.5, 0.25, 64), &mut scratch);
    check(l == vec![0.75, -1.75, 0.5], "frequency and presence penalties");
    let mut l = vec![2.0f32, -1.0, 0.5];
    apply_penalties(&mut l, &[0, 0, 1], &pen(2.0, 0.5, 0.25, 2), &mut scratch);
    check(l == vec![0.25, -2.75, 0.5], "all three penalties over the window");
    // Logit bias: added before everything else, ids past the vocabulary ignored.
    let mut p = rt::GenParams { logit_bias: vec![(1, 1.0), (9, 50.0)], ..rt::GenParams::greedy(1) };
    check(Sampler::new(&p).sample(&mut [3.0, 2.9], &[]) == 1, "a logit bias changes the greedy choice");
    p.logit_bias = vec![(0, -100.0)];
    check(Sampler::new(&p).sample(&mut [3.0, 2.9, -50.0], &[]) == 1, "a -100 bias bans a token");
    p.temperature = 1.0;
    p.logit_bias = vec![(2, -100.0)];
    check((0..200).all(|seed| Sampler::new(&rt::GenParams { seed, ..p.clone() }).sample(&mut [0.0, 0.0, 0.0], &[]) != 2), "a banned token is never drawn");
    let mut p = rt::GenParams::greedy(1);
    p.repeat_penalty = 1.5;
    let mut s = Sampler::new(&p);
    check(s.sample(&mut [3.0, 2.9], &[0]) == 1, "penalty changes the greedy choice");
    p.repeat_penalty = 1.0;
    let mut s = Sampler::new(&p);
    check(s.sample(&mut [3.0, 2.9], &[0]) == 0, "penalty 1 is off");

    println!("GATE sampler cases={cases} failures={failures}");
    assert_eq!(failures, 0, "{failures} of {cases} sampler checks failed");
}
