// Gate `batch_step`: Engine::step runs several sequences in one pass, each in its own KV slot.
// Three sequences with different prompts: each alone first (a step of its own per prompt chunk
// of 8, then per token, greedy), which must be bitwise what forward gives; then together, twice
// with different companions (all three; then only the first two, in other lanes), a prompt
// chunk of one sequence in the same step as the others' decode tokens (before, between and after
// them), every sequence fed its own greedy tokens from the alone run. A row computed in a shared
// step must be bitwise the same in both runs (the four-token kernels: a token's values do not
// depend on the others), a row computed alone bitwise the alone run's, and every row within
// 5e-2 of the logit scale of the alone run's. Compiled inside the engine crate.

const BS_PROMPT: [usize; 3] = [13, 20, 9];
const BS_GEN: usize = 12;
const BS_CHUNK: usize = 8;

fn bs_argmax(v: &[f32]) -> u32 {
    v.iter().enumerate().fold(0, |b, (i, &x)| if x > v[b] { i } else { b }) as u32
}

/// The logits a sequence gives alone, after each prompt chunk, then after each decoded token
/// (greedy, or the ids `forced`), with the ids decoded: through step on `slot` (Some), or
/// through forward (slot 0).
fn bs_alone(engine: &mut Engine, prompt: &[u32], slot: Option<usize>, forced: Option<&[u32]>) -> (Vec<Vec<f32>>, Vec<u32>) {
    let mut run = |tokens: &[u32], pos: usize| match slot {
        Some(slot) => engine.step(&[Work { slot, tokens, pos }]).expect("step of one work").to_vec(),
        None => engine.forward(tokens, pos).expect("forward").to_vec(),
    };
    let mut out: Vec<Vec<f32>> = prompt.chunks(BS_CHUNK).enumerate().map(|(k, c)| run(c, k * BS_CHUNK)).collect();
    let mut ids = Vec::new();
    for i in 0..BS_GEN {
        let id = forced.map_or_else(|| bs_argmax(out.last().expect("a prompt")), |f| f[i]);
        ids.push(id);
        out.push(run(&[id], prompt.len() + i));
    }
    (out, ids)
}

/// The sequences `seqs` together (sequence s starts at step 2 s; every started one's next piece
/// in each step, the order rotated by `rot`), fed `gen[s]` after their prompts: per sequence, its
/// logits rows and whether each was computed in a shared step. Also the most works in a step.
fn bs_together(engine: &mut Engine, prompts: &[Vec<u32>], gen: &[Vec<u32>], seqs: &[usize], rot: usize) -> (Vec<Vec<(Vec<f32>, bool)>>, usize) {
    let mut got: Vec<Vec<(Vec<f32>, bool)>> = vec![Vec::new(); prompts.len()];
    let (nv, mut max_works) = (engine.n_vocab(), 0);
    let total = |s: usize| prompts[s].len().div_ceil(BS_CHUNK) + BS_GEN;
    for t in 0.. {
        let mut order: Vec<usize> = seqs.iter().copied().filter(|&s| t >= 2 * s && got[s].len() < total(s)).collect();
        if order.is_empty() && t > 2 * prompts.len() {
            break;
        }
        let k = (t + rot) % order.len().max(1);
        order.rotate_left(k);
        let ids: Vec<Vec<u32>> = (0..prompts.len()).map(|s| prompts[s].iter().chain(&gen[s]).copied().collect()).collect();
        let work: Vec<Work> = order
            .iter()
            .map(|&s| {
                let (done, chunks) = (got[s].len(), prompts[s].len().div_ceil(BS_CHUNK));
                let (pos, end) = if done < chunks { (done * BS_CHUNK, ((done + 1) * BS_CHUNK).min(prompts[s].len())) } else { (prompts[s].len() + done - chunks, prompts[s].len() + done - chunks + 1) };
                Work { slot: s + 1, tokens: &ids[s][pos..end], pos }
            })
            .collect();
        if work.is_empty() {
            continue;
        }
        max_works = max_works.max(work.len());
        let logits = engine.step(&work).expect("step").to_vec();
        for (i, &s) in order.iter().enumerate() {
            got[s].push((logits[i * nv..(i + 1) * nv].to_vec(), order.len() > 1));
        }
    }
    (got, max_works)
}

