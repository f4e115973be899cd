// The engine behind metainfer::rt::server: the HTTP side (routes, SSE, limits, 429s,
// cancellation on disconnect) is shared runtime code; this section maps its calls onto the
// engine. One engine has one KV cache, so the server runs one generation at a time (behind the
// backend's lock; the connection threads call it concurrently).

impl Engine {
    /// The server on `addr` (port 0 picks one; see `Server::local_addr`), not yet serving.
    pub fn server(self, addr: &str, cfg: rt::server::ServerConfig) -> std::io::Result<rt::server::Server> {
        let prompter = self.prompter();
        rt::server::Server::bind(addr, SerialBackend(std::sync::Mutex::new(self), prompter), cfg)
    }

    /// Requests the server runs at once (one: the engine has one KV cache).
    pub fn server_slots(&self) -> usize {
        1
    }

    /// Serves the OpenAI-compatible API on `addr` until the process ends.
    pub fn serve(self, addr: &str, cfg: rt::server::ServerConfig) -> std::io::Result<()> {
        self.server(addr, cfg)?.run()
    }
}

/// The engine as the server's backend, one request at a time; prompts are counted without
/// waiting for it (the tokenizer is shared).
pub struct SerialBackend(std::sync::Mutex<Engine>, Prompter);

impl SerialBackend {
    fn engine(&self) -> std::sync::MutexGuard<'_, Engine> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl rt::server::Backend for SerialBackend {
    fn model_id(&self) -> String {
        format!("metainfer-{}", &ENGINE_KEY[..12])
    }

    fn max_seq(&self) -> usize {
        self.engine().max_seq()
    }

    fn count_tokens(&self, text: &str) -> usize {
        self.1.ids(text).len()
    }

    fn complete(&self, prompt: &str, p: &rt::GenParams, on_text: &mut dyn FnMut(&str) -> bool) -> rt::Result<(String, rt::Stats)> {
        self.engine().stream(prompt, p, on_text)
    }

    fn chat(&self, messages: &[rt::Message], kwargs: &rt::TemplateKwargs, p: &rt::GenParams, on_text: &mut dyn FnMut(&str) -> bool) -> rt::Result<(String, rt::Stats)> {
        self.engine().chat_with(messages, kwargs, p, on_text)
    }

    fn count_chat_tokens(&self, messages: &[rt::Message], kwargs: &rt::TemplateKwargs) -> Option<usize> {
        self.1.chat_ids(messages, kwargs).ok().map(|ids| ids.len())
    }

    fn chat_prompt(&self, messages: &[rt::Message], kwargs: &rt::TemplateKwargs) -> Option<String> {
        self.1.chat_prompt(messages, kwargs).ok()
    }
}
