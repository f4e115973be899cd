//! The LLM implementer's loop for one slot: implementer → spec-reviewer → verifier, each its
//! own conversation; what the reviewer or the verifier rejects goes back to the implementer
//! verbatim, within a budget of rounds, tokens and wall time. Only the verifier can pass a
//! section, and only the slot's own gates decide it here (the whole engine is verified again
//! with every gate before anything is cached).

use super::extract;
use super::implement::{self, CkbImplementer, Implementer, SlotCode};
use super::plan::{Plan, Slot};
use super::prompts::{self, Reference};
use super::review;
use super::verify::{self, Scratch, Verdict};
use super::ChainError;
use crate::ckb::schema::{Contract, FailureMode};
use crate::ckb::Ckb;
use crate::llm::{ChatMessage, ChatRequest, Client};
use serde_json::json;
use std::time::{Duration, Instant};

/// How much the LLM implementer may spend on one engine.
#[derive(Debug, Clone)]
pub struct LlmBudget {
    /// Implementer replies per slot.
    pub max_rounds: u32,
    /// Prompt + completion tokens over the whole engine (as the server reports them, else
    /// estimated at four bytes a token).
    pub max_tokens: u64,
    /// Wall time over the whole engine, verification included.
    pub max_wall: Duration,
    /// Completion tokens asked for per reply.
    pub reply_tokens: u32,
}

impl Default for LlmBudget {
    fn default() -> Self {
        LlmBudget {
            max_rounds: 4,
            max_tokens: 400_000,
            max_wall: Duration::from_secs(1800),
            reply_tokens: 2048,
        }
    }
}

impl LlmBudget {
    /// The defaults, overridden by `METAINFER_LLM_MAX_ROUNDS`, `METAINFER_LLM_MAX_TOKENS`,
    /// `METAINFER_LLM_MAX_WALL_S`, `METAINFER_LLM_REPLY_TOKENS`.
    pub fn from_env() -> Result<LlmBudget, ChainError> {
        use crate::env::positive;
        let d = LlmBudget::default();
        Ok(LlmBudget {
            max_rounds: positive("METAINFER_LLM_MAX_ROUNDS", d.max_rounds.into())?.min(100) as u32,
            max_tokens: positive("METAINFER_LLM_MAX_TOKENS", d.max_tokens)?,
            max_wall: Duration::from_secs(positive(
                "METAINFER_LLM_MAX_WALL_S",
                d.max_wall.as_secs(),
            )?),
            reply_tokens: positive("METAINFER_LLM_REPLY_TOKENS", d.reply_tokens.into())?
                .clamp(64, 1 << 20) as u32,
        })
    }
}

/// One engine's worth of LLM work: the client, the budget spent so far, and the transcript
/// of every exchange.
pub struct LlmSession<'a> {
    pub client: &'a Client,
    pub budget: LlmBudget,
    /// Also ask an LLM spec-reviewer (advisory: only the verifier passes a section).
    pub llm_review: bool,
    pub progress: bool,
    started: Instant,
    tokens_used: u64,
    /// One JSON object per exchange or step, in order.
    pub transcript: Vec<serde_json::Value>,
    /// Every request id the server gave, in order.
    pub request_ids: Vec<String>,
    /// The model ids the server reported.
    pub models: Vec<String>,
}

/// A slot the LLM filled, with what it took.
pub struct Filled {
    pub code: SlotCode,
    pub rounds: u32,
    /// The slot's own gates, run on the engine with this section.
    pub verdict: Verdict,
}

impl<'a> LlmSession<'a> {
    pub fn new(client: &'a Client, budget: LlmBudget, llm_review: bool, progress: bool) -> Self {
        LlmSession {
            client,
            budget,
            llm_review,
            progress,
            started: Instant::now(),
            tokens_used: 0,
            transcript: Vec::new(),
            request_ids: Vec::new(),
            models: Vec::new(),
        }
    }

    fn say(&self, msg: impl AsRef<str>) {
        if self.progress {
            crate::progress::line(&format!("metainfer: llm: {}", msg.as_ref()));
        }
    }