#[test]
fn gate_batch_step() {
    let Some(mut engine) = gate_load_or_skip(&gate_tiny_model(), "batch_step", "tiny model loads") else { return };
    let nv = engine.n_vocab() as u32;
    let prompts: Vec<Vec<u32>> = BS_PROMPT.iter().enumerate().map(|(s, &n)| (0..n as u32).map(|i| (i * 7 + s as u32 * 31 + 3) % nv).collect()).collect();
    let alone: Vec<(Vec<Vec<f32>>, Vec<u32>)> = (0..3).map(|s| bs_alone(&mut engine, &prompts[s], Some(s + 1), None)).collect();
    let gen: Vec<Vec<u32>> = alone.iter().map(|a| a.1.clone()).collect();
    let same = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
    let mut mismatches = 0usize;
    // a step of one work is forward, bitwise
    for (p, (logits, ids)) in prompts.iter().zip(&alone) {
        let fwd = bs_alone(&mut engine, p, None, Some(ids)).0;
        mismatches += fwd.iter().zip(logits).filter(|(a, b)| !same(a, b)).count();
    }
    let (all3, max_works) = bs_together(&mut engine, &prompts, &gen, &[0, 1, 2], 0);
    let (two, _) = bs_together(&mut engine, &prompts, &gen, &[0, 1], 1);
    let (mut shared_rows, mut max_diff, mut max_ref) = (0usize, 0.0f64, 0.0f64);
    for s in 0..3 {
        assert_eq!(all3[s].len(), alone[s].0.len(), "sequence {s} ran to the end");
        let flags = |rows: &[(Vec<f32>, bool)], k: usize| rows.iter().take(k + 1).map(|r| r.1).collect::<Vec<bool>>();
        for (k, ((row, _), want)) in all3[s].iter().zip(&alone[s].0).enumerate() {
            for (x, y) in row.iter().zip(want) {
                max_diff = max_diff.max((x - y).abs() as f64);
                max_ref = max_ref.max(y.abs() as f64);
            }
            // a row whose sequence ran every step so far alone is the alone run's; one that ran
            // the same steps shared and alone in the other run is that run's, bitwise
            let fl = flags(&all3[s], k);
            if fl.iter().all(|f| !f) {
                mismatches += !same(row, want) as usize;
            } else if two[s].len() > k && flags(&two[s], k) == fl {
                shared_rows += 1;
                mismatches += !same(row, &two[s][k].0) as usize;
            }
        }
    }
    println!("GATE batch_step sequences=3 max_works={max_works} shared_rows={shared_rows} mismatches={mismatches} shared_vs_alone={max_diff:.3e}");
    assert!(max_works >= 3 && shared_rows >= 10, "steps held several sequences");
    assert_eq!(mismatches, 0, "a row differs from forward (one work) or between runs with other companions (shared)");
    assert!(max_diff <= 5e-2 * max_ref.max(1.0), "shared steps differ from forward by {max_diff:.3e}");
    // the slots keep what they ran: slot s + 1 holds its prompt and all but the last token
    for s in 0..2 {
        let want: Vec<u32> = prompts[s].iter().chain(&gen[s]).copied().collect();
        assert_eq!(engine.cached(s + 1), &want[..want.len()], "slot {} holds its sequence", s + 1);
    }
    assert!(engine.step(&[Work { slot: 1, tokens: &[0], pos: 0 }, Work { slot: 1, tokens: &[0], pos: 0 }]).is_err(), "a slot given twice is refused");
    assert!(engine.step(&[Work { slot: MAX_SLOTS, tokens: &[0], pos: 0 }]).is_err(), "a slot past MAX_SLOTS is refused");
}
