// The engine behind metainfer::rt::server with continuous batching: a scheduler thread owns the
// engine and runs every admitted request in shared steps (Engine::step: one KV slot per request,
// BATCH_SEQS of them). Each step decodes one token of every running request, each weight row
// read once for all of them, plus chunks of new prompts (SCHED_CHUNK tokens in all, oldest
// first), so running streams keep flowing while prompts are read; requests join between steps
// and leave at once when they end or are cancelled. Connection threads tokenize their requests
// (the tokenizer is shared: the scheduler never waits on it), submit the ids and receive text:
// each has a bounded queue of pieces, and a request whose client stops reading (its queue full)
// is cancelled. A new request takes the free slot whose cached tokens share the longest prefix
// with its prompt (a system prompt, earlier turns of a chat), and only the rest is computed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// Pieces a request may hold queued for its connection; a full queue (a client that stopped
/// reading) cancels the request.
const SCHED_QUEUE: usize = 1024;
/// Prompt tokens a step takes of new requests (of as many as it takes, oldest first), plus one
/// for each slot not decoding: reading prompts slows the running streams' steps only by about
/// what a chunk costs, new requests that arrive together share the weights' reading, and a step
/// never exceeds BATCH_SEQS + SCHED_CHUNK tokens, which fit a batch.
const SCHED_CHUNK: usize = 64;
/// How often a waiting connection thread checks that its client is still there.
const SCHED_POLL: Duration = Duration::from_millis(20);
/// At an idle server, how long the scheduler waits after a request for the next one (and at most
/// SCHED_GATHER_MAX in all) before its first step: clients that send together (their
/// connections' tokenizing spreads the arrivals over a few ms) share the first prefill step
/// instead of one prompt being read alone and the rest a step later.
const SCHED_GATHER: Duration = Duration::from_millis(3);
const SCHED_GATHER_MAX: Duration = Duration::from_millis(10);

const _: () = assert!(BATCH_SEQS + SCHED_CHUNK <= BATCH && BATCH_SEQS <= MAX_SLOTS);

struct SchedReq {
    ids: Vec<u32>, // [n_prompt] the prompt's tokens
    params: rt::GenParams,
    out: mpsc::SyncSender<SchedEvent>,
    cancel: Arc<AtomicBool>,
}

enum SchedEvent {
    Text(String),
    Done(rt::Result<(String, rt::Stats)>),
    Panic(String),
}

/// A request holding a slot.
struct SchedSeq {
    req: SchedReq,
    slot: usize,
    ids: Vec<u32>,     // [n_prompt + generated] prompt, then the tokens drawn
    n_prompt: usize,   // prompt tokens
    fed: usize,        // ids[..fed] have their keys and values in the slot
    sampler: Sampler,  // the request's own sampler (and seeded draw)
    text: GenTextStream,
    all: String,       // text handed out
    stats: rt::Stats,
    start: Instant,    // when it took its slot
}

impl Engine {
    /// The server on `addr` (port 0 picks one; see `Server::local_addr`), not yet serving; a
    /// scheduler thread takes the engine and runs up to BATCH_SEQS requests at once.
    pub fn server(self, addr: &str, cfg: rt::server::ServerConfig) -> std::io::Result<rt::server::Server> {
        let (max_seq, prompter) = (self.max_seq(), self.prompter());
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new().name("metainfer-scheduler".into()).spawn(move || sched_run(self, rx))?;
        rt::server::Server::bind(addr, BatchedBackend { tx, max_seq, prompter }, cfg)
    }

    /// Requests the server runs at once (`batch`; more wait for a slot).
    pub fn server_slots(&self) -> usize {
        BATCH_SEQS
    }

    /// Serves the OpenAI-compatible API on `addr` until the process ends.
    pub fn serve(self, addr: &str, cfg: rt::server::ServerConfig) -> std::io::Result<()> {
        self.server(addr, cfg)?.run()
    }
}

