//! A lab wait's progress on stderr, from the wait's typed events ([`WaitEvent`]): the wait
//! itself prints nothing. [`line`] is the pure rendering (tested below); [`WaitLines`] writes
//! it for one [`Progress`] mode.

use crate::observe::observer::{Flip, WaitEvent};
use crate::observe::predicates::Unmet;
use std::io::{IsTerminal, Write};

/// How a wait shows progress on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    Quiet,
    /// One updating line (ANSI), for a terminal.
    Terminal,
    /// A plain line whenever a condition flips, for CI logs.
    Lines,
}

impl Progress {
    /// `Terminal` when stderr is a terminal, else `Lines` (never control codes in a log).
    pub fn for_stderr() -> Self {
        if std::io::stderr().is_terminal() {
            Progress::Terminal
        } else {
            Progress::Lines
        }
    }
}

/// What to write for one event: the text (no newline: `newline` says whether one follows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    pub text: String,
    pub newline: bool,
}

const CLEAR_LINE: &str = "\r\x1b[2K";

fn names(unmet: &[Unmet]) -> Vec<&'static str> {
    unmet.iter().map(|u| u.what.as_str()).collect()
}

fn flipped(target: &str, flip: &Flip, unmet: &[Unmet]) -> String {
    let still = names(unmet);
    let still = if still.is_empty() {
        "none".to_string()
    } else {
        still.join(", ")
    };
    format!("wait {target}: {flip}; unmet: {still}")
}

/// The stderr text of `event` in `progress` mode, if any (pure).
pub fn line(progress: Progress, event: &WaitEvent<'_>) -> Option<Shown> {
    let shown = |text: String, newline| Some(Shown { text, newline });
    match (progress, event) {
        (Progress::Quiet, _) | (_, WaitEvent::Observed(_)) => None,
        (
            Progress::Terminal,
            WaitEvent::Unmet {
                target,
                elapsed,
                unmet,
            },
        ) => shown(
            format!(
                "{CLEAR_LINE}wait {} {:>5.1}s: unmet {}",
                target.name(),
                elapsed.as_secs_f64(),
                names(unmet).join(", ")
            ),
            false,
        ),
        (
            Progress::Lines,
            WaitEvent::Flipped {
                target,
                flip,
                unmet,
            },
        ) => shown(flipped(target.name(), flip, unmet), true),
        (
            _,
            WaitEvent::Reached {
                target,
                elapsed,
                events,
                probes,
            },
        ) => {
            let clear = if progress == Progress::Terminal {
                CLEAR_LINE
            } else {
                ""
            };
            shown(
                format!(
                    "{clear}wait {}: reached after {:.1}s ({events} watch events, {probes} probes)",
                    target.name(),
                    elapsed.as_secs_f64(),
                ),
                true,
            )
        }
        // The updating line ends before the error is printed.
        (Progress::Terminal, WaitEvent::TimedOut { .. }) => shown(String::new(), true),
        _ => None,
    }
}

/// Writes a wait's progress to stderr in one mode.
pub struct WaitLines(pub Progress);

impl WaitLines {
    pub fn for_stderr() -> Self {
        WaitLines(Progress::for_stderr())
    }

    pub fn on(&self, event: &WaitEvent<'_>) {
        let Some(shown) = line(self.0, event) else {
            return;
        };
        let mut err = std::io::stderr().lock();
        let _ = if shown.newline {
            writeln!(err, "{}", shown.text)
        } else {
            write!(err, "{}", shown.text).and_then(|_| err.flush())
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::predicates::{Field, Target};
    use std::time::Duration;

    fn unmet() -> Vec<Unmet> {
        vec![Unmet {
            what: Field::ReadyEndpoints,
            want: "1".into(),
            found: "0".into(),
        }]
    }

    fn flip() -> Flip {
        Flip {
            what: Field::Health,
            from: "Progressing".into(),
            to: "Degraded".into(),
            at_seconds: 21.34,
        }
    }

    #[test]
    fn a_log_gets_one_line_per_flip_and_the_end() {
        let u = unmet();
        let f = flip();
        let flipped = WaitEvent::Flipped {
            target: Target::Failed,
            flip: &f,
            unmet: &u,
        };
        assert_eq!(
            line(Progress::Lines, &flipped),
            Some(Shown {
                text:
                    "wait failed: health Progressing -> Degraded at +21.3s; unmet: ready_endpoints"
                        .into(),
                newline: true
            })
        );
        let still = WaitEvent::Unmet {
            target: Target::Failed,
            elapsed: Duration::from_millis(1500),
            unmet: &u,
        };
        assert_eq!(line(Progress::Lines, &still), None);
        let reached = WaitEvent::Reached {
            target: Target::Healthy,
            elapsed: Duration::from_millis(2345),
            events: 7,
            probes: 3,
        };
        assert_eq!(
            line(Progress::Lines, &reached).unwrap().text,
            "wait healthy: reached after 2.3s (7 watch events, 3 probes)"
        );
    }

    #[test]
    fn a_terminal_gets_one_updating_line_cleared_at_the_end() {
        let u = unmet();
        let still = WaitEvent::Unmet {
            target: Target::Healthy,
            elapsed: Duration::from_millis(1500),
            unmet: &u,
        };
        assert_eq!(
            line(Progress::Terminal, &still),
            Some(Shown {
                text: "\r\x1b[2Kwait healthy   1.5s: unmet ready_endpoints".into(),
                newline: false
            })
        );
        let f = flip();
        let flipped = WaitEvent::Flipped {
            target: Target::Healthy,
            flip: &f,
            unmet: &[],
        };
        assert_eq!(line(Progress::Terminal, &flipped), None);
        let reached = WaitEvent::Reached {
            target: Target::Healthy,
            elapsed: Duration::from_secs(2),
            events: 1,
            probes: 1,
        };
        assert!(line(Progress::Terminal, &reached)
            .unwrap()
            .text
            .starts_with("\r\x1b[2Kwait healthy: reached after 2.0s"));
        let timed_out = WaitEvent::TimedOut {
            target: Target::Healthy,
        };
        assert_eq!(
            line(Progress::Terminal, &timed_out),
            Some(Shown {
                text: String::new(),
                newline: true
            })
        );
        assert_eq!(line(Progress::Lines, &timed_out), None);
    }

    #[test]
    fn quiet_shows_nothing() {
        let u = unmet();
        let f = flip();
        for e in [
            WaitEvent::Unmet {
                target: Target::Healthy,
                elapsed: Duration::ZERO,
                unmet: &u,
            },
            WaitEvent::Flipped {
                target: Target::Healthy,
                flip: &f,
                unmet: &u,
            },
            WaitEvent::Reached {
                target: Target::Healthy,
                elapsed: Duration::ZERO,
                events: 0,
                probes: 0,
            },
            WaitEvent::TimedOut {
                target: Target::Healthy,
            },
        ] {
            assert_eq!(line(Progress::Quiet, &e), None);
        }
    }
}
