//! The floor and caution rules matched against the parts of a command, and the protected paths.

use crate::data::{Action, Compiled, Data, FloorRule};
use crate::paths;
use crate::shell::{Part, Word, git_sub, operands};

/// Where a request runs: what `~` and the workspace are.
pub(crate) struct Place<'a> {
    pub home: &'a str,
    pub workspace: &'a str,
}

fn flag_present(args: &[Word], flags: &[String]) -> bool {
    for a in args {
        let t = a.text.as_str();
        if t == "--" {
            break;
        }
        if !t.starts_with('-') || t.len() < 2 {
            continue;
        }
        for f in flags {
            if f.starts_with("--") || f.len() > 2 {
                if t == f
                    || t.strip_prefix(f.as_str())
                        .is_some_and(|r| r.starts_with('='))
                {
                    return true;
                }
            } else if !t.starts_with("--") {
                let letter = &f[1..];
                if t[1..].contains(letter) && t[1..].chars().all(|c| c.is_ascii_alphanumeric()) {
                    return true;
                }
            }
        }
    }
    false
}

fn program_matches(list: &[String], program: &str) -> bool {
    list.iter().any(|p| crate::wildcard::matches(p, program))
}

impl Data {
    fn operand_pred(&self, pred: &str, w: &Word, part: &Part, place: &Place<'_>) -> bool {
        let resolved = paths::resolve(&part.cwd, &w.text);
        let reach = paths::reach(&resolved);
        let root = reach == "/";
        let mut home = reach == place.home;
        let mut system = self.system_dirs.contains(&reach);
        if w.glob && !w.quoted {
            // a pattern the shell expands: what could it name?
            home |= glob_match(&reach, place.home);
            system |= self.system_dirs.iter().any(|d| glob_match(&reach, d));
        }
        match pred {
            "root" => !w.text.is_empty() && root,
            "system_dir" => system,
            "home" => home,
            "raw_device" => self.raw_devices.is_match(&resolved),
            "sysrq" => resolved == "/proc/sysrq-trigger",
            "root_home_or_system" => root || home || system,
            "outside_or_workspace_or_dynamic" => {
                if w.dynamic
                    && (w.text.starts_with('$') || w.text.starts_with('`') || w.text.is_empty())
                {
                    return true;
                }
                let ws = place.workspace;
                let tmp = paths::inside(&reach, "/tmp") && reach != "/tmp"
                    || paths::inside(&reach, "/var/tmp") && reach != "/var/tmp";
                reach == ws || paths::inside(ws, &reach) || (!paths::inside(&reach, ws) && !tmp)
            }
            _ => false,
        }
    }

    fn condition(&self, c: &Compiled, rule: &FloorRule, part: &Part, place: &Place<'_>) -> bool {
        let args = part.args();
        match c {
            Compiled::Operand(p) => operands(args)
                .iter()
                .any(|w| self.operand_pred(p, w, part, place)),
            Compiled::Redirect(p) => {
                part.redirects
                    .iter()
                    .any(|r| r.write && self.operand_pred(p, &r.target, part, place))
                    || (program_matches(&rule.also_programs, &part.program)
                        && write_targets(part)
                            .iter()
                            .any(|w| self.operand_pred(p, w, part, place)))
            }
            Compiled::Flag(f) => flag_present(args, f),
            Compiled::Subcommand(s) => {
                // `eraseDisk`, or past the first word: `apfs deleteContainer`
                let ops = operands(args);
                s.iter().any(|sub| {
                    let n = sub.split(' ').count();
                    ops.len() >= n
                        && ops
                            .iter()
                            .take(n)
                            .map(|o| o.text.as_str())
                            .eq(sub.split(' '))
                })
            }
            Compiled::OnlyFlags(list) => args.iter().all(|a| {
                let t = a.text.as_str();
                if !t.starts_with('-') || t == "-" {
                    return true;
                }
                let name = t.split_once('=').map(|(n, _)| n).unwrap_or(t);
                if list.iter().any(|f| f == name) {
                    return true;
                }
                !t.starts_with("--")
                    && t[1..]
                        .chars()
                        .all(|c| list.iter().any(|f| f.len() == 2 && f.ends_with(c)))
            }),
            Compiled::LastArg(s) => {
                args.len() >= 2 && args.last().is_some_and(|w| s.contains(&w.text))
            }
            Compiled::ArgRegex(re) => args.iter().any(|w| re.is_match(&w.text)),
            Compiled::AnyWordRegex(re) => {
                part.argv.iter().any(|w| re.is_match(&w.text))
                    || part.redirects.iter().any(|r| re.is_match(&r.target.text))
            }
            Compiled::Finding(f) => {
                part.findings.iter().any(|x| x == f) || self.semantic(f, part, place)
            }
            Compiled::Not(inner) => !self.condition(inner, rule, part, place),
        }
    }