    fn over_budget(&self) -> Option<String> {
        if self.started.elapsed() > self.budget.max_wall {
            return Some(format!(
                "the wall-time budget of {} s is spent (METAINFER_LLM_MAX_WALL_S)",
                self.budget.max_wall.as_secs()
            ));
        }
        if self.tokens_used >= self.budget.max_tokens {
            return Some(format!(
                "the token budget is spent: {} of {} tokens (METAINFER_LLM_MAX_TOKENS)",
                self.tokens_used, self.budget.max_tokens
            ));
        }
        None
    }

    /// One request of `role` for `slot`; recorded in the transcript whatever happens.
    fn ask(
        &mut self,
        role: &str,
        slot: &str,
        round: u32,
        messages: &[ChatMessage],
        temperature: f32,
    ) -> Result<(String, Option<String>), ChainError> {
        let req = ChatRequest {
            messages: messages.to_vec(),
            max_tokens: Some(self.budget.reply_tokens),
            temperature: Some(temperature),
            stop: Vec::new(),
            seed: Some(round as u64),
            // once sampling (a reply looped), also the repeat penalty where the server takes it
            repeat_penalty: self
                .client
                .config()
                .repeat_penalty
                .filter(|_| temperature > 0.0),
        };
        let mut streamed = 0usize;
        let progress = self.progress;
        let t0 = Instant::now();
        let result = self.client.chat(&req, &mut |piece| {
            streamed += piece.len();
            if progress && streamed % 2048 < piece.len() {
                crate::progress::line(&format!(
                    "metainfer: llm:   … {role} {slot}: {streamed} bytes so far"
                ));
            }
        });
        let elapsed_ms = t0.elapsed().as_millis() as u64;
        match result {
            Ok(reply) => {
                let used = reply
                    .usage
                    .as_ref()
                    .map(|u| u.prompt_tokens + u.completion_tokens)
                    .unwrap_or_else(|| {
                        (messages.iter().map(|m| m.content.len()).sum::<usize>()
                            + reply.content.len()) as u64
                            / 4
                    });
                self.tokens_used += used;
                if let Some(id) = &reply.request_id {
                    self.request_ids.push(id.clone());
                }
                if !self.models.contains(&reply.model) {
                    self.models.push(reply.model.clone());
                }
                self.transcript.push(json!({
                    "step": "llm", "role": role, "slot": slot, "round": round, "temperature": temperature,
                    "model": reply.model, "request_id": reply.request_id,
                    "attempts": reply.attempts, "elapsed_ms": reply.elapsed_ms,
                    "usage": reply.usage, "finish_reason": reply.finish_reason,
                    "request": messages, "reply": reply.content,
                }));
                self.say(format!(
                    "{role} {slot} round {round}: {} bytes in {:.1} s ({} tokens so far)",
                    reply.content.len(),
                    elapsed_ms as f64 / 1000.0,
                    self.tokens_used
                ));
                Ok((reply.content, reply.finish_reason))
            }
            Err(e) => {
                self.transcript.push(json!({
                    "step": "llm", "role": role, "slot": slot, "round": round, "elapsed_ms": elapsed_ms,
                    "request": messages, "error": e.to_string(),
                }));
                Err(ChainError::Llm(format!(
                    "the {role} request for slot `{slot}` (round {round}) failed: {e}"
                )))
            }
        }
    }

