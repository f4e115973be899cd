// Generation: prefill reusing the KV cache, then sample / forward per token, streaming UTF-8-safe text.

/// Turns token bytes into text pieces: UTF-8 across token boundaries, stop strings.
pub(crate) struct GenTextStream {
    stop: Vec<String>,
    pending: Vec<u8>, // [< 4] bytes of an incomplete UTF-8 character
    held: String,     // decoded text not handed out yet (it could begin a stop string)
    pub(crate) stopped: bool, // a stop string was found: nothing more is handed out
}

impl GenTextStream {
    pub(crate) fn new(stop: &[String]) -> GenTextStream {
        GenTextStream { stop: stop.to_vec(), pending: Vec::new(), held: String::new(), stopped: false }
    }

    /// Appends a token's bytes; returns the text that can be handed out now.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut start = 0;
        loop {
            let (good, bad) = match std::str::from_utf8(&self.pending[start..]) {
                Ok(s) => (s.len(), None),
                Err(e) => (e.valid_up_to(), e.error_len()),
            };
            self.held.push_str(std::str::from_utf8(&self.pending[start..start + good]).unwrap_or(""));
            start += good;
            let Some(bad) = bad else { break }; // all decoded, or an incomplete character at the end: kept
            self.held.push('\u{FFFD}');
            start += bad;
        }
        self.pending.drain(..start);
        self.take(false)
    }

    /// End of generation: the incomplete tail becomes U+FFFD, held-back text is released.
    pub(crate) fn finish(&mut self) -> String {
        self.held.push_str(&String::from_utf8_lossy(&std::mem::take(&mut self.pending)));
        self.take(true)
    }

    /// Returns the held text up to the earliest stop string (then stops), or up to the longest tail
    /// that is a proper prefix of a stop string (all of it when `last`).
    fn take(&mut self, last: bool) -> String {
        if self.stopped {
            return String::new();
        }
        let hb = self.held.as_bytes();
        let prefix_len = |s: &String| {
            (1..s.len().min(hb.len() + 1)).rev().find(|&h| s.as_bytes().starts_with(&hb[hb.len() - h..]))
        };
        let end = match self.stop.iter().filter_map(|s| self.held.find(s.as_str())).min() {
            Some(i) => {
                self.stopped = true;
                i
            }
            None if last => hb.len(),
            None => hb.len() - self.stop.iter().filter_map(prefix_len).max().unwrap_or(0),
        };
        self.held.drain(..end).collect()
    }
}

impl Engine {
    /// Raw-prompt generation (special tokens parsed, BOS as the model file asks); returns the text.
    pub fn generate(&mut self, prompt: &str, p: &rt::GenParams) -> rt::Result<String> {
        Ok(self.stream(prompt, p, &mut |_| true)?.0)
    }

    /// Raw-prompt generation streaming text through `on_text` (false cancels): BOS when the model file
    /// asks for it and the text does not start with it, encode (special tokens parsed), generate_ids.
    pub fn stream(&mut self, prompt: &str, p: &rt::GenParams, on_text: &mut dyn FnMut(&str) -> bool)
        -> rt::Result<(String, rt::Stats)> {
        let ids = self.prompt_ids(prompt);
        let mut text = String::new();
        let (_, stats) = self.generate_ids(&ids, p, &mut |_, piece| {
            if piece.is_empty() {
                return true;
            }
            text.push_str(piece);
            on_text(piece)
        })?;
        Ok((text, stats))
    }

    /// A raw prompt's ids as `stream` evaluates them (`tokenize_prompt`).
    pub(crate) fn prompt_ids(&self, prompt: &str) -> Vec<u32> {
        tokenize_prompt(&self.tok, prompt)
    }

    /// The tokenizer and chat template, for threads that prepare requests while the engine runs.
    pub(crate) fn prompter(&self) -> Prompter {
        Prompter { tok: self.tok.clone(), template: self.template.clone() }
    }

