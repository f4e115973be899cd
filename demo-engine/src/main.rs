//! `demo-engine`: generate, chat, bench, perplexity and an OpenAI-compatible server on a qwen2,
//! qwen3, llama or gemma3 GGUF (or a qwen2 AWQ checkpoint) with the engines MetaInfer generated for
//! this crate (see src/lib.rs); the engine's family follows the file's architecture.

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use demo_engine::{load, perplexity, Model, Which};
use metainfer::rt::server::{ReasoningFormat, ServerConfig};
use metainfer::{GenParams, Message, TemplateKwargs};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::time::Instant;

#[derive(Parser)]
#[command(
    name = "demo-engine",
    version,
    about = "Run the MetaInfer-generated qwen2 and llama engines"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Args)]
struct ModelArgs {
    /// The GGUF model file (scripts/fetch-model.sh puts one in models/).
    #[arg(long, short = 'm')]
    model: PathBuf,
    /// Worker threads (default: all cores).
    #[arg(long, short = 't')]
    threads: Option<usize>,
    /// Which generated engine of the file's family (its general.architecture: qwen2, qwen3, llama or gemma3): auto (avx512 where the cpu has AVX-512 VNNI, for GGUF files; else avx2 when the cpu has it), avx512, avx2, generic, or a cuda one: sm_80, sm_89, sm_90.
    #[arg(long, default_value = "auto")]
    engine: Which,
    /// CUDA engines: launch every kernel of a decode step instead of replaying a captured CUDA graph.
    #[arg(long)]
    no_cuda_graph: bool,
}

#[derive(Args)]
struct SampleArgs {
    /// Tokens to generate at most.
    #[arg(long, short = 'n', default_value_t = 128)]
    max_tokens: usize,
    /// 0 = greedy.
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    #[arg(long, default_value_t = 40)]
    top_k: usize,
    #[arg(long, default_value_t = 0.95)]
    top_p: f32,
    #[arg(long, default_value_t = 0.05)]
    min_p: f32,
    #[arg(long, default_value_t = 1.0)]
    repeat_penalty: f32,
    /// Subtracted from a token's logit per occurrence among the last 64 tokens (-2 to 2).
    #[arg(long, default_value_t = 0.0)]
    frequency_penalty: f32,
    /// Subtracted from a token's logit once if it is among the last 64 tokens (-2 to 2).
    #[arg(long, default_value_t = 0.0)]
    presence_penalty: f32,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Stop when the text ends with this (repeatable).
    #[arg(long)]
    stop: Vec<String>,
    /// Keep generating past end-of-sequence tokens.
    #[arg(long)]
    ignore_eos: bool,
}

