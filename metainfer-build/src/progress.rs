//! Progress lines the user sees while an engine is generated.
//!
//! A proc-macro's stderr reaches the terminal as it is written (cargo passes lines that are not
//! rustc diagnostics straight through), but a build script's is captured and shown only when it
//! fails. So while [`Engine::emit`](crate::Engine::emit) runs, lines also go to the controlling
//! terminal (`/dev/tty`) when there is one; in CI there is none, and stderr alone is used.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

static TO_TTY: AtomicBool = AtomicBool::new(false);
static TTY: Mutex<Option<std::fs::File>> = Mutex::new(None);

/// From a build script: also write progress to the terminal, where there is one.
pub fn also_to_terminal() {
    if TO_TTY.swap(true, Ordering::SeqCst) {
        return;
    }
    if let Ok(f) = std::fs::OpenOptions::new().write(true).open("/dev/tty") {
        *TTY.lock().unwrap_or_else(|e| e.into_inner()) = Some(f);
    }
}

/// One progress line, on stderr (and the terminal, from a build script).
pub fn line(msg: &str) {
    eprintln!("{msg}");
    if TO_TTY.load(Ordering::SeqCst) {
        if let Some(f) = TTY.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            // `\r` and a clear-line first: cargo's progress bar may be on this line.
            let _ = write!(f, "\r\x1b[2K{msg}\n");
        }
    }
}