    /// Fills `plan.slots[index]` with LLM code. `codes` holds the code chosen so far for every
    /// slot (`None` where nothing is chosen yet; the CKB fallback stands in where it exists).
    pub fn fill(
        &mut self,
        plan: &Plan,
        index: usize,
        codes: &[Option<SlotCode>],
        ckb: &Ckb,
        reference: Reference,
        scratch: &Scratch<'_>,
    ) -> Result<Filled, ChainError> {
        let slot = &plan.slots[index];
        let cid = slot.contract.clone().ok_or_else(|| {
            ChainError::Plan(format!("slot `{}` has no contract for the llm", slot.id))
        })?;
        let contract = ckb
            .contracts
            .get(&cid)
            .ok_or_else(|| ChainError::Plan(format!("the ckb has no contract '{cid}'")))?;
        let code_of = |c: &str| -> Option<String> {
            plan.slots
                .iter()
                .position(|s| s.contract.as_deref() == Some(c))
                .and_then(|i| codes[i].as_ref().map(|x| x.code.clone()))
        };
        let prompt = prompts::implementer_prompt(plan, slot, contract, ckb, reference, &code_of);
        let mut conv = vec![
            ChatMessage::system(prompts::IMPLEMENTER_SYSTEM),
            ChatMessage::user(prompt),
        ];
        let gates = contract.gates.clone();
        self.say(format!(
            "implementing `{}` ({} v{}) with {}; gates: {}",
            slot.id,
            cid,
            contract.version,
            self.client.config().model,
            gates.join(", ")
        ));
        let mut last_feedback = String::new();
        // Greedy first (reproducible); once a reply repeats an earlier one or runs into the token
        // limit (small models loop), sample, with a new seed each round.
        let mut seen: Vec<blake3::Hash> = Vec::new();
        let mut temperature = 0.0f32;
        for round in 1..=self.budget.max_rounds {
            if let Some(why) = self.over_budget() {
                return Err(self.give_up(&slot.id, round - 1, &why, &last_feedback));
            }
            let (reply, finish) = self.ask("implementer", &slot.id, round, &conv, temperature)?;
            let h = blake3::hash(reply.as_bytes());
            let repeated = seen.contains(&h);
            seen.push(h);
            if repeated || finish.as_deref() == Some("length") {
                temperature = 0.7;
            }
            // The conversation keeps the task and the latest exchange only, so that it stays
            // inside small models' context windows however many rounds it takes.
            conv.truncate(2);
            conv.push(ChatMessage::assistant(reply.clone()));
            let feedback = match self.check(
                plan,
                index,
                codes,
                ckb,
                contract,
                &reply,
                finish.as_deref(),
                scratch,
                round,
            )? {
                Ok((code, verdict)) => {
                    self.say(format!("`{}` passed its gates in round {round}", slot.id));
                    let realization = format!("{cid}/{}", slot.variants.join("+"));
                    let code = SlotCode {
                        slot: slot.id.clone(),
                        implementer: "llm".into(),
                        realization,
                        code,
                    };
                    return Ok(Filled {
                        code,
                        rounds: round,
                        verdict,
                    });
                }
                Err(feedback) if repeated => format!(
                    "Your reply is the same as an earlier one, which was rejected. {feedback}"
                ),
                Err(feedback) => feedback,
            };
            self.say(format!(
                "round {round} of `{}` rejected: {}",
                slot.id,
                feedback.lines().next().unwrap_or("")
            ));
            conv.push(ChatMessage::user(format!("{feedback}\n\nReply with the whole corrected section `{}` as one ```rust code block.", slot.id)));
            last_feedback = feedback;
        }
        let why = format!(
            "{} rounds (METAINFER_LLM_MAX_ROUNDS) did not produce a section that passes",
            self.budget.max_rounds
        );
        Err(self.give_up(&slot.id, self.budget.max_rounds, &why, &last_feedback))
    }

    fn give_up(&mut self, slot: &str, rounds: u32, why: &str, last: &str) -> ChainError {
        self.transcript
            .push(json!({"step": "give_up", "slot": slot, "rounds": rounds, "why": why}));
        ChainError::Budget {
            slot: slot.to_string(),
            rounds,
            why: why.to_string(),
            last_feedback: last.to_string(),
            transcript: String::new(),
        }
    }

