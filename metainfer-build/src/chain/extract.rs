//! Getting a section's code out of an LLM reply, and turning the verifier's compiler output
//! into feedback that points at the section's own lines.

/// The Rust code of a reply: the longest fenced block tagged `rust` (or untagged), with a
/// leading `use super::*;` dropped (the section's module has it). A reply with no code, an
/// unclosed fence (a truncated reply) or only prose is an error that says what to send instead.
pub fn code_of(reply: &str, finish_reason: Option<&str>) -> Result<String, String> {
    if reply.trim().is_empty() {
        return Err(
            "your reply was empty; reply with the section as one ```rust code block".into(),
        );
    }
    let mut blocks: Vec<String> = Vec::new();
    let mut open: Option<(String, Vec<&str>)> = None;
    for line in reply.lines() {
        let t = line.trim_start();
        match &mut open {
            None => {
                if let Some(tag) = t.strip_prefix("```") {
                    open = Some((tag.trim().to_ascii_lowercase(), Vec::new()));
                }
            }
            Some((tag, body)) => {
                if t.trim_end() == "```" {
                    if tag.is_empty() || tag == "rust" || tag == "rs" {
                        blocks.push(body.join("\n"));
                    }
                    open = None;
                } else {
                    body.push(line);
                }
            }
        }
    }
    let truncated = finish_reason == Some("length");
    if let Some((_, body)) = open {
        if blocks.is_empty() {
            let why = if truncated {
                "the reply hit the token limit"
            } else {
                "the code block is never closed"
            };
            return Err(format!(
                "your reply was cut off ({why}) after {} lines of code; reply with a shorter, complete section in one ```rust block",
                body.len()
            ));
        }
    }
    let Some(code) = blocks.into_iter().max_by_key(|b| b.len()) else {
        return Err(if truncated {
            "your reply hit the token limit before any code; reply with only the ```rust code block, no explanation".into()
        } else {
            "your reply has no ```rust code block; reply with the whole section as one ```rust code block".into()
        });
    };
    let code = unwrap_module(&code);
    let kept: Vec<&str> = code
        .lines()
        .filter(|l| l.trim() != "use super::*;")
        .collect();
    let code = kept.join("\n").trim_matches('\n').to_string();
    if code.trim().is_empty() {
        return Err("your ```rust code block is empty; put the section's items in it".into());
    }
    Ok(code + "\n")
}