/// The scheduler: owns the engine until every sender (the backend) is gone.
fn sched_run(mut eng: Engine, rx: mpsc::Receiver<SchedReq>) {
    let mut running: Vec<SchedSeq> = Vec::new();
    let mut waiting: std::collections::VecDeque<SchedReq> = Default::default();
    let mut used = [0u64; BATCH_SEQS]; // step of each slot's last use (least recently used first)
    // (the tokenizer shared, so a step's logits are sampled where the step left them)
    let (tok, nv) = (eng.tok.clone(), eng.n_vocab());
    for tick in 1u64.. {
        // new messages: block while there is nothing to run, then gather those sent together
        let idle = running.is_empty() && waiting.is_empty();
        let mut next = if idle { rx.recv().ok() } else { rx.try_recv().ok() };
        if next.is_none() && idle {
            return; // the backend is gone
        }
        let start = Instant::now();
        while let Some(req) = next.take() {
            waiting.push_back(req);
            let wait = if idle { SCHED_GATHER.min(SCHED_GATHER_MAX.saturating_sub(start.elapsed())) } else { Duration::ZERO };
            next = rx.recv_timeout(wait).ok();
        }
        // cancelled requests leave at once
        running.retain_mut(|s| !(s.req.cancel.load(Ordering::Relaxed) && sched_end(s, rt::FinishReason::Cancelled)));
        waiting.retain(|r| !r.cancel.load(Ordering::Relaxed));
        // admit into free slots: the one sharing the longest prefix, else the least recently used
        while running.len() < BATCH_SEQS {
            let Some(mut req) = waiting.pop_front() else { break };
            if let Err(e) = sched_check(&eng, &req.ids, &req.params) {
                let _ = req.out.try_send(SchedEvent::Done(Err(e)));
                continue;
            }
            if req.params.max_tokens == 0 {
                let _ = req.out.try_send(SchedEvent::Done(Ok((String::new(), rt::Stats::default()))));
                continue;
            }
            let ids = std::mem::take(&mut req.ids);
            let common = |s: usize| eng.cached(s).iter().zip(&ids).take_while(|(a, b)| a == b).count().min(ids.len() - 1);
            let free = (0..BATCH_SEQS).rev().filter(|s| running.iter().all(|r| r.slot != *s)); // (ties: the lowest)
            let Some(slot) = free.max_by_key(|&s| (common(s), std::cmp::Reverse(used[s]))) else { break };
            let fed = common(slot);
            let stats = rt::Stats { prompt_tokens: ids.len() - fed, ..Default::default() };
            let (sampler, text) = (Sampler::new(&req.params), GenTextStream::new(&req.params.stop));
            running.push(SchedSeq { n_prompt: ids.len(), ids, fed, slot, sampler, text, all: String::new(), stats, start: Instant::now(), req });
        }
        if running.is_empty() {
            continue;
        }
        // the step: a token of every decoding request, then chunks of new prompts (oldest first)
        // up to BATCH_SEQS + SCHED_CHUNK tokens in all; (running index, fed after the step) per work
        let decoding = (0..running.len()).filter(|&i| running[i].fed >= running[i].n_prompt);
        let mut plan: Vec<(usize, usize)> = decoding.map(|i| (i, running[i].fed + 1)).collect();
        let mut budget = BATCH_SEQS + SCHED_CHUNK - plan.len();
        for (i, s) in running.iter().enumerate().filter(|(_, s)| s.fed < s.n_prompt) {
            let take = (s.n_prompt - s.fed).min(budget);
            if take == 0 {
                break;
            }
            plan.push((i, s.fed + take));
            budget -= take;
        }
        let work: Vec<Work> = plan.iter().map(|&(i, end)| (&running[i], end)).map(|(s, end)| Work { slot: s.slot, tokens: &s.ids[s.fed..end], pos: s.fed }).collect();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| eng.step(&work).map(|l| l.len())));
        drop(work);
        let logits = match result {
            // the step's logits, sampled where it left them (no copy)
            Ok(Ok(n)) => &mut eng.st.logits[..n],
            Ok(Err(e)) => {
                // (checked at admission; a failure here ends the requests of this step)
                let msg = e.to_string();
                let mut order: Vec<usize> = plan.iter().map(|p| p.0).collect();
                order.sort_unstable();
                for &i in order.iter().rev() {
                    let s = running.remove(i);
                    let _ = s.req.out.try_send(SchedEvent::Done(Err(rt::Error::Params(msg.clone()))));
                }
                continue;
            }
            Err(p) => {
                let msg = p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_default();
                eng.reset();
                for s in running.drain(..) {
                    let _ = s.req.out.try_send(SchedEvent::Panic(msg.clone()));
                }
                continue;
            }
        };
        let mut done = Vec::new();
        for (k, &(i, fed)) in plan.iter().enumerate() {
            let s = &mut running[i];
            s.fed = fed;
            used[s.slot] = tick;
            if s.fed < s.n_prompt {
                continue; // more of the prompt to read
            }
            if s.fed == s.n_prompt {
                s.stats.prefill_s = s.start.elapsed().as_secs_f64();
            }
            let id = s.sampler.sample(&mut logits[k * nv..(k + 1) * nv], &s.ids);
            if let Some(finish) = sched_token(&tok, s, id) {
                done.push((i, finish));
            }
        }
        done.sort_unstable_by_key(|d| d.0);
        for &(i, finish) in done.iter().rev() {
            let mut s = running.remove(i);
            sched_end(&mut s, finish);
        }
    }
}

/// Refuses a request whose prompt and max_tokens do not fit the context (as generate_ids does).
fn sched_check(eng: &Engine, ids: &[u32], p: &rt::GenParams) -> rt::Result<()> {
    p.validate()?;
    if ids.is_empty() {
        return Err(rt::Error::Params("the prompt is empty; give at least one token".into()));
    }
    let (limit, needed) = (eng.max_seq(), ids.len().saturating_add(p.max_tokens));
    if needed > limit {
        return Err(rt::Error::ContextFull { needed, limit });
    }
    Ok(())
}