    /// Review then verify one reply: `Ok(Ok(..))` passed, `Ok(Err(feedback))` rejected.
    #[allow(clippy::too_many_arguments)]
    fn check(
        &mut self,
        plan: &Plan,
        index: usize,
        codes: &[Option<SlotCode>],
        ckb: &Ckb,
        contract: &Contract,
        reply: &str,
        finish: Option<&str>,
        scratch: &Scratch<'_>,
        round: u32,
    ) -> Result<Result<(String, Verdict), String>, ChainError> {
        let slot = &plan.slots[index];
        let code = match extract::code_of(reply, finish) {
            Ok(c) => c,
            Err(why) => {
                self.transcript.push(
                    json!({"step": "extract", "slot": slot.id, "round": round, "problem": why}),
                );
                return Ok(Err(why));
            }
        };
        // The static spec-reviewer: the code policy and the interface, with lines.
        let problems = review_slot(slot, &code, Some(contract));
        self.transcript.push(json!({"step": "review", "slot": slot.id, "round": round, "problems": problems.iter().map(|p| p.to_string()).collect::<Vec<_>>()}));
        if !problems.is_empty() {
            let list: Vec<String> = problems.iter().map(|p| format!("- {p}")).collect();
            return Ok(Err(format!(
                "The spec-reviewer rejected the section ({} problems):\n{}",
                problems.len(),
                list.join("\n")
            )));
        }
        if self.llm_review {
            let msgs = [
                ChatMessage::system(prompts::REVIEWER_SYSTEM),
                ChatMessage::user(prompts::reviewer_prompt(slot, contract, &code)),
            ];
            let (answer, _) = self.ask("reviewer", &slot.id, round, &msgs, 0.0)?;
            if let Some(objections) = prompts::reviewer_verdict(&answer) {
                return Ok(Err(format!(
                    "The spec-reviewer found problems against the contract:\n{objections}"
                )));
            }
        }
        // The verifier: this section with the others, compiled, and the slot's gates run.
        let (work_plan, work_codes) = working_engine(plan, index, codes, &code, ckb)?;
        let engine = implement::assemble(&work_plan, &work_codes);
        self.say(format!(
            "verifying `{}` round {round}: compiling the engine and running {}",
            slot.id,
            contract.gates.join(", ")
        ));
        let t0 = Instant::now();
        let all_gates = super::gate_ids(&work_plan, ckb);
        match verify::verify_subset(scratch, &engine, &all_gates, &contract.gates, false) {
            Err(ChainError::Compile { log }) => {
                let fb = extract::compile_feedback(&log, &engine, &slot.id, 6000);
                self.transcript.push(json!({"step": "verify", "slot": slot.id, "round": round, "compiled": false, "elapsed_ms": t0.elapsed().as_millis() as u64, "errors": fb}));
                Ok(Err(format!("The verifier could not compile the engine with your section. Compiler errors:\n{fb}")))
            }
            Err(e) => Err(e),
            Ok(v) => {
                let gates: Vec<_> = v
                    .gates
                    .iter()
                    .map(|g| json!({"id": g.id, "status": g.status, "measured": g.measured}))
                    .collect();
                self.transcript.push(json!({"step": "verify", "slot": slot.id, "round": round, "compiled": true, "passed": v.passed, "elapsed_ms": t0.elapsed().as_millis() as u64, "gates": gates}));
                if v.passed {
                    return Ok(Ok((code, v)));
                }
                let failed: Vec<&str> = v
                    .gates
                    .iter()
                    .filter(|g| g.status == "fail")
                    .map(|g| g.id.as_str())
                    .collect();
                let (matched, proposed) = classify(ckb, contract, &failed, &v.log);
                self.transcript.push(json!({"step": "classify", "slot": slot.id, "round": round, "matched": matched.iter().map(|m| &m.id).collect::<Vec<_>>(), "proposed": proposed}));
                let mut fb = format!(
                    "The verifier ran the gates {}; failed: {}. Gate output:\n{}",
                    contract.gates.join(", "),
                    failed.join(", "),
                    gate_failures(&v.log, 6000)
                );
                for m in &matched {
                    fb.push_str(&format!(
                        "\nKnown failure mode `{}` looks like this: {} Fix: {}",
                        m.id, m.symptom, m.fix
                    ));
                }
                Ok(Err(fb))
            }
        }
    }
}

