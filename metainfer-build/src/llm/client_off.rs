//! [`Client`] in a build without the `llm` feature: the same interface, and every call fails
//! with what to turn on. The generator checks the feature before it plans an llm slot
//! ([`crate::ensure::feature_needed`]), so this is reached only by direct library use.

use super::error::LlmError;
use super::{ChatReply, ChatRequest, LlmConfig};

/// A chat-completions client for one [`LlmConfig`]; without the `llm` feature it cannot send.
pub struct Client {
    cfg: LlmConfig,
}

impl Client {
    pub fn new(cfg: LlmConfig) -> Client {
        Client { cfg }
    }

    pub fn config(&self) -> &LlmConfig {
        &self.cfg
    }

    /// Always an error: this build has no HTTP client.
    pub fn chat(
        &self,
        _req: &ChatRequest,
        _on_delta: &mut dyn FnMut(&str),
    ) -> Result<ChatReply, LlmError> {
        let off = crate::feature::FeatureOff::llm(
            "the llm client (ureq with TLS) is built only with the `llm` feature".into(),
        );
        Err(LlmError::Config(off.to_string()))
    }
}
