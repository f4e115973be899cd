//! [`SseParser`]: an incremental server-sent-events parser fed with raw bytes.
//!
//! It follows the WHATWG event-stream rules that matter for chat streams: lines end with
//! `\r\n`, `\n` or `\r` (a `\r` at the end of one push and a `\n` at the start of the next
//! are one line ending); a line starting with `:` is a comment; `data:` lines of one event
//! are joined with `\n`; one space after the colon is dropped; a blank line dispatches the
//! event; an event without data is not dispatched. Bytes are only decoded once a whole line
//! has arrived, so a UTF-8 character split between pushes is decoded intact.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, when the event had one (chat streams do not use it).
    pub event: Option<String>,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
}

/// Byte-fed SSE parser; see the module docs.
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of the current, unfinished line.
    line: Vec<u8>,
    /// The previous push ended in `\r`: a leading `\n` of the next push belongs to it.
    after_cr: bool,
    /// Data lines of the current event.
    data: Vec<String>,
    has_data: bool,
    event: Option<String>,
}

impl SseParser {
    pub fn new() -> SseParser {
        SseParser::default()
    }

    /// Feeds the next bytes of the stream; returns the events they completed, in order.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        for &b in bytes {
            if self.after_cr {
                self.after_cr = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\n' => self.end_line(&mut out),
                b'\r' => {
                    self.after_cr = true;
                    self.end_line(&mut out);
                }
                _ => self.line.push(b),
            }
        }
        out
    }

    /// Whether bytes of an unfinished line or event are pending (the stream was cut).
    pub fn is_mid_event(&self) -> bool {
        !self.line.is_empty() || self.has_data || self.event.is_some()
    }

    fn end_line(&mut self, out: &mut Vec<SseEvent>) {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            if self.has_data {
                out.push(SseEvent {
                    event: self.event.take(),
                    data: self.data.join("\n"),
                });
            }
            self.data.clear();
            self.has_data = false;
            self.event = None;
            return;
        }
        let line = String::from_utf8_lossy(&line);
        if line.starts_with(':') {
            return; // comment, e.g. `: keep-alive`
        }
        let (field, value) = match line.find(':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (&line[..], ""),
        };
        match field {
            "data" => {
                self.data.push(value.to_string());
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_string()),
            _ => {} // id, retry and unknown fields are ignored
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(events: &[SseEvent]) -> Vec<&str> {
        events.iter().map(|e| e.data.as_str()).collect()
    }

    const SAMPLE: &str = ": keep-alive\r\n\
        event: message\r\n\
        id: 7\r\n\
        data: {\"a\":\"h\u{e9}llo \u{1F600}\"}\r\n\
        \r\n\
        data: line one\n\
        data: line two\n\
        \n\
        data:no-space\n\
        retry: 100\n\
        \n\
        : comment between\n\
        \n\
        data: [DONE]\n\
        \n";

    fn expected() -> Vec<&'static str> {
        vec![
            "{\"a\":\"h\u{e9}llo \u{1F600}\"}",
            "line one\nline two",
            "no-space",
            "[DONE]",
        ]
    }

    #[test]
    fn whole_sample_in_one_push() {
        let mut p = SseParser::new();
        let ev = p.push(SAMPLE.as_bytes());
        assert_eq!(data(&ev), expected());
        assert_eq!(ev[0].event.as_deref(), Some("message"));
        assert_eq!(ev[1].event, None);
        assert!(!p.is_mid_event());
    }

    #[test]
    fn every_single_split_point() {
        let bytes = SAMPLE.as_bytes();
        for i in 0..=bytes.len() {
            let mut p = SseParser::new();
            let mut ev = p.push(&bytes[..i]);
            ev.extend(p.push(&bytes[i..]));
            assert_eq!(data(&ev), expected(), "split at byte {i}");
        }
    }

    #[test]
    fn every_pair_of_split_points() {
        let bytes = SAMPLE.as_bytes();
        for i in 0..=bytes.len() {
            for j in i..=bytes.len() {
                let mut p = SseParser::new();
                let mut ev = p.push(&bytes[..i]);
                ev.extend(p.push(&bytes[i..j]));
                ev.extend(p.push(&bytes[j..]));
                assert_eq!(data(&ev), expected(), "split at bytes {i} and {j}");
            }
        }
    }

    #[test]
    fn byte_by_byte() {
        let mut p = SseParser::new();
        let ev: Vec<SseEvent> = SAMPLE
            .as_bytes()
            .iter()
            .flat_map(|b| p.push(&[*b]))
            .collect();
        assert_eq!(data(&ev), expected());
    }

    #[test]
    fn lone_cr_line_endings() {
        let mut p = SseParser::new();
        let ev = p.push(b"data: a\r\rdata: b\r");
        assert_eq!(data(&ev), vec!["a"]);
        let ev = p.push(b"\r");
        assert_eq!(data(&ev), vec!["b"]);
    }

    #[test]
    fn cut_stream_is_mid_event() {
        let mut p = SseParser::new();
        assert!(p.push(b"data: {\"trunc").is_empty());
        assert!(p.is_mid_event());
        let mut p = SseParser::new();
        assert!(p.push(b"data: x\n").is_empty());
        assert!(p.is_mid_event());
    }

    #[test]
    fn event_without_data_is_not_dispatched() {
        let mut p = SseParser::new();
        assert!(p.push(b"event: ping\n\nid: 3\n\n").is_empty());
        assert_eq!(data(&p.push(b"data\n\n")), vec![""]);
    }
}