/// Static review of one slot's code (policy + interface), as `review_engine` does it.
pub fn review_slot(slot: &Slot, code: &str, contract: Option<&Contract>) -> Vec<review::Problem> {
    let allow = match contract {
        Some(c) => review::Allowances::of(Some(c)),
        None => review::Allowances {
            unsafe_code: slot.id == "dispatch",
            ..Default::default()
        },
    };
    let unsafe_kw = if matches!(slot.entry, Some((_, true))) {
        "unsafe "
    } else {
        ""
    };
    let mut extra: Vec<String> = Vec::new();
    if let Some((e, _)) = &slot.entry {
        extra.push(format!(
            "pub(crate) {unsafe_kw}fn {e}(row: &[u8], x: &Act) -> f32"
        ));
    }
    if let Some(e4) = &slot.entry4 {
        extra.push(format!(
            "pub(crate) {unsafe_kw}fn {e4}(row: &[u8], xs: [&Act; 4]) -> [f32; 4]"
        ));
    }
    if let Some(e) = &slot.entry_rows4 {
        extra.push(format!(
            "pub(crate) {unsafe_kw}fn {e}(rows: [&[u8]; 4], x: &Act) -> [f32; 4]"
        ));
    }
    if let Some((d, k, r)) = &slot.entry_tile {
        extra.push(format!(
            "pub(crate) {unsafe_kw}fn {d}(rows: [&[u8]; {r}], out: &mut DecRows)"
        ));
        extra.push(format!(
            "pub(crate) {unsafe_kw}fn {k}(rows: &DecRows, xs: [&Act; 4]) -> [[f32; 4]; {r}]"
        ));
    }
    review::review_section(&slot.id, code, contract, allow, &extra)
}

/// The plan and code to verify slot `index` with `code`: slots before it as chosen, slots
/// after it not yet filled by their CKB fallback, header and dispatch regenerated.
fn working_engine(
    plan: &Plan,
    index: usize,
    codes: &[Option<SlotCode>],
    code: &str,
    ckb: &Ckb,
) -> Result<(Plan, Vec<SlotCode>), ChainError> {
    let mut work = plan.clone();
    let mut out: Vec<Option<SlotCode>> = codes.to_vec();
    out[index] = Some(SlotCode {
        slot: plan.slots[index].id.clone(),
        implementer: "llm".into(),
        realization: "candidate".into(),
        code: code.to_string(),
    });
    for (i, s) in plan.slots.iter().enumerate() {
        if out[i].is_none() && s.llm {
            if let Some(fb) = &s.fallback {
                work.slots[i] = (**fb).clone();
            }
        }
    }
    let mut ckb_impl = CkbImplementer { ckb };
    let mut done = Vec::with_capacity(work.slots.len());
    for (i, s) in work.slots.iter().enumerate() {
        match (&out[i], s.contract.is_none() || !s.llm) {
            // generated sections follow the working plan (the dispatch names the entries in use)
            (_, _) if s.contract.is_none() => done.push(ckb_impl.implement(&work, s, None)?),
            (Some(c), _) => done.push(c.clone()),
            (None, true) => done.push(ckb_impl.implement(&work, s, None)?),
            (None, false) => {
                return Err(ChainError::Plan(format!(
                    "slot `{}` has neither a ckb realization nor llm code yet, so `{}` cannot be verified before it; fill gaps one engine at a time or add a realization",
                    s.id, plan.slots[index].id
                )))
            }
        }
    }
    Ok((work, done))
}

