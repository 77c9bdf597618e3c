//! Wrapper peeling: `sudo -u root CMD`, `env -S 'CMD'`, `xargs -I{} CMD {}`, `parallel CMD :::
//! ARGS` are read as the command they run, each wrapper's options read by its `hardline.json`
//! entry.

use super::{Ctx, Output, Redirect, State, Word, basename};
use crate::data::{Data, Wrapper};

/// An argv with its wrappers peeled.
pub(super) struct Peeled {
    /// The command the wrappers run (with the operands a wrapper feeds it from stdin).
    pub argv: Vec<Word>,
    /// The wrappers peeled, outermost first.
    pub wrappers: Vec<String>,
    /// The variables assigned for the command (`X=1 cmd`, `env X=1 cmd`).
    pub assigns: Vec<(String, String)>,
    /// A wrapper was given a flag its entry does not know.
    pub uncertain: bool,
}

/// What the options of one wrapper say (`sudo -u root`, `env -S 'cmd'`, `xargs -I{}`).
#[derive(Default)]
struct Scan {
    /// The index of the first word after the wrapper's own.
    end: usize,
    /// An option that makes the wrapper run nothing (`sudo -l`).
    no_command: bool,
    /// The string of a splitting option (`env -S 'cmd args'`).
    split_payload: Option<String>,
    /// The replace string (`xargs -I%`).
    replace: Option<String>,
    uncertain: bool,
    assigns: Vec<(String, String)>,
}

/// Reads a wrapper's own words (`argv[0]` is the wrapper).
fn scan(w: &Wrapper, argv: &[Word]) -> Scan {
    let mut s = Scan::default();
    let mut i = 1;
    let mut positionals = w.positionals;
    while i < argv.len() {
        let a = argv[i].text.as_str();
        if a == "--" {
            i += 1;
            break;
        }
        if w.assignments && is_assignment(a) {
            if let Some((n, v)) = a.split_once('=') {
                s.assigns.push((n.to_owned(), v.to_owned()));
            }
            i += 1;
            continue;
        }
        if a.starts_with('-') && a.len() > 1 {
            let (step, stop) = if a.starts_with("--") {
                long_option(w, argv, i, &mut s)
            } else {
                short_cluster(w, argv, i, &mut s)
            };
            i += step;
            if stop {
                break;
            }
            continue;
        }
        if positionals > 0 {
            positionals -= 1;
            i += 1;
            continue;
        }
        break;
    }
    s.end = i;
    s
}

/// A cluster of short options (`-iS'cmd'`, `-u user`, `-vS cmd`): how many words it takes, and
/// whether the wrapper's own words end with it.
fn short_cluster(w: &Wrapper, argv: &[Word], i: usize, s: &mut Scan) -> (usize, bool) {
    let a = argv[i].text.as_str();
    let has = |list: &[String], c: char| {
        list.iter()
            .any(|f| f.len() == 2 && f.ends_with(c) && f.starts_with('-'))
    };
    let next = || argv.get(i + 1).map(|w| w.text.clone());
    for (pos, c) in a.char_indices().skip(1) {
        let rest = &a[pos + c.len_utf8()..];
        if has(&w.no_command, c) {
            s.no_command = true;
            return (0, true);
        }
        if has(&w.split_options, c) {
            if rest.is_empty() {
                s.split_payload = next();
                return (2, true);
            }
            s.split_payload = Some(rest.to_owned());
            return (1, true);
        }
        if has(&w.replace_options, c) {
            let takes = has(&w.value_options, c);
            let (value, step) = if !rest.is_empty() {
                (rest.to_owned(), 1)
            } else if takes {
                (next().unwrap_or_default(), 2)
            } else {
                ("{}".to_owned(), 1)
            };
            s.replace = Some(value);
            return (step, false);
        }
        if has(&w.value_options, c) {
            return (if rest.is_empty() { 2 } else { 1 }, false);
        }
        if let Some(flags) = &w.flags
            && !has(flags, c)
        {
            s.uncertain = true;
        }
    }
    (1, false)
}

