// The engine behind metainfer::rt::server: the HTTP side (routes, SSE, limits, 429s,
// cancellation on disconnect) is shared runtime code; this section maps its calls onto the
// engine. One engine has one KV cache, so the server runs one generation at a time.

impl Engine {
    /// Prompt tokens as `stream` evaluates them: BOS when the model file asks for it.
    fn server_count(&self, text: &str) -> usize {
        let bos = self.tok.bos_id().filter(|&b| {
            let t = self.tok.decode(&[b]);
            self.tok.add_bos() && !(!t.is_empty() && text.starts_with(&t))
        });
        bos.iter().count() + self.tok.encode(text, true).len()
    }

    /// The server on `addr` (port 0 picks one; see `Server::local_addr`), not yet serving.
    pub fn server(self, addr: &str, cfg: rt::server::ServerConfig) -> std::io::Result<rt::server::Server> {
        rt::server::Server::bind(addr, self, cfg)
    }

    /// Serves the OpenAI-compatible API on `addr` until the process ends.
    pub fn serve(self, addr: &str, cfg: rt::server::ServerConfig) -> std::io::Result<()> {
        self.server(addr, cfg)?.run()
    }
}

impl rt::server::Backend for Engine {
    fn model_id(&self) -> String {
        format!("metainfer-{}", &ENGINE_KEY[..12])
    }

    fn max_seq(&self) -> usize {
        Engine::max_seq(self)
    }

    fn count_tokens(&self, text: &str) -> usize {
        self.server_count(text)
    }

    fn complete(&mut self, prompt: &str, p: &rt::GenParams, on_text: &mut dyn FnMut(&str) -> bool) -> rt::Result<(String, rt::Stats)> {
        self.stream(prompt, p, on_text)
    }

    fn chat(&mut self, messages: &[rt::Message], p: &rt::GenParams, on_text: &mut dyn FnMut(&str) -> bool) -> rt::Result<(String, rt::Stats)> {
        Engine::chat(self, messages, p, on_text)
    }

    fn count_chat_tokens(&self, messages: &[rt::Message]) -> Option<usize> {
        let prompt = self.render_chat(messages, true).ok()?;
        Some(self.server_count(&prompt))
    }
}
