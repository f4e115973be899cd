//! A chat reply's reasoning apart from its answer ([`ReasoningFormat::Deepseek`]): the text of a
//! `<think>…</think>` block that opens the reply (after any whitespace) is the reasoning, the
//! rest the content, with the newlines on either side of the tags dropped. When the prompt
//! itself opens the block (a chat template whose generation prompt ends with `<think>`, as
//! DeepSeek-R1's and Qwen3 Thinking-2507's do), the reply starts inside it: its text up to
//! `</think>` is the reasoning. Fed piece by piece as the engine streams, it holds back only what
//! could still be the start of a tag or the newlines before one, so streamed deltas concatenate to
//! exactly what a whole reply splits into.

use crate::tool_calls::hold_back;

const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Nothing but whitespace yet: the reply may still open a think block.
    Start,
    /// Inside the think block.
    Think,
    /// After it, or a reply without one.
    Content,
}

/// Splits a reply into (reasoning, content), as its pieces arrive.
#[derive(Debug)]
pub(crate) struct ThinkSplit {
    state: State,
    held: String,
    /// Newlines at the start of the reasoning or the content are dropped until other text comes.
    strip: bool,
}

/// Whether a rendered chat prompt leaves a think block open for the reply (it ends with
/// `<think>` and whitespace).
pub(crate) fn opens_think(prompt: &str) -> bool {
    prompt.trim_end().ends_with(OPEN)
}

impl ThinkSplit {
    /// A splitter for a reply; `opened`: the prompt opened the think block (see [`opens_think`]).
    pub(crate) fn new(opened: bool) -> Self {
        ThinkSplit {
            state: if opened { State::Think } else { State::Start },
            held: String::new(),
            strip: opened,
        }
    }

    /// A whole reply's (reasoning, content).
    pub(crate) fn whole(mut self, text: &str) -> (String, String) {
        let (mut r, mut c) = self.push(text);
        let (r2, c2) = self.finish();
        r.push_str(&r2);
        c.push_str(&c2);
        (r, c)
    }

    /// Feeds a piece; returns the reasoning and content text that became final.
    pub(crate) fn push(&mut self, piece: &str) -> (String, String) {
        self.held.push_str(piece);
        let (mut reasoning, mut content) = (String::new(), String::new());
        loop {
            match self.state {
                State::Start => {
                    let t = self.held.trim_start();
                    if let Some(rest) = t.strip_prefix(OPEN) {
                        self.held = rest.to_string();
                        (self.state, self.strip) = (State::Think, true);
                    } else if t.is_empty() || OPEN.starts_with(t) {
                        return (reasoning, content);
                    } else {
                        self.state = State::Content;
                    }
                }
                State::Think => {
                    self.strip_newlines();
                    if let Some(i) = self.held.find(CLOSE) {
                        reasoning.push_str(self.held[..i].trim_end_matches('\n'));
                        self.held.drain(..i + CLOSE.len());
                        (self.state, self.strip) = (State::Content, true);
                        continue;
                    }
                    // keep what may still be newlines before the closing tag, or its start
                    let keep = hold_back(&self.held, CLOSE, |t| t.trim_end_matches('\n'));
                    reasoning.extend(self.held.drain(..self.held.len() - keep));
                    return (reasoning, content);
                }
                State::Content => {
                    self.strip_newlines();
                    content.push_str(&std::mem::take(&mut self.held));
                    return (reasoning, content);
                }
            }
        }
    }

    /// The end of the reply: what is held goes where it was heading (a think block the reply
    /// never closed is all reasoning).
    pub(crate) fn finish(&mut self) -> (String, String) {
        let held = std::mem::take(&mut self.held);
        match self.state {
            State::Think => (held.trim_end_matches('\n').to_string(), String::new()),
            State::Start | State::Content => (String::new(), held),
        }
    }

    fn strip_newlines(&mut self) {
        if self.strip {
            let n = self.held.len() - self.held.trim_start_matches('\n').len();
            self.held.drain(..n);
            self.strip = self.held.is_empty();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{opens_think, ThinkSplit};

    fn pieces(text: &str, n: usize, opened: bool) -> (String, String) {
        let mut s = ThinkSplit::new(opened);
        let (mut r, mut c) = (String::new(), String::new());
        let chars: Vec<char> = text.chars().collect();
        for p in chars.chunks(n) {
            let (a, b) = s.push(&p.iter().collect::<String>());
            r.push_str(&a);
            c.push_str(&b);
        }
        let (a, b) = s.finish();
        (r + &a, c + &b)
    }

    #[test]
    fn a_leading_think_block_is_the_reasoning_in_any_pieces() {
        for (text, want) in [
            (
                "<think>\nplan it\n</think>\n\nthe answer",
                ("plan it", "the answer"),
            ),
            ("\n <think>a</think>b", ("a", "b")),
            ("<think>\n\n</think>\n\nhi", ("", "hi")),
            ("no thinking here", ("", "no thinking here")),
            ("<thin", ("", "<thin")),
            (
                "<think>cut off at max_tokens\n",
                ("cut off at max_tokens", ""),
            ),
            (
                "answer <think>later</think>",
                ("", "answer <think>later</think>"),
            ),
            ("<think>x</think>\n\ny\n</think>\n", ("x", "y\n</think>\n")),
            ("<think>a\n<b</thinkin\n</think>c", ("a\n<b</thinkin", "c")),
        ] {
            let whole = ThinkSplit::new(false).whole(text);
            assert_eq!((whole.0.as_str(), whole.1.as_str()), want, "{text:?}");
            for n in 1..5 {
                assert_eq!(pieces(text, n, false), whole, "{text:?} in pieces of {n}");
            }
        }
    }

    #[test]
    fn a_prompt_that_opens_the_block_starts_the_reply_inside_it() {
        for (prompt, opened) in [
            ("<|im_start|>assistant\n<think>\n", true),
            ("<｜Assistant｜><think>\n", true),
            ("<|im_start|>assistant\n<think>", true),
            ("<|im_start|>assistant\n<think>\n\n</think>\n\n", false),
            ("<|im_start|>assistant\n", false),
            ("<think>\nx", false),
        ] {
            assert_eq!(opens_think(prompt), opened, "{prompt:?}");
        }
        for (text, want) in [
            ("plan it\n</think>\n\nthe answer", ("plan it", "the answer")),
            ("\n\nplan\n</think>answer", ("plan", "answer")),
            ("</think>\n\nno reasoning", ("", "no reasoning")),
            ("cut off at max_tokens\n", ("cut off at max_tokens", "")),
            ("a <think> inside\n</think>b", ("a <think> inside", "b")),
            ("x</think>y</think>z", ("x", "y</think>z")),
            ("<b</thinkin\n</think>c", ("<b</thinkin", "c")),
        ] {
            let whole = ThinkSplit::new(true).whole(text);
            assert_eq!((whole.0.as_str(), whole.1.as_str()), want, "{text:?}");
            for n in 1..5 {
                assert_eq!(pieces(text, n, true), whole, "{text:?} in pieces of {n}");
            }
        }
    }
}