/// A long option (`--user=root`, `--split-string CMD`): how many words it takes, and whether
/// the wrapper's own words end with it.
fn long_option(w: &Wrapper, argv: &[Word], i: usize, s: &mut Scan) -> (usize, bool) {
    let a = argv[i].text.as_str();
    let (name, value) = match a.split_once('=') {
        Some((n, v)) => (n, Some(v)),
        None => (a, None),
    };
    let next = || argv.get(i + 1).map(|w| w.text.clone());
    if w.no_command.iter().any(|f| f == name) {
        s.no_command = true;
        return (0, true);
    }
    if w.split_options.iter().any(|f| f == name) {
        return match value {
            Some(v) => {
                s.split_payload = Some(v.to_owned());
                (1, true)
            }
            None => {
                s.split_payload = next();
                (2, true)
            }
        };
    }
    let takes = w.value_options.iter().any(|f| f == name);
    if w.replace_options.iter().any(|f| f == name) {
        s.replace = Some(match value {
            Some(v) => v.to_owned(),
            None if takes => next().unwrap_or_default(),
            None => "{}".to_owned(),
        });
    }
    if !takes
        && let Some(flags) = &w.flags
        && !flags.iter().any(|f| f == name)
    {
        s.uncertain = true;
    }
    (if takes && value.is_none() { 2 } else { 1 }, false)
}

impl<'a> Ctx<'a> {
    /// Peels the wrappers off an argv, reading the commands they run on the way.
    pub(super) fn peel(
        &mut self,
        mut argv: Vec<Word>,
        redirects: &[Redirect],
        st: &State,
        stdin: Option<&Output>,
        mut wrappers: Vec<String>,
        mut assigns: Vec<(String, String)>,
    ) -> Peeled {
        let data: &'a Data = self.data;
        let mut stdin_words: Vec<Word> = Vec::new();
        let mut uncertain = false;
        while let Some(first) = argv.first() {
            if first.dynamic && first.text.is_empty() {
                argv.remove(0);
                continue;
            }
            let base = basename(&first.text).to_owned();
            if first.dynamic {
                break;
            }
            let Some(w) = data.wrapper(&base) else {
                break;
            };
            let scan = scan(w, &argv);
            assigns.extend(scan.assigns);
            uncertain |= scan.uncertain;
            if scan.no_command {
                break;
            }
            wrappers.push(base.clone());
            let mut rest: Vec<Word> = argv.split_off(scan.end.min(argv.len()));
            let replace = scan.replace.as_deref();
            self.wrapped_payload(w, scan.split_payload, replace, &mut rest, stdin, st);
            if w.stdin_operands && !w.joins {
                stdin_words =
                    self.fed_operands(&mut rest, replace, redirects, st, stdin, &wrappers);
            }
            if rest.is_empty() {
                // The wrapper alone (`env`, `nohup`): the wrapper itself is the command.
                argv = vec![Word {
                    text: base,
                    ..Word::default()
                }];
                wrappers.pop();
                break;
            }
            argv = rest;
        }
        argv.extend(stdin_words);
        Peeled {
            argv,
            wrappers,
            assigns,
            uncertain,
        }
    }

    /// What a wrapper runs as a string (`env -S`, `parallel`, `watch`-like joins): read here,
    /// leaving `rest` empty.
    fn wrapped_payload(
        &mut self,
        w: &Wrapper,
        split_payload: Option<String>,
        replace: Option<&str>,
        rest: &mut Vec<Word>,
        stdin: Option<&Output>,
        st: &State,
    ) {
        if let Some(payload) = split_payload {
            // `env -S` splits its string much as a shell does: read it as one
            let mut joined = payload;
            for r in rest.iter() {
                joined.push(' ');
                joined.push_str(&shell_quote(&r.text));
            }
            let mut inner = st.clone();
            inner.depth += 1;
            self.script(&joined, &mut inner);
            rest.clear();
        }
        if w.joins && w.stdin_operands && !rest.is_empty() {
            // `parallel CMD ::: ARGS` (or ARGS from stdin): each ARG goes into CMD
            self.parallel(rest, replace, stdin, st);
            rest.clear();
        }
        if w.joins && !rest.is_empty() {
            let joined = rest
                .iter()
                .map(|w| w.text.clone())
                .collect::<Vec<_>>()
                .join(" ");
            let mut inner = st.clone();
            inner.depth += 1;
            self.script(&joined, &mut inner);
            rest.clear();
        }
    }