    fn semantic(&self, finding: &str, part: &Part, place: &Place<'_>) -> bool {
        let args = part.args();
        let texts: Vec<&str> = args.iter().map(|w| w.text.as_str()).collect();
        match finding {
            "privileged" => {
                // a carrier alone (`sudo -s`, `sudo -i`) is a privileged shell; `sudo -l` is not
                (self.privileged.contains(&part.program)
                    && !self
                        .wrapper(&part.program)
                        .is_some_and(|w| texts.iter().any(|t| w.no_command.iter().any(|f| f == t))))
                    || part.wrappers.iter().any(|w| self.privileged.contains(w))
            }
            "find_delete_system" => {
                part.program == "find"
                    && texts.contains(&"-delete")
                    && args
                        .iter()
                        .take_while(|a| !a.text.starts_with('-'))
                        .any(|w| self.operand_pred("root_home_or_system", w, part, place))
            }
            "git_destructive" => part.program == "git" && git_destructive(&texts),
            "infra_destroy" => infra_destroy(&part.program, &texts),
            _ => false,
        }
    }

    /// The floor (`deny`) or caution (`ask`) rules a part hits.
    pub(crate) fn hits<'d>(
        &'d self,
        rules: &'d [FloorRule],
        part: &Part,
        place: &Place<'_>,
    ) -> Vec<&'d FloorRule> {
        rules
            .iter()
            .filter(|r| {
                let prog_ok = if part.redirect_only {
                    r.programs.is_empty()
                } else {
                    r.programs.is_empty() || program_matches(&r.programs, &part.program)
                };
                prog_ok && r.when.iter().all(|c| self.condition(c, r, part, place))
            })
            .collect()
    }

    /// What the protected paths say about writing (or reading) an absolute path.
    pub(crate) fn protected(
        &self,
        path: &str,
        write: bool,
        place: &Place<'_>,
    ) -> Option<(Action, &str)> {
        let rel_abs = path.trim_start_matches('/');
        let rel_home = if paths::inside(path, place.home) && path != place.home {
            path.strip_prefix(place.home)
                .map(|r| r.trim_start_matches('/'))
        } else {
            None
        };
        let rel_ws = if paths::inside(path, place.workspace) && path != place.workspace {
            path.strip_prefix(place.workspace)
                .map(|r| r.trim_start_matches('/'))
        } else {
            None
        };
        let mut best: Option<(Action, &str)> = None;
        for p in &self.protected {
            let hit = p.absolute.is_match(rel_abs)
                || rel_home.is_some_and(|r| p.home.is_match(r))
                || rel_ws.is_some_and(|r| p.workspace.is_match(r));
            if !hit {
                continue;
            }
            let except = p.except_absolute.is_match(rel_abs)
                || rel_home.is_some_and(|r| p.except_home.is_match(r));
            if except {
                continue;
            }
            let action = if write { p.write } else { p.read };
            if action != Action::Allow && best.is_none_or(|(a, _)| action > a) {
                best = Some((action, p.reason.as_str()));
            }
        }
        best
    }
}

/// Whether a shell pattern (`*`, `?`, `[...]`) matches a whole text.
pub(crate) fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    fn go(p: &[char], t: &[char]) -> bool {
        match p.first() {
            None => t.is_empty(),
            Some('*') => (0..=t.len()).any(|i| go(&p[1..], &t[i..])),
            Some('?') => !t.is_empty() && go(&p[1..], &t[1..]),
            Some('[') => {
                let Some(end) = p.iter().skip(2).position(|c| *c == ']').map(|e| e + 2) else {
                    return !t.is_empty() && t[0] == '[' && go(&p[1..], &t[1..]);
                };
                let Some(c) = t.first() else { return false };
                let set = &p[1..end];
                let (neg, set) = match set.first() {
                    Some('!') | Some('^') => (true, &set[1..]),
                    _ => (false, set),
                };
                let mut hit = false;
                let mut i = 0;
                while i < set.len() {
                    if i + 2 < set.len() && set[i + 1] == '-' {
                        hit |= set[i] <= *c && *c <= set[i + 2];
                        i += 3;
                    } else {
                        hit |= set[i] == *c;
                        i += 1;
                    }
                }
                hit != neg && go(&p[end + 1..], &t[1..])
            }
            Some(c) => t.first() == Some(c) && go(&p[1..], &t[1..]),
        }
    }
    go(&p, &t)
}