    /// The core loop: up to `p.max_tokens` tokens after `prompt_ids`; `on_token(id, final text)` per
    /// token and once more with the held-back rest; false cancels. Returns the ids (no eog) and stats.
    pub fn generate_ids(&mut self, prompt_ids: &[u32], p: &rt::GenParams, on_token: &mut dyn FnMut(u32, &str) -> bool) -> rt::Result<(Vec<u32>, rt::Stats)> {
        p.validate()?;
        if prompt_ids.is_empty() {
            return Err(rt::Error::Params("the prompt is empty; give at least one token".into()));
        }
        let n_vocab = self.n_vocab();
        if let Some((i, &bad)) = prompt_ids.iter().enumerate().find(|(_, &t)| t as usize >= n_vocab) {
            return Err(rt::Error::Params(format!("prompt token {i} is id {bad}, but the vocab has {n_vocab} tokens")));
        }
        let (limit, needed) = (self.max_seq(), prompt_ids.len() + p.max_tokens);
        if needed > limit {
            return Err(rt::Error::ContextFull { needed, limit });
        }
        let mut stats = rt::Stats::default();
        if p.max_tokens == 0 {
            return Ok((Vec::new(), stats));
        }

        // Prefill, reusing the cached prefix; the last prompt token is always recomputed.
        let t0 = std::time::Instant::now();
        let common = self.history.iter().zip(prompt_ids).take_while(|(a, b)| a == b).count().min(prompt_ids.len() - 1);
        let mut sampler = Sampler::new(p);
        let mut id = self.forward_sample(&prompt_ids[common..], common, &mut sampler, prompt_ids)?;
        stats.prompt_tokens = prompt_ids.len() - common;
        stats.prefill_s = t0.elapsed().as_secs_f64();

        let t1 = std::time::Instant::now();
        let mut ids: Vec<u32> = prompt_ids.to_vec(); // prompt + generated (the penalty looks at both)
        let mut stream = GenTextStream::new(&p.stop);
        let mut finish = rt::FinishReason::Length;
        for step in 0..p.max_tokens {
            if p.stop_at_eos && self.tok.is_eog(id) {
                finish = rt::FinishReason::Stop;
                break;
            }
            ids.push(id);
            let piece = stream.push(self.tok.token_bytes(id));
            let cancelled = !on_token(id, &piece);
            if cancelled || stream.stopped {
                finish = if cancelled { rt::FinishReason::Cancelled } else { rt::FinishReason::Stop };
                break;
            }
            if step + 1 < p.max_tokens {
                // (The last token's successor is not needed.)
                id = self.forward_sample(&[id], ids.len() - 1, &mut sampler, &ids)?;
            }
        }
        let out = ids.split_off(prompt_ids.len());
        if finish != rt::FinishReason::Cancelled {
            let rest = stream.finish();
            if !rest.is_empty() && !on_token(out.last().copied().unwrap_or(0), &rest) {
                finish = rt::FinishReason::Cancelled;
            }
        }
        stats.decode_s = t1.elapsed().as_secs_f64();
        stats.gen_tokens = out.len();
        stats.finish = finish;
        Ok((out, stats))
    }

    /// Renders a conversation with the model file's chat template.
    pub fn render_chat(&self, messages: &[rt::Message], add_generation_prompt: bool) -> rt::Result<String> {
        self.render_chat_with(messages, add_generation_prompt, &rt::TemplateKwargs::new())
    }

    /// render_chat with extra template variables (`{"enable_thinking": false}` for Qwen3's).
    pub fn render_chat_with(&self, messages: &[rt::Message], add_generation_prompt: bool, kwargs: &rt::TemplateKwargs) -> rt::Result<String> {
        render_with_template(&self.tok, self.template.as_deref(), messages, add_generation_prompt, kwargs)
    }