/// `mod name { items }` (the whole code one inline module, as models like to write a
/// section) becomes `items`: the section is wrapped in its module anyway.
fn unwrap_module(code: &str) -> String {
    let Ok(file) = syn::parse_file(code) else {
        return code.to_string();
    };
    let [syn::Item::Mod(m)] = file.items.as_slice() else {
        return code.to_string();
    };
    let Some((brace, _)) = &m.content else {
        return code.to_string();
    };
    if !m.attrs.is_empty() {
        return code.to_string();
    }
    let lines: Vec<&str> = code.lines().collect();
    let (first, last) = (
        brace.span.open().start().line,
        brace.span.close().start().line,
    ); // 1-based lines of `{` and `}`
    let body: Vec<&str> = if first == last {
        vec![]
    } else {
        lines[first..last - 1].to_vec()
    };
    let indent = body
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    body.iter()
        .map(|l| {
            if l.len() >= indent {
                &l[indent..]
            } else {
                l.trim_start()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The lines of `engine_rs` that hold `slot`'s code: (first line, last line), 1-based.
pub fn section_lines(engine_rs: &str, slot: &str) -> Option<(usize, usize)> {
    let open = format!("mod {slot} {{");
    let lines: Vec<&str> = engine_rs.lines().collect();
    let start = lines.iter().position(|l| *l == open)?;
    let end = lines[start..]
        .iter()
        .position(|l| *l == "}")
        .map(|e| start + e)?;
    // `mod x {`, `    use super::*;`, blank line, then the code (indented by four spaces).
    Some((start + 4, end))
}

/// The compiler's errors (warnings dropped), each `--> src/engine.rs:L:C` inside `slot`
/// annotated with the section's own line, at most `max` bytes.
pub fn compile_feedback(log: &str, engine_rs: &str, slot: &str, max: usize) -> String {
    let range = section_lines(engine_rs, slot);
    let mut out = String::new();
    let mut keep = false;
    for line in log.lines() {
        if line.starts_with("error") {
            keep = !line.starts_with("error: could not compile")
                && !line.starts_with("error: aborting");
        } else if line.starts_with("warning") {
            keep = false;
        }
        if !keep {
            continue;
        }
        let mut l = line.to_string();
        if let Some(pos) = line.find("src/engine.rs:") {
            let n: String = line[pos + "src/engine.rs:".len()..]
                .chars()
                .take_while(|c| c.is_ascii_digit())
                .collect();
            if let (Ok(n), Some((a, b))) = (n.parse::<usize>(), range) {
                if (a..=b).contains(&n) {
                    l.push_str(&format!("   (line {} of your section)", n + 1 - a));
                } else {
                    l.push_str("   (in another section: check the names and signatures your section exposes)");
                }
            }
        }
        if out.len() + l.len() + 1 > max {
            out.push_str("… (more errors cut)\n");
            break;
        }
        out.push_str(&l);
        out.push('\n');
    }
    if out.is_empty() {
        // No `error` lines (a linker or cargo failure): the tail of the log.
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
    use super::*;

    #[test]
    fn takes_the_longest_rust_block_and_drops_use_super() {
        let r = "Here:\n```rust\nuse super::*;\nfn a() {}\nfn b() {}\n```\nand a test\n```rust\nfn t() {}\n```\n";
        assert_eq!(code_of(r, Some("stop")).unwrap(), "fn a() {}\nfn b() {}\n");
        let untagged = "```\nfn a() {}\n```";
        assert_eq!(code_of(untagged, None).unwrap(), "fn a() {}\n");
    }

    #[test]
    fn a_section_wrapped_in_its_module_is_unwrapped() {
        let r = "```rust\nmod dot_f32 {\n    use super::*;\n    pub(crate) fn a() {}\n\n    fn b() {}\n}\n```";
        assert_eq!(
            code_of(r, None).unwrap(),
            "pub(crate) fn a() {}\n\nfn b() {}\n"
        );
        let two = "```rust\nmod a {}\nfn b() {}\n```";
        assert_eq!(
            code_of(two, None).unwrap(),
            "mod a {}\nfn b() {}\n",
            "only a sole module is unwrapped"
        );
    }

    #[test]
    fn garbage_truncated_and_prose_replies_are_explained() {
        assert!(code_of("", None).unwrap_err().contains("empty"));
        assert!(code_of("I cannot do that.", None)
            .unwrap_err()
            .contains("no ```rust code block"));
        let cut = "```rust\nfn a() {\n    let x = 1;\n";
        let e = code_of(cut, Some("length")).unwrap_err();
        assert!(e.contains("cut off") && e.contains("token limit"), "{e}");
        assert!(code_of("```python\nprint(1)\n```", None)
            .unwrap_err()
            .contains("no ```rust"));
        assert!(code_of("```rust\nuse super::*;\n```", None)
            .unwrap_err()
            .contains("empty"));
    }

    #[test]
    fn compile_errors_point_at_section_lines() {
        let engine = "// x\nmod a {\n    use super::*;\n\n    fn f() {}\n    fn g() { nope }\n}\npub use a::*;\n";
        let log = "warning: unused\n --> src/engine.rs:5:1\n\nerror[E0425]: cannot find value `nope`\n --> src/engine.rs:6:14\n  |\nerror: could not compile `x`\n";
        let fb = compile_feedback(log, engine, "a", 10_000);
        assert!(fb.contains("E0425"), "{fb}");
        assert!(fb.contains("(line 2 of your section)"), "{fb}");
        assert!(!fb.contains("unused"), "{fb}");
        assert!(!fb.contains("could not compile"), "{fb}");
    }
}
