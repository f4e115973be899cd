//! `METAINFER_MODE`: whether a build may generate engines.

use std::fmt;

/// How a build treats the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Hit: use it (even when stale). Miss: generate, then write the entry.
    Auto,
    /// Hit, or an error naming the key, the directories searched and the fixing command.
    Offline,
    /// Regenerate, replacing any entry.
    Refresh,
}

impl Mode {
    pub const ALL: &'static [Mode] = &[Mode::Auto, Mode::Offline, Mode::Refresh];

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Auto => "auto",
            Mode::Offline => "offline",
            Mode::Refresh => "refresh",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether a `CARGO_NET_OFFLINE` value turns the network off (cargo's reading: `true`).
pub fn net_offline(value: &str) -> bool {
    value.trim().eq_ignore_ascii_case("true")
}

/// The mode of this build and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModeSetting {
    pub mode: Mode,
    /// `METAINFER_MODE=offline`, `CARGO_NET_OFFLINE=true`, `a docs build`, `the default`.
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "METAINFER_MODE is `{value}`; allowed: auto, offline, refresh (or leave it unset for auto)"
)]
pub struct ModeError {
    pub value: String,
}

/// The environment variables the mode depends on (a build re-runs when one changes).
pub const MODE_ENV: &[&str] = &["METAINFER_MODE", "CARGO_NET_OFFLINE", "DOCS_RS"];

impl ModeSetting {
    /// From the process environment.
    pub fn from_env() -> Result<ModeSetting, ModeError> {
        ModeSetting::from_vars(crate::env::var)
    }

    /// `METAINFER_MODE` (`auto` | `offline` | `refresh`, unset: `auto`). An `auto` mode becomes
    /// `offline` under `CARGO_NET_OFFLINE=true` and in docs builds (`DOCS_RS`, `CARGO_CFG_DOC`);
    /// an explicit `refresh` is kept.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<ModeSetting, ModeError> {
        let explicit = get("METAINFER_MODE").filter(|v| !v.is_empty());
        let (mode, reason) = match explicit.as_deref() {
            None => (Mode::Auto, "the default".to_string()),
            Some(v) => match Mode::ALL.iter().find(|m| m.as_str() == v.trim()) {
                Some(m) => (*m, format!("METAINFER_MODE={v}")),
                None => {
                    return Err(ModeError {
                        value: v.to_string(),
                    })
                }
            },
        };
        if mode == Mode::Auto {
            if get("CARGO_NET_OFFLINE").is_some_and(|v| net_offline(&v)) {
                return Ok(ModeSetting {
                    mode: Mode::Offline,
                    reason: "CARGO_NET_OFFLINE=true".into(),
                });
            }
            if get("DOCS_RS").is_some() || get("CARGO_CFG_DOC").is_some() {
                return Ok(ModeSetting {
                    mode: Mode::Offline,
                    reason: "a docs build".into(),
                });
            }
        }
        Ok(ModeSetting { mode, reason })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn mode(vars: &[(&str, &str)]) -> Result<ModeSetting, ModeError> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ModeSetting::from_vars(|k| m.get(k).cloned())
    }

    #[test]
    fn default_is_auto() {
        assert_eq!(mode(&[]).unwrap().mode, Mode::Auto);
        assert_eq!(mode(&[("METAINFER_MODE", "")]).unwrap().mode, Mode::Auto);
    }

    #[test]
    fn explicit_modes() {
        for m in Mode::ALL {
            assert_eq!(mode(&[("METAINFER_MODE", m.as_str())]).unwrap().mode, *m);
        }
    }

    #[test]
    fn unknown_mode_lists_allowed() {
        let e = mode(&[("METAINFER_MODE", "online")]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "METAINFER_MODE is `online`; allowed: auto, offline, refresh (or leave it unset for auto)"
        );
    }

    #[test]
    fn cargo_net_offline_implies_offline() {
        let m = mode(&[("CARGO_NET_OFFLINE", "true")]).unwrap();
        assert_eq!(m.mode, Mode::Offline);
        assert_eq!(m.reason, "CARGO_NET_OFFLINE=true");
        assert_eq!(
            mode(&[("CARGO_NET_OFFLINE", "false")]).unwrap().mode,
            Mode::Auto
        );
        let m = mode(&[("CARGO_NET_OFFLINE", "true"), ("METAINFER_MODE", "auto")]).unwrap();
        assert_eq!(m.mode, Mode::Offline);
        let m = mode(&[("CARGO_NET_OFFLINE", "true"), ("METAINFER_MODE", "refresh")]).unwrap();
        assert_eq!(m.mode, Mode::Refresh);
    }

    #[test]
    fn docs_builds_are_offline() {
        assert_eq!(mode(&[("DOCS_RS", "1")]).unwrap().mode, Mode::Offline);
        assert_eq!(mode(&[("CARGO_CFG_DOC", "")]).unwrap().mode, Mode::Offline);
    }
}