/// The operands a command writes to (for protected paths and device checks).
pub(crate) fn write_targets(part: &Part) -> Vec<&Word> {
    let args = part.args();
    let ops = operands(args);
    match part.program.as_str() {
        "rm" | "rmdir" | "touch" | "mkdir" | "shred" | "tee" | "unlink" | "mv" | "truncate" => ops,
        "chmod" | "chown" | "chgrp" | "setfacl" => ops.into_iter().skip(1).collect(),
        // `ln TARGET` makes the link in the current directory: its one operand is only read
        "ln" if ops.len() == 1 => Vec::new(),
        "cp" | "install" | "ln" | "rsync" | "scp" => {
            if let Some(pos) = args
                .iter()
                .position(|a| a.text == "-t" || a.text == "--target-directory")
            {
                args.get(pos + 1).into_iter().collect()
            } else {
                ops.last().copied().into_iter().collect()
            }
        }
        "sed" | "perl" | "ruby"
            if args
                .iter()
                .any(|a| a.text.starts_with("-i") || a.text == "--in-place") =>
        {
            ops.into_iter().skip(1).collect()
        }
        "dd" => args.iter().filter(|a| a.text.starts_with("of=")).collect(),
        _ => Vec::new(),
    }
}

/// The text of a write target (dd's `of=` stripped).
pub(crate) fn target_text(w: &Word) -> &str {
    w.text.strip_prefix("of=").unwrap_or(&w.text)
}

fn git_destructive(texts: &[&str]) -> bool {
    let Some((i, sub)) = git_sub(texts) else {
        return false;
    };
    let rest = &texts[i + 1..];
    let has = |f: &str| rest.contains(&f);
    let short = |c: char| {
        rest.iter()
            .any(|t| t.starts_with('-') && !t.starts_with("--") && t.contains(c))
    };
    match sub.as_str() {
        "reset" => rest
            .iter()
            .any(|t| t.len() >= 3 && "--hard".starts_with(t) && t.starts_with("--h")),
        "push" => {
            short('f')
                || rest
                    .iter()
                    .any(|t| t.starts_with("--force") || *t == "--mirror" || *t == "--prune")
                || rest.iter().any(|t| t.starts_with('+') && t.len() > 1)
        }
        "clean" => short('f') || has("--force"),
        "branch" => {
            rest.contains(&"-D")
                || ((has("--delete") || short('d')) && (has("--force") || short('f')))
        }
        "stash" => rest.first().is_some_and(|t| *t == "clear"),
        "checkout" => {
            (has("--") || has(".")) && rest.iter().any(|t| *t == "." || *t == "*")
                || has("-f")
                || has("--force")
        }
        "restore" => rest.iter().any(|t| *t == "." || *t == "*"),
        "filter-branch" | "filter-repo" => true,
        "reflog" => rest
            .first()
            .is_some_and(|t| *t == "expire" || *t == "delete"),
        "update-ref" => has("-d"),
        _ => false,
    }
}

fn infra_destroy(program: &str, texts: &[&str]) -> bool {
    let ops: Vec<&str> = texts
        .iter()
        .filter(|t| !t.starts_with('-'))
        .copied()
        .collect();
    let first = ops.first().copied().unwrap_or("");
    match program {
        "terraform" | "tofu" => {
            first == "destroy" || (first == "apply" && texts.contains(&"-destroy"))
        }
        "kubectl" => first == "delete" || first == "drain",
        "helm" => first == "uninstall" || first == "delete",
        "gh" => ops.len() >= 2 && ops[1] == "delete",
        "aws" => {
            (ops.len() >= 2
                && ops[0] == "s3"
                && (ops[1] == "rb" || (ops[1] == "rm" && texts.contains(&"--recursive"))))
                || ops
                    .get(1)
                    .is_some_and(|o| o.starts_with("delete-") || o.starts_with("terminate-"))
        }
        "docker" | "podman" => {
            (first == "system" && ops.get(1) == Some(&"prune"))
                || (first == "volume" && matches!(ops.get(1), Some(&"rm") | Some(&"prune")))
        }
        _ => false,
    }
}