impl SampleArgs {
    fn params(&self) -> GenParams {
        GenParams {
            max_tokens: self.max_tokens,
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            frequency_penalty: self.frequency_penalty,
            presence_penalty: self.presence_penalty,
            repeat_last_n: 64,
            logit_bias: Vec::new(),
            seed: self.seed,
            stop: self.stop.clone(),
            stop_at_eos: !self.ignore_eos,
        }
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// Continue a raw prompt (no chat template).
    Generate {
        #[command(flatten)]
        m: ModelArgs,
        /// The prompt text (special tokens like <|im_start|> are recognised).
        #[arg(
            long,
            short = 'p',
            conflicts_with = "prompt_ids",
            required_unless_present = "prompt_ids"
        )]
        prompt: Option<String>,
        /// The prompt as token ids, comma separated.
        #[arg(long, value_delimiter = ',')]
        prompt_ids: Option<Vec<u32>>,
        #[command(flatten)]
        s: SampleArgs,
        /// After the text, print the generated ids, comma separated, as the last line.
        #[arg(long)]
        print_ids: bool,
    },
    /// Chat with the model's chat template (reads lines from stdin; /reset, /exit).
    Chat {
        #[command(flatten)]
        m: ModelArgs,
        #[arg(long, default_value = "You are a helpful assistant.")]
        system: String,
        #[command(flatten)]
        t: TemplateArgs,
        #[command(flatten)]
        s: SampleArgs,
    },
    /// Measure prefill and decode speed (after one untimed warm-up run, as llama-bench does, so
    /// that first touches of the mapped weights are not timed).
    Bench {
        #[command(flatten)]
        m: ModelArgs,
        #[arg(long, default_value_t = 128)]
        prompt_tokens: usize,
        #[arg(long, default_value_t = 64)]
        gen_tokens: usize,
        /// Repetitions; the best and the median are reported.
        #[arg(long, default_value_t = 3)]
        reps: usize,
        /// Print the result as JSON on the last line.
        #[arg(long)]
        json: bool,
        /// Skip the memory bandwidth probe (it reads a 1 GiB buffer, which would be the peak RSS
        /// of a short run).
        #[arg(long)]
        no_bandwidth: bool,
    },
    /// Perplexity of a text file, as llama.cpp's llama-perplexity computes it.
    Perplexity {
        #[command(flatten)]
        m: ModelArgs,
        #[arg(long, short = 'f')]
        file: PathBuf,
        #[arg(long, short = 'c', default_value_t = 512)]
        ctx: usize,
    },
    /// Serve the OpenAI-compatible HTTP API: /v1/models, /v1/chat/completions, /v1/completions.
    Serve {
        #[command(flatten)]
        m: ModelArgs,
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
        /// 0 picks a free port (the "listening on" line names it).
        #[arg(long, default_value_t = 8080)]
        port: u16,
        /// Requests admitted at once (running + waiting for a slot); more get 429. Default: twice
        /// the engine's slots (its `batch`), at least 4.
        #[arg(long)]
        max_concurrent: Option<usize>,
        /// Largest request body; larger gets 413.
        #[arg(long, default_value_t = 1 << 20)]
        max_body_bytes: usize,
        /// max_tokens for requests that give none (lowered to the context left).
        #[arg(long, default_value_t = 256)]
        default_max_tokens: usize,
        /// No log line per request on stderr.
        #[arg(long)]
        quiet: bool,
        #[command(flatten)]
        t: TemplateArgs,
        /// `deepseek`: a <think> block opening a chat reply (Qwen3), or opened by the chat
        /// template's generation prompt (DeepSeek-R1, Qwen3 Thinking-2507), goes to
        /// `reasoning_content`, the rest to `content`; `none`: all in `content`. A request's
        /// own `reasoning_format` overrides it.
        #[arg(long, default_value = "none")]
        reasoning_format: ReasoningFormat,
    },
}

#[derive(Args)]
struct TemplateArgs {
    /// Extra chat template variables, a JSON object: '{"enable_thinking": false}' turns Qwen3's
    /// thinking off (serve: every chat request gets them; a request's own
    /// `chat_template_kwargs` override them key by key).
    #[arg(long, value_parser = template_kwargs, default_value = "{}")]
    chat_template_kwargs: TemplateKwargs,
    /// A Jinja chat template to use instead of the model file's (llama.cpp's
    /// --chat-template-file; for files whose template is missing or wrong).
    #[arg(long)]
    chat_template_file: Option<PathBuf>,
}

impl TemplateArgs {
    /// Puts --chat-template-file's template into the engine.
    fn apply(&self, model: &mut dyn Model) -> Result<()> {
        if let Some(path) = &self.chat_template_file {
            let source = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the chat template {}", path.display()))?;
            model
                .set_chat_template(&source)
                .with_context(|| format!("the chat template in {}", path.display()))?;
        }
        Ok(())
    }
}

/// `--chat-template-kwargs`: a JSON object.
fn template_kwargs(s: &str) -> std::result::Result<TemplateKwargs, String> {
    match metainfer::rt::serde_json::from_str(s) {
        Ok(metainfer::rt::serde_json::Value::Object(m)) => Ok(m),
        Ok(other) => Err(format!(
            "a JSON object is needed, like '{{\"enable_thinking\": false}}', not {other}"
        )),
        Err(e) => Err(format!(
            "not JSON ({e}); give an object like '{{\"enable_thinking\": false}}'"
        )),
    }
}

fn open(m: &ModelArgs) -> Result<Box<dyn Model>> {
    let mut model =
        load(&m.model, m.engine).with_context(|| format!("loading {}", m.model.display()))?;
    if let Some(t) = m.threads {
        if t == 0 {
            bail!("--threads must be at least 1");
        }
        model.set_threads(t);
    }
    if m.no_cuda_graph {
        model.set_cuda_graph(false);
    }
    Ok(model)
}

