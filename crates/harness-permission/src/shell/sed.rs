//! sed's own commands: `e CMD` and `s///e` run commands, `w FILE` writes, `r FILE` reads.

use super::options::option_values;
use super::{Ctx, Part, Redirect, State, Word};

impl<'a> Ctx<'a> {
    /// sed's `e CMD` and `s///e` run commands; `w FILE` (and the `w` flag) write files, `r FILE`
    /// reads one.
    pub(super) fn sed(&mut self, part: &mut Part, args: &[Word], st: &State) {
        let mut scripts = option_values(args, &["-e".to_owned(), "--expression".to_owned()]);
        let from_file = args
            .iter()
            .any(|a| a.text == "-f" || a.text.starts_with("--file"));
        if scripts.is_empty()
            && !from_file
            && let Some(first) = args.iter().find(|a| !a.text.starts_with('-'))
        {
            scripts.push(first.text.clone());
        }
        for sc in scripts {
            let e = sed_effects(&sc);
            if e.pattern_space {
                part.inline_code = true;
                if !part.findings.contains(&"uncertain") {
                    part.findings.push("uncertain");
                }
            }
            for cmd in e.runs {
                self.extracted(part, &cmd, st);
            }
            for (file, write) in e
                .writes
                .into_iter()
                .map(|f| (f, true))
                .chain(e.reads.into_iter().map(|f| (f, false)))
            {
                part.redirects.push(Redirect {
                    target: Word {
                        text: file,
                        ..Word::default()
                    },
                    write,
                });
            }
        }
    }
}

/// What a sed script does beyond editing its stream.
#[derive(Debug, Default)]
pub(super) struct SedEffects {
    /// Commands it runs (`e CMD`; an `s///e` replacement, the likely command).
    runs: Vec<String>,
    /// It runs its pattern space (`e` alone, the `e` flag): a command known only when it runs.
    pattern_space: bool,
    writes: Vec<String>,
    reads: Vec<String>,
}

/// The index just past the closing `delim` of a sed regex or replacement starting at `from`.
pub(super) fn sed_delimited(c: &[char], from: usize, delim: char) -> usize {
    let mut j = from;
    while j < c.len() {
        if c[j] == '\\' {
            j += 2;
            continue;
        }
        if c[j] == delim {
            return j + 1;
        }
        j += 1;
    }
    c.len()
}

/// Reads a sed script's commands for the ones that run, write or read.
pub(super) fn sed_effects(script: &str) -> SedEffects {
    let c: Vec<char> = script.chars().collect();
    let mut e = SedEffects::default();
    let to_eol = |from: usize| -> (String, usize) {
        let mut j = from.min(c.len());
        while j < c.len() && c[j] != '\n' {
            j += 1;
        }
        (c[from.min(j)..j].iter().collect(), j)
    };
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch.is_whitespace() || matches!(ch, ';' | '{' | '}' | '!' | ',' | '$' | '~' | '+') {
            i += 1;
            continue;
        }
        if ch.is_ascii_digit() {
            i += 1;
            continue;
        }
        if ch == '/' || ch == '\\' {
            // an address: /re/ or \cREc, then its I and M flags
            let (delim, from) = if ch == '/' {
                ('/', i + 1)
            } else {
                (c.get(i + 1).copied().unwrap_or('/'), i + 2)
            };
            i = sed_delimited(&c, from, delim);
            while i < c.len() && matches!(c[i], 'I' | 'M') {
                i += 1;
            }
            continue;
        }
        i += 1;
        match ch {
            '#' | 'a' | 'i' | 'c' => loop {
                let (line, j) = to_eol(i);
                i = j + 1;
                if !line.ends_with('\\') || i >= c.len() {
                    break;
                }
            },
            ':' | 'b' | 't' | 'T' | 'v' => {
                while i < c.len() && c[i] != ';' && c[i] != '\n' {
                    i += 1;
                }
            }
            'r' | 'R' | 'w' | 'W' => {
                let (file, j) = to_eol(i);
                i = j;
                let file = file.trim().to_owned();
                if !file.is_empty() {
                    if matches!(ch, 'w' | 'W') {
                        e.writes.push(file);
                    } else {
                        e.reads.push(file);
                    }
                }
            }
            'e' => {
                let (cmd, j) = to_eol(i);
                i = j;
                let cmd = cmd.trim();
                if cmd.is_empty() {
                    e.pattern_space = true;
                } else {
                    e.runs.push(cmd.to_owned());
                }
            }
            's' | 'y' => {
                let Some(&delim) = c.get(i) else { break };
                let re_end = sed_delimited(&c, i + 1, delim);
                let rep_end = sed_delimited(&c, re_end, delim);
                let replacement: String = c
                    [re_end.min(c.len())..rep_end.saturating_sub(1).max(re_end).min(c.len())]
                    .iter()
                    .collect();
                i = rep_end;
                if ch == 'y' {
                    continue;
                }
                while i < c.len() {
                    match c[i] {
                        'e' => {
                            e.pattern_space = true;
                            e.runs.push(
                                replacement.replace(&format!("\\{delim}"), &delim.to_string()),
                            );
                            i += 1;
                        }
                        'w' => {
                            let (file, j) = to_eol(i + 1);
                            i = j;
                            let file = file.trim().to_owned();
                            if !file.is_empty() {
                                e.writes.push(file);
                            }
                        }
                        'g' | 'p' | 'i' | 'I' | 'm' | 'M' | '0'..='9' => i += 1,
                        _ => break,
                    }
                }
            }
            _ => {}
        }
    }
    e
}