    /// Chat: renders the conversation with the generation prompt, streams the reply through `on_text`.
    pub fn chat(&mut self, messages: &[rt::Message], p: &rt::GenParams, on_text: &mut dyn FnMut(&str) -> bool) -> rt::Result<(String, rt::Stats)> {
        self.chat_with(messages, &rt::TemplateKwargs::new(), p, on_text)
    }

    /// The chat template in use (the model file's, the family's default or set_chat_template's).
    pub fn chat_template(&self) -> Option<&str> {
        self.template.as_deref().map(ChatTemplate::source)
    }

    /// Replaces the chat template (llama.cpp's --chat-template-file): a template that does not
    /// compile is rt::Error::Template and the engine keeps its own.
    pub fn set_chat_template(&mut self, source: &str) -> rt::Result<()> {
        let t = ChatTemplate::new(source.to_string());
        t.check()?;
        self.template = Some(std::sync::Arc::new(t));
        Ok(())
    }

    /// chat with extra template variables.
    pub fn chat_with(&mut self, messages: &[rt::Message], kwargs: &rt::TemplateKwargs, p: &rt::GenParams, on_text: &mut dyn FnMut(&str) -> bool) -> rt::Result<(String, rt::Stats)> {
        let prompt = self.render_chat_with(messages, true, kwargs)?;
        self.stream(&prompt, p, on_text)
    }
}

/// The engine's tokenizer and chat template, shared (both are immutable) with the threads that
/// turn requests into prompt ids while the engine runs: the server's connection threads.
#[derive(Clone)]
pub(crate) struct Prompter {
    tok: std::sync::Arc<Tokenizer>,
    template: Option<std::sync::Arc<ChatTemplate>>,
}

impl Prompter {
    /// A raw prompt's ids, as `Engine::prompt_ids`.
    pub(crate) fn ids(&self, prompt: &str) -> Vec<u32> {
        tokenize_prompt(&self.tok, prompt)
    }

    /// A conversation's prompt text with the generation prompt, as `Engine::chat_with` renders it.
    pub(crate) fn chat_prompt(&self, messages: &[rt::Message], kwargs: &rt::TemplateKwargs) -> rt::Result<String> {
        render_with_template(&self.tok, self.template.as_deref(), messages, true, kwargs)
    }

    /// A conversation's ids with the generation prompt, as `Engine::chat_with` evaluates it.
    pub(crate) fn chat_ids(&self, messages: &[rt::Message], kwargs: &rt::TemplateKwargs) -> rt::Result<Vec<u32>> {
        Ok(self.ids(&self.chat_prompt(messages, kwargs)?))
    }
}

/// A raw prompt's ids as `stream` evaluates them: BOS when the model file asks for it and the
/// text does not start with it, then the text (special tokens parsed).
fn tokenize_prompt(tok: &Tokenizer, prompt: &str) -> Vec<u32> {
    let has_bos = |b: u32| {
        let t = tok.decode(&[b]);
        !t.is_empty() && prompt.starts_with(&t)
    };
    let bos = tok.bos_id().filter(|&b| tok.add_bos() && !has_bos(b));
    bos.into_iter().chain(tok.encode(prompt, true)).collect()
}

/// Renders a conversation with the model file's chat template (`template`; None: it has none).
fn render_with_template(tok: &Tokenizer, template: Option<&ChatTemplate>, messages: &[rt::Message], add_generation_prompt: bool, kwargs: &rt::TemplateKwargs) -> rt::Result<String> {
    let none = "the model file has no chat template (tokenizer.chat_template); use generate() with a raw prompt";
    let t = template.ok_or_else(|| rt::Error::Template(none.into()))?;
    let text_of = |id: Option<u32>| id.map(|i| tok.decode(&[i])).unwrap_or_default();
    let (bos, eos) = (text_of(tok.bos_id()), text_of(tok.eos_id()));
    t.render(messages, add_generation_prompt, &bos, &eos, kwargs)
}