/// Bytes per second `threads` threads read from a 1 GiB buffer (best of 5 passes).
fn read_bandwidth(threads: usize) -> f64 {
    let buf = vec![1u64; 1 << 27];
    let chunk = buf.len().div_ceil(threads);
    let mut best = 0.0f64;
    for _ in 0..5 {
        let t0 = Instant::now();
        let sum: u64 = std::thread::scope(|s| {
            let hs: Vec<_> = buf
                .chunks(chunk)
                .map(|c| s.spawn(move || c.iter().fold(0u64, |a, &x| a.wrapping_add(x))))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap_or(0)).sum()
        });
        std::hint::black_box(sum);
        best = best.max((buf.len() * 8) as f64 / t0.elapsed().as_secs_f64());
    }
    best
}

fn main() -> std::process::ExitCode {
    match run(Cli::parse().cmd) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cmd: Cmd) -> Result<()> {
    match cmd {
        Cmd::Generate {
            m,
            prompt,
            prompt_ids,
            s,
            print_ids,
        } => {
            let mut model = open(&m)?;
            let ids = match (prompt, prompt_ids) {
                (Some(p), _) => model.encode(&p),
                (None, Some(ids)) => ids,
                (None, None) => bail!("give --prompt or --prompt-ids"),
            };
            let mut out = std::io::stdout().lock();
            let (gen, stats) = model.generate_ids(&ids, &s.params(), &mut |_, text| {
                let _ = out.write_all(text.as_bytes());
                let _ = out.flush();
                true
            })?;
            drop(out);
            println!();
            eprintln!(
                "[{} prompt tokens, {:.1} tok/s prefill; {} generated, {:.1} tok/s decode; engine {}]",
                stats.prompt_tokens,
                stats.pp_tok_s(),
                stats.gen_tokens,
                stats.tg_tok_s(),
                model.hw()
            );
            if print_ids {
                println!(
                    "{}",
                    gen.iter()
                        .map(|i| i.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                );
            }
        }
        Cmd::Chat { m, system, t, s } => {
            let mut model = open(&m)?;
            t.apply(&mut *model)?;
            let mut messages = vec![Message::system(system.clone())];
            let stdin = std::io::stdin();
            eprintln!(
                "chat with {} ({} engine); /reset clears the conversation, /exit or EOF quits",
                m.model.display(),
                model.hw()
            );
            loop {
                eprint!("> ");
                let mut line = String::new();
                if stdin.lock().read_line(&mut line)? == 0 {
                    break;
                }
                let line = line.trim_end_matches(['\n', '\r']);
                match line {
                    "/exit" | "/quit" => break,
                    "/reset" => {
                        messages.truncate(1);
                        model.reset();
                        continue;
                    }
                    "" => continue,
                    _ => {}
                }
                messages.push(Message::user(line));
                let prompt = model.render_chat_with(&messages, true, &t.chat_template_kwargs)?;
                let ids = model.encode(&prompt);
                let mut out = std::io::stdout().lock();
                let mut reply = String::new();
                let res = model.generate_ids(&ids, &s.params(), &mut |_, text| {
                    reply.push_str(text);
                    let _ = out.write_all(text.as_bytes());
                    let _ = out.flush();
                    true
                });
                drop(out);
                println!();
                match res {
                    Ok(_) => messages.push(Message::assistant(reply)),
                    Err(e @ metainfer::Error::ContextFull { .. }) => {
                        eprintln!("{e}; type /reset to start over");
                        messages.pop();
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Cmd::Bench {
            m,
            prompt_tokens,
            gen_tokens,
            reps,
            json,
            no_bandwidth,
        } => {
            let mut model = open(&m)?;
            if prompt_tokens == 0 || gen_tokens == 0 || reps == 0 {
                bail!("--prompt-tokens, --gen-tokens and --reps must be at least 1");
            }
            // a deterministic prompt of ordinary text tokens
            let text =
                "The quick brown fox jumps over the lazy dog. fn main() { println!(\"hello\"); } ";
            let mut ids = Vec::new();
            while ids.len() < prompt_tokens {
                ids.extend(model.encode(text));
            }
            ids.truncate(prompt_tokens);
            let mut p = GenParams::greedy(gen_tokens + 1);
            p.stop_at_eos = false;
            let (mut pps, mut tgs) = (Vec::new(), Vec::new());
            // warm-up on a short prefix: it pages in every weight, and a long prompt is not
            // prefilled twice (scripts/bench-long.sh skips llama-bench's, a whole prefill, past
            // 2048 tokens)
            model.generate_ids(
                &ids[..ids.len().min(32)],
                &GenParams::greedy(2),
                &mut |_, _| true,
            )?;
            for r in 0..reps {
                model.reset();
                let t0 = Instant::now();
                let (_, st) = model.generate_ids(&ids, &p, &mut |_, _| true)?;
                eprintln!(
                    "rep {}: pp {:.2} tok/s, tg {:.2} tok/s ({:.2}s)",
                    r + 1,
                    st.pp_tok_s(),
                    st.tg_tok_s(),
                    t0.elapsed().as_secs_f64()
                );
                pps.push(st.pp_tok_s());
                tgs.push(st.tg_tok_s());
            }
            let median = |v: &mut Vec<f64>| {
                v.sort_by(|a, b| a.total_cmp(b));
                v[v.len() / 2]
            };
            let (pp_best, tg_best) = (
                pps.iter().cloned().fold(0.0, f64::max),
                tgs.iter().cloned().fold(0.0, f64::max),
            );
            let (pp, tg) = (median(&mut pps), median(&mut tgs));
            let threads = m.threads.unwrap_or_else(|| {
                std::thread::available_parallelism()
                    .map(|n| n.get())
                    .unwrap_or(1)
            });
            println!("prefill {prompt_tokens} tokens: {pp:.2} tok/s (best {pp_best:.2}); decode {gen_tokens} tokens: {tg:.2} tok/s (best {tg_best:.2}); {threads} threads, engine {}", model.hw());
            let bw = (!no_bandwidth).then(|| read_bandwidth(threads) / 1e9);
            if let Some(bw) = bw {
                println!("memory read bandwidth: {bw:.1} GB/s with {threads} threads (the decode ceiling is this / weight bytes per token)");
            }
            if json {
                println!(
                    "{{\"mem_gb_s\":{},\"pp_tok_s\":{pp:.3},\"tg_tok_s\":{tg:.3},\"pp_best_tok_s\":{pp_best:.3},\"tg_best_tok_s\":{tg_best:.3},\"prompt_tokens\":{prompt_tokens},\"gen_tokens\":{gen_tokens},\"threads\":{threads},\"reps\":{reps},\"engine\":\"{}\"}}",
                    bw.map_or("null".to_string(), |bw| format!("{bw:.2}")),
                    model.hw()
                );
            }
        }
        Cmd::Perplexity { m, file, ctx } => {
            let mut model = open(&m)?;
            if ctx < 4 || ctx > model.max_seq() {
                bail!(
                    "--ctx must be between 4 and the engine's context ({})",
                    model.max_seq()
                );
            }
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            let tokens = model.encode(&text);
            eprintln!(
                "{} tokens, {} chunks of {ctx}",
                tokens.len(),
                tokens.len() / ctx
            );
            let t0 = Instant::now();
            let (ppl, err, chunks) =
                perplexity(model.as_mut(), &tokens, ctx, |c, p| eprint!("[{c}]{p:.4} "))?;
            eprintln!();
            println!(
                "Final estimate: PPL = {ppl:.4} +/- {err:.5} ({chunks} chunks of {ctx}, {:.1}s)",
                t0.elapsed().as_secs_f64()
            );
        }
        Cmd::Serve {
            m,
            host,
            port,
            max_concurrent,
            max_body_bytes,
            default_max_tokens,
            quiet,
            t,
            reasoning_format,
        } => {
            if max_concurrent == Some(0) || max_body_bytes == 0 {
                bail!("--max-concurrent and --max-body-bytes must be at least 1");
            }
            let mut model = open(&m)?;
            t.apply(&mut *model)?;
            let slots = model.server_slots();
            let max_concurrent = max_concurrent.unwrap_or((2 * slots).max(4));
            let id = m
                .model
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "model".into());
            let (hw, ctx) = (model.hw(), model.max_seq());
            let cfg = ServerConfig {
                max_body_bytes,
                max_concurrent,
                default_max_tokens,
                log: !quiet,
                model_id: Some(id.clone()),
                chat_template_kwargs: t.chat_template_kwargs,
                reasoning_format,
                ..ServerConfig::default()
            };
            let addr = if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            };
            let server = model
                .into_server(&addr, cfg)
                .with_context(|| format!("cannot listen on {addr}"))?;
            let addr = server.local_addr()?;
            eprintln!("serving {id} ({hw} engine, context {ctx} tokens, {slots} requests run at once, {max_concurrent} admitted)");
            eprintln!("listening on http://{addr}/v1");
            server.run().context("serving")?;
        }
    }
    Ok(())
}