/// The failure modes a gate failure matches (those of the contract whose `check` names a
/// failed gate); when none does, a new mode is proposed under `ckb/proposals/`.
fn classify<'a>(
    ckb: &'a Ckb,
    contract: &Contract,
    failed: &[&str],
    log: &str,
) -> (Vec<&'a FailureMode>, Option<String>) {
    let matched: Vec<&FailureMode> = ckb
        .failure_modes
        .iter()
        .filter(|m| contract.failure_modes.contains(&m.id))
        .filter(|m| failed.iter().any(|g| m.check.contains(g)))
        .collect();
    if !matched.is_empty() || failed.is_empty() {
        return (matched, None);
    }
    let symptom = gate_failures(log, 400)
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("gate failed")
        .trim()
        .to_string();
    let id = format!(
        "{}_{}",
        contract.id,
        &blake3::hash(format!("{failed:?}{symptom}").as_bytes()).to_hex()[..8]
    );
    let mode = FailureMode {
        id: id.clone(),
        symptom: symptom.clone(),
        check: format!(
            "gates {} on a {} realization",
            failed.join(", "),
            contract.id
        ),
        fix:
            "unknown: observed while the llm implemented this contract; see the entry's transcript"
                .into(),
    };
    match append_proposed_mode(ckb, &mode) {
        Ok(()) => (matched, Some(id)),
        Err(_) => (matched, None),
    }
}

/// Appends `mode` to `ckb/proposals/failure_modes.toml` unless its id is there already.
fn append_proposed_mode(ckb: &Ckb, mode: &FailureMode) -> std::io::Result<()> {
    let dir = ckb.root.join("proposals");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("failure_modes.toml");
    let mut text = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        "# Failure modes the llm chain observed that no known mode matched; review, then move to ckb/failure_modes.toml.\n".into()
    });
    if text.contains(&format!("id = {:?}", mode.id)) {
        return Ok(());
    }
    let wrapped = crate::ckb::schema::FailureModes {
        modes: vec![mode.clone()],
    };
    text.push('\n');
    text.push_str(&toml::to_string(&wrapped).map_err(std::io::Error::other)?);
    let tmp = dir.join(format!(".failure_modes.{}.tmp", std::process::id()));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, &path)
}

/// The failing tests' output from a libtest log: each panic with the message after it, and
/// the `GATE` lines with what the gates measured.
fn gate_failures(log: &str, max: usize) -> String {
    let mut out = String::new();
    let mut in_panic = false;
    for line in log.lines() {
        if line.contains("panicked at") {
            in_panic = true;
        } else if in_panic
            && (line.trim().is_empty()
                || line.starts_with("note:")
                || line.starts_with("test ")
                || line.starts_with("stack backtrace:"))
        {
            in_panic = false;
        }
        // (`test x ... GATE …` when the test printed before libtest wrote its status.)
        let line = match line.find("GATE ") {
            Some(i) if !in_panic => &line[i..],
            _ => line,
        };
        // (`gate test x: FAILED: timed out …`: the verifier's word on a test stopped by a limit)
        if in_panic || line.starts_with("GATE ") || line.starts_with("gate test ") {
            if out.len() + line.len() + 1 > max {
                out.push_str("… (cut)\n");
                break;
            }
            out.push_str(line);
            out.push('\n');
        }
    }
    if out.is_empty() {
        let start = log.len().saturating_sub(max);
        let mut s = start;
        while !log.is_char_boundary(s) {
            s += 1;
        }
        out = log[s..].to_string();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::gate_failures;

    #[test]
    fn gate_failures_keep_panics_and_measurements() {
        let log = "running 2 tests\ntest gate_kernels::dots ... GATE kernel_f32 max_abs_err=3e0\nFAILED\nthread 'gate_kernels::dots' panicked at src/lib.rs:9:5:\nkernel gates failed:\nf32 n=32 case=0: got 1, want 2\nnote: run with RUST_BACKTRACE=1\nfailures:\n";
        let g = gate_failures(log, 1000);
        assert!(g.contains("GATE kernel_f32"), "{g}");
        assert!(g.contains("got 1, want 2"), "{g}");
        assert!(!g.contains("RUST_BACKTRACE"), "{g}");
        let log = "---- gate_e2e_tiny::logits (600.0 s) ----\nrunning 1 test\ngate test gate_e2e_tiny::logits: FAILED: timed out: still running after 600 s, the wall-time limit (METAINFER_GATE_TIMEOUT_S)\n";
        assert!(gate_failures(log, 1000).contains("timed out"));
    }
}
