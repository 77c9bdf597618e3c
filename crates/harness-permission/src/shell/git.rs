//! git's settings and options that are commands (`-c core.pager=CMD`, `fetch --upload-pack`,
//! `bisect run CMD`).

use super::options::option_values;
use super::{Ctx, Part, State, Word};
use crate::data::Data;

impl<'a> Ctx<'a> {
    /// `git -c KEY=VALUE` where the value is a command (a pager, an editor, an alias `!cmd`).
    pub(super) fn git_config(&mut self, part: &mut Part, args: &[Word], st: &State) {
        let mut j = 0;
        while j < args.len() {
            let a = args[j].text.as_str();
            let kv = if a == "-c" {
                j += 1;
                args.get(j).map(|w| w.text.clone())
            } else {
                a.strip_prefix("-c").map(str::to_owned)
            };
            // `--config-env=KEY=VAR`: the value is a variable's, known only when it runs
            let env_kv = if a == "--config-env" {
                args.get(j + 1).map(|w| w.text.as_str())
            } else {
                a.strip_prefix("--config-env=")
            };
            if let Some((k, _)) = env_kv.and_then(|kv| kv.split_once('='))
                && self.data.git_config_commands.is_match(k)
                && !part.findings.contains(&"uncertain")
            {
                part.findings.push("uncertain");
            }
            if let Some(kv) = kv
                && let Some((k, v)) = kv.split_once('=')
                && (v.starts_with('!') || self.data.git_config_commands.is_match(k))
            {
                part.inline_code = true;
                let mut tmp = st.clone();
                tmp.depth += 1;
                self.script(v.trim_start_matches('!'), &mut tmp);
            }
            if !a.starts_with('-') {
                break;
            }
            if matches!(
                a,
                "-C" | "--git-dir" | "--work-tree" | "--namespace" | "--config-env"
            ) {
                j += 1;
            }
            j += 1;
        }
    }

    /// git options whose value is a command (`grep -O`, `fetch --upload-pack`, `rebase -x`)
    /// and subcommands that run the rest (`bisect run`).
    pub(super) fn git_commands(
        &mut self,
        part: &mut Part,
        args: &[Word],
        st: &State,
        wrappers: &[String],
    ) {
        let data: &'a Data = self.data;
        let texts: Vec<&str> = args.iter().map(|w| w.text.as_str()).collect();
        let Some((i, sub)) = git_sub(&texts) else {
            return;
        };
        let rest = &args[i + 1..];
        for entry in &data.git_command_options {
            for s in &entry.subcommands {
                let mut words = s.split(' ');
                if words.next() != Some(sub.as_str()) {
                    continue;
                }
                let more: Vec<&str> = words.collect();
                if rest.len() < more.len() || rest.iter().zip(&more).any(|(w, m)| w.text != *m) {
                    continue;
                }
                let after = &rest[more.len()..];
                if entry.rest {
                    if after.len() == 1 {
                        self.extracted(part, &after[0].text, st);
                    } else if !after.is_empty() {
                        part.inline_code = true;
                        let mut tmp = st.clone();
                        tmp.depth += 1;
                        let mut w = wrappers.to_vec();
                        w.push("git".into());
                        self.simple(after.to_vec(), Vec::new(), &mut tmp, None, w);
                    }
                    continue;
                }
                let mut values = option_values(after, &entry.options);
                for a in after {
                    if a.text == "--" {
                        break;
                    }
                    for o in &entry.attached {
                        let v = if o.starts_with("--") {
                            a.text
                                .strip_prefix(o.as_str())
                                .and_then(|r| r.strip_prefix('='))
                        } else {
                            a.text.strip_prefix(o.as_str()).filter(|r| !r.is_empty())
                        };
                        values.extend(v.map(str::to_owned));
                    }
                }
                for v in values {
                    self.extracted(part, &v, st);
                }
            }
        }
    }
}

/// The git subcommand of `texts` (git's arguments): its index and name, past the global
/// options (and the values of those that take one).
pub(crate) fn git_sub(texts: &[&str]) -> Option<(usize, String)> {
    let mut i = 0;
    while i < texts.len() {
        let t = texts[i];
        if matches!(
            t,
            "-C" | "-c"
                | "--git-dir"
                | "--work-tree"
                | "--namespace"
                | "--exec-path"
                | "--config-env"
        ) {
            i += 2;
            continue;
        }
        if t.starts_with('-') {
            i += 1;
            continue;
        }
        return Some((i, t.to_owned()));
    }
    None
}