/// A drawn token, as generate_ids handles it; Some(finish) when the request ends with it.
fn sched_token(tok: &Tokenizer, s: &mut SchedSeq, id: u32) -> Option<rt::FinishReason> {
    if s.req.params.stop_at_eos && tok.is_eog(id) {
        return Some(rt::FinishReason::Stop);
    }
    s.ids.push(id);
    s.stats.gen_tokens += 1;
    let piece = s.text.push(tok.token_bytes(id));
    if !sched_send(s, piece) {
        return Some(rt::FinishReason::Cancelled);
    }
    if s.text.stopped {
        return Some(rt::FinishReason::Stop);
    }
    (s.stats.gen_tokens == s.req.params.max_tokens).then_some(rt::FinishReason::Length)
}

/// Queues a piece for the connection; false when the client is gone or not reading.
fn sched_send(s: &mut SchedSeq, piece: String) -> bool {
    if piece.is_empty() {
        return true;
    }
    s.all.push_str(&piece);
    s.req.out.try_send(SchedEvent::Text(piece)).is_ok()
}

/// Ends a request: the held-back text (unless cancelled), then the result. Returns true.
fn sched_end(s: &mut SchedSeq, mut finish: rt::FinishReason) -> bool {
    if finish != rt::FinishReason::Cancelled {
        let rest = s.text.finish();
        if !sched_send(s, rest) {
            finish = rt::FinishReason::Cancelled;
        }
    }
    s.stats.decode_s = s.start.elapsed().as_secs_f64() - s.stats.prefill_s;
    s.stats.finish = finish;
    let _ = s.req.out.try_send(SchedEvent::Done(Ok((std::mem::take(&mut s.all), s.stats.clone()))));
    true
}

/// The server's side of the scheduler: connection threads submit requests and wait for text.
pub struct BatchedBackend {
    tx: mpsc::Sender<SchedReq>,
    max_seq: usize,
    prompter: Prompter,
}

impl BatchedBackend {
    fn run(&self, ids: Vec<u32>, p: &rt::GenParams, on_text: &mut dyn FnMut(&str) -> bool) -> rt::Result<(String, rt::Stats)> {
        let (out, events) = mpsc::sync_channel(SCHED_QUEUE);
        let cancel = Arc::new(AtomicBool::new(false));
        let req = SchedReq { ids, params: p.clone(), out, cancel: cancel.clone() };
        if self.tx.send(req).is_err() {
            return Err(rt::Error::Device("the engine's scheduler thread has stopped".into()));
        }
        loop {
            match events.recv_timeout(SCHED_POLL) {
                Ok(SchedEvent::Text(t)) => {
                    if !cancel.load(Ordering::Relaxed) && !on_text(&t) {
                        cancel.store(true, Ordering::Relaxed);
                    }
                }
                Ok(SchedEvent::Done(r)) => return r,
                Ok(SchedEvent::Panic(msg)) => std::panic::resume_unwind(Box::new(msg)),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if !cancel.load(Ordering::Relaxed) && !on_text("") {
                        cancel.store(true, Ordering::Relaxed);
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    // dropped by the scheduler (its queue was full: the client stopped reading)
                    return Ok((String::new(), rt::Stats { finish: rt::FinishReason::Cancelled, ..Default::default() }));
                }
            }
        }
    }
}

impl rt::server::Backend for BatchedBackend {
    fn model_id(&self) -> String {
        format!("metainfer-{}", &ENGINE_KEY[..12])
    }

    fn max_seq(&self) -> usize {
        self.max_seq
    }

    fn count_tokens(&self, text: &str) -> usize {
        self.prompter.ids(text).len()
    }

    fn complete(&self, prompt: &str, p: &rt::GenParams, on_text: &mut dyn FnMut(&str) -> bool) -> rt::Result<(String, rt::Stats)> {
        self.run(self.prompter.ids(prompt), p, on_text)
    }

    fn chat(&self, messages: &[rt::Message], kwargs: &rt::TemplateKwargs, p: &rt::GenParams, on_text: &mut dyn FnMut(&str) -> bool) -> rt::Result<(String, rt::Stats)> {
        self.run(self.prompter.chat_ids(messages, kwargs)?, p, on_text)
    }

    fn count_chat_tokens(&self, messages: &[rt::Message], kwargs: &rt::TemplateKwargs) -> Option<usize> {
        self.prompter.chat_ids(messages, kwargs).ok().map(|ids| ids.len())
    }

    fn chat_prompt(&self, messages: &[rt::Message], kwargs: &rt::TemplateKwargs) -> Option<String> {
        self.prompter.chat_prompt(messages, kwargs).ok()
    }
}