    /// The operands a wrapper fed by stdin gives its command (`xargs`); with a replace string
    /// (`xargs -I% rm -f %`) every operand goes where it stands, each its own command.
    fn fed_operands(
        &mut self,
        rest: &mut Vec<Word>,
        replace: Option<&str>,
        redirects: &[Redirect],
        st: &State,
        stdin: Option<&Output>,
        wrappers: &[String],
    ) -> Vec<Word> {
        if rest.is_empty() {
            rest.push(Word {
                text: "echo".into(),
                ..Word::default()
            });
        }
        let mut stdin_words = stdin_operand_words(stdin);
        if let Some(r) = replace.filter(|r| !r.is_empty())
            && rest.iter().any(|x| x.text.contains(r))
        {
            let mut variants: Vec<Vec<Word>> = stdin_words
                .iter()
                .map(|sw| {
                    rest.iter()
                        .map(|x| {
                            if x.text.contains(r) {
                                Word {
                                    text: x.text.replace(r, &sw.text),
                                    dynamic: true,
                                    glob: x.glob || sw.glob,
                                    ..x.clone()
                                }
                            } else {
                                x.clone()
                            }
                        })
                        .collect()
                })
                .collect();
            stdin_words.clear();
            if let Some(last) = variants.pop() {
                for v in variants {
                    let mut tmp = st.clone();
                    tmp.depth += 1;
                    self.simple(v, redirects.to_vec(), &mut tmp, None, wrappers.to_vec());
                }
                *rest = last;
            }
        }
        stdin_words
    }
}

impl<'a> Ctx<'a> {
    /// `parallel CMD ::: ARGS`, `... | parallel CMD`: CMD with each ARG put in (or appended).
    pub(super) fn parallel(
        &mut self,
        rest: &[Word],
        replace: Option<&str>,
        stdin: Option<&Output>,
        st: &State,
    ) {
        let sep = rest.iter().position(|w| w.text.starts_with(":::"));
        let (cmd, operands) = match sep {
            Some(p) if rest[p].text.starts_with("::::") => (&rest[..p], stdin_operand_words(None)),
            Some(p) => (
                &rest[..p],
                rest[p + 1..]
                    .iter()
                    .filter(|w| !w.text.starts_with(":::"))
                    .cloned()
                    .collect(),
            ),
            None => (rest, stdin_operand_words(stdin)),
        };
        let text = cmd
            .iter()
            .map(|w| w.text.clone())
            .collect::<Vec<_>>()
            .join(" ");
        let r = replace.filter(|r| !r.is_empty()).unwrap_or("{}");
        let marks = [r, "{.}", "{/}", "{//}", "{/.}"];
        for op in operands.iter().take(64) {
            let word = script_word(op);
            let line = if cmd.is_empty() {
                op.text.clone()
            } else if marks.iter().any(|m| text.contains(m)) {
                marks.iter().fold(text.clone(), |t, m| t.replace(m, &word))
            } else {
                format!("{text} {word}")
            };
            let mut inner = st.clone();
            inner.depth += 1;
            self.script(&line, &mut inner);
        }
    }
}

/// The words a command fed by stdin gets (xargs, parallel): a literal's words, a listing's paths
/// (each start point and everything under it), or one word known only when it runs.
pub(super) fn stdin_operand_words(stdin: Option<&Output>) -> Vec<Word> {
    match stdin {
        Some(Output::Literal(t)) => t
            .split_whitespace()
            .map(|x| Word {
                text: x.to_owned(),
                ..Word::default()
            })
            .collect(),
        Some(Output::Listing(paths)) => listing_words(paths),
        _ => vec![Word {
            text: "$STDIN".into(),
            dynamic: true,
            ..Word::default()
        }],
    }
}

/// A listing's paths as words: `S` and `S/*` for each start point.
pub(super) fn listing_words(paths: &[String]) -> Vec<Word> {
    paths
        .iter()
        .flat_map(|p| {
            [
                Word {
                    text: p.clone(),
                    dynamic: true,
                    ..Word::default()
                },
                Word {
                    text: format!("{}/*", p.trim_end_matches('/')),
                    dynamic: true,
                    glob: true,
                    ..Word::default()
                },
            ]
        })
        .collect()
}

/// A word put back into a command line: a pattern or an unknown stays as it is, text is quoted.
pub(super) fn script_word(w: &Word) -> String {
    if w.glob || (w.dynamic && w.text.starts_with('$')) {
        w.text.clone()
    } else {
        shell_quote(&w.text)
    }
}

pub(super) fn shell_quote(t: &str) -> String {
    format!("'{}'", t.replace('\'', "'\\''"))
}

pub(super) fn is_assignment(a: &str) -> bool {
    match a.split_once('=') {
        Some((n, _)) => {
            !n.is_empty()
                && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !n.starts_with(|c: char| c.is_ascii_digit())
        }
        None => false,
    }
}
