//! Reading a command as a shell reads it: tree-sitter-bash's tree, walked into the simple
//! commands that would run, with their words expanded as far as they are known, wrappers peeled
//! and payloads (`bash -c`, `eval`, heredocs fed to a shell, interpreter one-liners) read too.

mod git;
mod options;
mod programs;
mod sed;
mod words;
mod wrappers;

use std::cell::RefCell;
use std::collections::HashMap;

use tree_sitter::{Node, Parser};

use crate::data::Data;
use crate::paths;
pub(crate) use git::git_sub;
pub(crate) use options::{operands, option_values};
use programs::Kind;
pub(crate) use words::has_pattern;
use words::{has_glob, join_words, text};
use wrappers::Peeled;

/// One word of a command after expansion.
#[derive(Debug, Clone, Default)]
pub(crate) struct Word {
    /// The plain text (an unknown expansion keeps its source text).
    pub text: String,
    /// Known only when it runs (a variable, a substitution).
    pub dynamic: bool,
    /// Any part of it was quoted.
    pub quoted: bool,
    /// It holds the output of a download.
    pub fetched: bool,
    /// It holds an unquoted glob (`*`, `?`, `[...]`) or a brace it could not expand.
    pub glob: bool,
    /// It holds a transformation of text known only when it runs (`${x@E}`, `${x@A}`).
    pub transform: bool,
}

/// A redirection of a command.
#[derive(Debug, Clone)]
pub(crate) struct Redirect {
    pub target: Word,
    pub write: bool,
}

/// One simple command that would run.
#[derive(Debug, Clone, Default)]
pub(crate) struct Part {
    pub argv: Vec<Word>,
    pub program: String,
    pub path_qualified: bool,
    pub wrappers: Vec<String>,
    pub dynamic_program: bool,
    pub dynamic: bool,
    pub inline_code: bool,
    pub redirects: Vec<Redirect>,
    pub cwd: String,
    pub findings: Vec<&'static str>,
    /// Output redirect targets only (no command), e.g. `{ ...; } > f`.
    pub redirect_only: bool,
    /// The names of the variables assigned for this command (`X=1 cmd`, `env X=1 cmd`).
    pub assigns: Vec<String>,
}

impl Part {
    pub(crate) fn text(&self) -> String {
        let mut s = String::new();
        for (i, w) in self.argv.iter().enumerate() {
            if i > 0 {
                s.push(' ');
            }
            s.push_str(&w.text);
        }
        s
    }
    pub(crate) fn args(&self) -> &[Word] {
        self.argv.get(1..).unwrap_or(&[])
    }
}

/// What a command of a pipeline writes to the next one.
#[derive(Debug, Clone, PartialEq)]
enum Output {
    Literal(String),
    Fetched,
    /// Paths under these start points (`find /`): each start point and everything under it.
    Listing(Vec<String>),
    Unknown,
}

/// The commands a text would run.
#[derive(Debug, Default)]
pub(crate) struct Analysis {
    pub parts: Vec<Part>,
    pub unparseable: bool,
    pub too_big: bool,
}

thread_local! {
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

fn parse(text: &str) -> Option<tree_sitter::Tree> {
    PARSER.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            let mut p = Parser::new();
            p.set_language(&tree_sitter_bash::LANGUAGE.into()).ok()?;
            *slot = Some(p);
        }
        slot.as_mut()?.parse(text, None)
    })
}

struct Ctx<'a> {
    data: &'a Data,
    home: &'a str,
    workspace: &'a str,
    out: Analysis,
}

#[derive(Clone)]
struct State {
    cwd: String,
    vars: HashMap<String, String>,
    depth: usize,
}

/// Reads `text` (run in `cwd`) into the commands it would run.
pub(crate) fn analyse(data: &Data, text: &str, cwd: &str, home: &str, workspace: &str) -> Analysis {
    let mut ctx = Ctx {
        data,
        home,
        workspace,
        out: Analysis::default(),
    };
    if text.chars().count() > data.limits.max_chars {
        ctx.out.too_big = true;
        return ctx.out;
    }
    let mut st = State {
        cwd: cwd.to_owned(),
        vars: HashMap::new(),
        depth: 0,
    };
    ctx.script(text, &mut st);
    ctx.out
}

/// What a carriage return is read as: a character of the word it is in, as bash reads it.
const CR_MARK: &str = "\u{240d}";

impl<'a> Ctx<'a> {
    fn script(&mut self, text: &str, st: &mut State) {
        if st.depth > self.data.limits.max_depth {
            self.out.too_big = true;
            return;
        }
        // bash splits words on blanks and newlines only: a carriage return is part of a word
        let owned;
        let text = if text.contains('\r') {
            owned = text.replace('\r', CR_MARK);
            owned.as_str()
        } else {
            text
        };
        let Some(tree) = parse(text) else {
            self.out.unparseable = true;
            return;
        };
        let root = tree.root_node();
        if root.has_error() {
            self.out.unparseable = true;
        }
        self.walk(root, text.as_bytes(), st, None);
    }

    fn push(&mut self, part: Part) {
        if self.out.parts.len() >= self.data.limits.max_parts {
            self.out.too_big = true;
            return;
        }
        self.out.parts.push(part);
    }

    fn walk(
        &mut self,
        node: Node<'_>,
        src: &[u8],
        st: &mut State,
        stdin: Option<&Output>,
    ) -> Output {
        if self.out.too_big {
            return Output::Unknown;
        }
        if node.is_error() || node.is_missing() {
            self.out.unparseable = true;
        }
        match node.kind() {
            "comment" => Output::Unknown,
            "command" => self.command(node, src, st, Vec::new(), stdin),
            "redirected_statement" => self.redirected(node, src, st, stdin),
            "pipeline" => {
                let mut prev: Option<Output> = None;
                let mut c = node.walk();
                let kids: Vec<Node<'_>> = node.named_children(&mut c).collect();
                let mut last = Output::Unknown;
                for (i, k) in kids.iter().enumerate() {
                    let input = if i == 0 { stdin.cloned() } else { prev.clone() };
                    last = self.walk(*k, src, st, input.as_ref());
                    prev = Some(last.clone());
                }
                last
            }
            "subshell" => {
                let mut inner = st.clone();
                self.children(node, src, &mut inner);
                Output::Unknown
            }
            "function_definition" => {
                self.function(node, src, st);
                Output::Unknown
            }
            "variable_assignment" => {
                self.assignment(node, src, st);
                Output::Unknown
            }
            "declaration_command" => {
                let mut c = node.walk();
                for k in node.named_children(&mut c) {
                    if k.kind() == "variable_assignment" {
                        self.assignment(k, src, st);
                    } else {
                        let _ = self.word(k, src, st);
                    }
                }
                Output::Unknown
            }
            "command_substitution" | "process_substitution" => {
                let mut inner = st.clone();
                inner.depth += 1;
                self.children(node, src, &mut inner);
                Output::Unknown
            }
            _ => {
                self.children(node, src, st);
                Output::Unknown
            }
        }
    }

    fn children(&mut self, node: Node<'_>, src: &[u8], st: &mut State) {
        let mut c = node.walk();
        let kids: Vec<Node<'_>> = node.children(&mut c).collect();
        for k in kids {
            if k.is_error() || k.is_missing() {
                self.out.unparseable = true;
            }
            if k.is_named() {
                self.walk(k, src, st, None);
            }
        }
    }

    fn assignment(&mut self, node: Node<'_>, src: &[u8], st: &mut State) {
        let name = node
            .child_by_field_name("name")
            .map(|n| text(n, src).to_owned());
        let value = node
            .child_by_field_name("value")
            .map(|v| self.word(v, src, st));
        if let (Some(name), Some(words)) = (name, value) {
            let v: Vec<String> = words.into_iter().map(|w| w.text).collect();
            st.vars.insert(name, v.join(" "));
        } else if let Some(name) = node.child_by_field_name("name") {
            st.vars.insert(text(name, src).to_owned(), String::new());
        }
    }

    fn function(&mut self, node: Node<'_>, src: &[u8], st: &mut State) {
        let name = node
            .child_by_field_name("name")
            .map(|n| text(n, src).to_owned())
            .unwrap_or_default();
        let before = self.out.parts.len();
        let mut inner = st.clone();
        if let Some(body) = node.child_by_field_name("body") {
            self.walk(body, src, &mut inner, None);
            let forks = text(body, src).contains('|') || text(body, src).contains('&');
            let recursive = self.out.parts[before..].iter().any(|p| p.program == name);
            if recursive && forks {
                self.push(Part {
                    program: name.clone(),
                    argv: vec![Word {
                        text: name,
                        ..Word::default()
                    }],
                    cwd: st.cwd.clone(),
                    findings: vec!["fork_bomb"],
                    ..Part::default()
                });
            }
        }
    }

    fn redirected(
        &mut self,
        node: Node<'_>,
        src: &[u8],
        st: &mut State,
        stdin: Option<&Output>,
    ) -> Output {
        let mut redirects = Vec::new();
        let mut body: Option<Node<'_>> = None;
        let mut feed: Option<Output> = None;
        let mut c = node.walk();
        let kids: Vec<Node<'_>> = node.named_children(&mut c).collect();
        for k in kids {
            match k.kind() {
                "file_redirect" => {
                    if let Some(r) = self.file_redirect(k, src, st) {
                        redirects.push(r);
                    }
                }
                "heredoc_redirect" => {
                    let mut hc = k.walk();
                    let mut body_text = String::new();
                    let mut quoted = false;
                    let kids: Vec<Node<'_>> = k.named_children(&mut hc).collect();
                    let unquoted = !kids.iter().any(|h| {
                        h.kind() == "heredoc_start" && text(*h, src).contains(['\'', '"', '\\'])
                    });
                    for h in kids {
                        match h.kind() {
                            "heredoc_body" => {
                                if unquoted {
                                    self.heredoc_body(h, src, st);
                                }
                                body_text.push_str(text(h, src))
                            }
                            "heredoc_start" => {
                                let t = text(h, src);
                                quoted = t.contains('\'') || t.contains('"') || t.contains('\\');
                            }
                            _ => {
                                if h.kind() != "heredoc_end" {
                                    let mut inner = st.clone();
                                    self.walk(h, src, &mut inner, None);
                                }
                            }
                        }
                    }
                    let _ = quoted;
                    feed = Some(Output::Literal(body_text));
                }
                "herestring_redirect" => {
                    let mut hc = k.walk();
                    let words: Vec<Word> = k
                        .named_children(&mut hc)
                        .flat_map(|w| self.word(w, src, st))
                        .collect();
                    if words.iter().any(|w| w.fetched) {
                        feed = Some(Output::Fetched);
                    } else {
                        feed = Some(Output::Literal(
                            words
                                .into_iter()
                                .map(|w| w.text)
                                .collect::<Vec<_>>()
                                .join(" "),
                        ));
                    }
                }
                _ => {
                    if body.is_none() {
                        body = Some(k);
                    }
                }
            }
        }
        let input = feed.or_else(|| stdin.cloned());
        match body {
            Some(b) if b.kind() == "command" => self.command(b, src, st, redirects, input.as_ref()),
            Some(b) => {
                let out = self.walk(b, src, st, input.as_ref());
                if !redirects.is_empty() {
                    self.push(Part {
                        redirects,
                        cwd: st.cwd.clone(),
                        redirect_only: true,
                        ..Part::default()
                    });
                }
                out
            }
            None => {
                if !redirects.is_empty() {
                    self.push(Part {
                        redirects,
                        cwd: st.cwd.clone(),
                        redirect_only: true,
                        ..Part::default()
                    });
                }
                Output::Unknown
            }
        }
    }

    fn file_redirect(&mut self, node: Node<'_>, src: &[u8], st: &mut State) -> Option<Redirect> {
        let mut op = String::new();
        let mut target: Option<Word> = None;
        let mut c = node.walk();
        for k in node.children(&mut c) {
            if !k.is_named() {
                op.push_str(text(k, src));
            } else if k.kind() == "file_descriptor" {
                continue;
            } else if target.is_none() {
                let ws = self.word(k, src, st);
                target = Some(join_words(ws));
            }
        }
        let target = target?;
        if op.contains('&')
            && (target.text.chars().all(|c| c.is_ascii_digit()) || target.text == "-")
        {
            return None;
        }
        let write = op.contains('>');
        Some(Redirect { target, write })
    }

    fn command(
        &mut self,
        node: Node<'_>,
        src: &[u8],
        st: &mut State,
        mut redirects: Vec<Redirect>,
        stdin: Option<&Output>,
    ) -> Output {
        let mut argv: Vec<Word> = Vec::new();
        let mut env_assign = false;
        let mut assigns: Vec<(String, String)> = Vec::new();
        let mut feed: Option<Output> = None;
        let mut c = node.walk();
        let kids: Vec<Node<'_>> = node.children(&mut c).collect();
        for k in kids {
            if k.is_error() || k.is_missing() {
                self.out.unparseable = true;
            }
            if !k.is_named() {
                continue;
            }
            match k.kind() {
                "variable_assignment" => {
                    let mut tmp = st.clone();
                    self.assignment(k, src, &mut tmp);
                    env_assign = true;
                    if let Some(n) = k.child_by_field_name("name") {
                        let name = text(n, src).to_owned();
                        let value = tmp.vars.get(&name).cloned().unwrap_or_default();
                        assigns.push((name, value));
                    }
                }
                "file_redirect" => {
                    if let Some(r) = self.file_redirect(k, src, st) {
                        redirects.push(r);
                    }
                }
                "herestring_redirect" => {
                    let mut hc = k.walk();
                    let words: Vec<Word> = k
                        .named_children(&mut hc)
                        .flat_map(|w| self.word(w, src, st))
                        .collect();
                    feed = Some(if words.iter().any(|w| w.fetched) {
                        Output::Fetched
                    } else {
                        Output::Literal(
                            words
                                .into_iter()
                                .map(|w| w.text)
                                .collect::<Vec<_>>()
                                .join(" "),
                        )
                    });
                }
                "heredoc_redirect" => {
                    let mut hc = k.walk();
                    let kids: Vec<Node<'_>> = k.named_children(&mut hc).collect();
                    let unquoted = !kids.iter().any(|h| {
                        h.kind() == "heredoc_start" && text(*h, src).contains(['\'', '"', '\\'])
                    });
                    let mut body = String::new();
                    for h in kids.into_iter().filter(|h| h.kind() == "heredoc_body") {
                        if unquoted {
                            self.heredoc_body(h, src, st);
                        }
                        body.push_str(text(h, src));
                    }
                    feed = Some(Output::Literal(body));
                }
                "command_name" => {
                    let mut cc = k.walk();
                    for w in k.named_children(&mut cc) {
                        argv.extend(self.word(w, src, st));
                    }
                    // a pattern in the program's name (`r?`, `/usr/bin/[r]m`) is expanded
                    let raw = text(k, src);
                    if has_glob(raw)
                        && !raw.contains(['\'', '"'])
                        && let Some(first) = argv.first_mut()
                    {
                        first.glob = true;
                    }
                }
                "comment" => {}
                _ => argv.extend(self.word(k, src, st)),
            }
        }
        let _ = env_assign;
        if argv.is_empty() {
            if !redirects.is_empty() {
                self.push(Part {
                    redirects,
                    cwd: st.cwd.clone(),
                    redirect_only: true,
                    ..Part::default()
                });
            }
            return Output::Unknown;
        }
        let input = feed.or_else(|| stdin.cloned());
        self.simple_with(argv, redirects, st, input.as_ref(), Vec::new(), assigns)
    }

    fn simple(
        &mut self,
        argv: Vec<Word>,
        redirects: Vec<Redirect>,
        st: &mut State,
        stdin: Option<&Output>,
        wrappers: Vec<String>,
    ) -> Output {
        self.simple_with(argv, redirects, st, stdin, wrappers, Vec::new())
    }

    /// Reads the value of a variable that names a command (`GIT_PAGER`, `LESSOPEN`) as one.
    fn command_variable(&mut self, name: &str, value: &str, st: &State) -> bool {
        if !self
            .data
            .command_variables
            .iter()
            .any(|p| crate::wildcard::matches(p, name))
        {
            return false;
        }
        let v = value.trim_start_matches('|').trim_start_matches('!');
        if !v.trim().is_empty() {
            let mut inner = st.clone();
            inner.depth += 1;
            self.script(v, &mut inner);
        }
        true
    }

    /// Builds the part(s) for one argv: peels its wrappers (`wrappers.rs`), then reads what the
    /// program runs by the per-program table (`programs.rs`).
    fn simple_with(
        &mut self,
        argv: Vec<Word>,
        redirects: Vec<Redirect>,
        st: &mut State,
        stdin: Option<&Output>,
        wrappers: Vec<String>,
        assigns: Vec<(String, String)>,
    ) -> Output {
        let Peeled {
            argv,
            wrappers,
            assigns,
            uncertain,
        } = self.peel(argv, &redirects, st, stdin, wrappers, assigns);
        let Some(first) = argv.first().cloned() else {
            return Output::Unknown;
        };
        for (n, v) in &assigns {
            self.command_variable(n, v, st);
        }
        let program_text = first.text.clone();
        let program = basename(&program_text).to_owned();
        let mut part = Part {
            path_qualified: program_text.contains('/'),
            program: program.clone(),
            dynamic_program: first.dynamic,
            dynamic: argv.iter().any(|w| w.dynamic),
            wrappers: wrappers.clone(),
            redirects,
            cwd: st.cwd.clone(),
            argv,
            assigns: assigns.into_iter().map(|(n, _)| n).collect(),
            ..Part::default()
        };
        if uncertain {
            part.findings.push("uncertain");
        }
        let args: Vec<Word> = part.args().to_vec();
        let kind = Kind::of(self.data, &program, &args, part.dynamic);
        if kind == Kind::Multicall {
            return self.simple(args, part.redirects, st, stdin, wrappers);
        }
        let mut output = self.program(kind, &mut part, &args, st, stdin, &wrappers);
        self.option_payloads(&mut part, &args, st);
        if let Some(method) = self.data.listings.producers.get(&program) {
            output = Output::Listing(programs::listed(method, &args));
        } else if self.data.listings.filters.contains(&program)
            && let Some(Output::Listing(l)) = stdin
        {
            output = Output::Listing(l.clone());
        }
        if program == "git" {
            self.git_config(&mut part, &args, st);
            self.git_commands(&mut part, &args, st, &wrappers);
        }
        if program == "cd" && !part.dynamic {
            let target = args
                .iter()
                .find(|a| !a.text.starts_with('-'))
                .map(|a| a.text.clone());
            st.cwd = match target {
                Some(t) => paths::resolve(&st.cwd, &t),
                None => self.home.to_owned(),
            };
        }
        let _ = self.workspace;
        self.push(part);
        output
    }

    /// Reads a command found inside another one's text (an option's value, a pager's `!cmd`).
    /// Where the text is cut from something larger its edges are uncertain: a reading that fails
    /// is asked (finding `uncertain`) instead of refusing the whole command as unreadable.
    fn extracted(&mut self, part: &mut Part, text: &str, st: &State) {
        if self.extract(text, st) && !part.findings.contains(&"uncertain") {
            part.findings.push("uncertain");
        }
        part.inline_code = true;
    }

    /// Reads `text` one level down; whether it could not be read (the flag is not kept).
    fn extract(&mut self, text: &str, st: &State) -> bool {
        let before = self.out.unparseable;
        let mut inner = st.clone();
        inner.depth += 1;
        self.script(text, &mut inner);
        let bad = self.out.unparseable && !before;
        if bad {
            self.out.unparseable = false;
        }
        bad
    }

    /// A part standing for something a word does when it runs (`${x@P}`), with its finding.
    fn flag_part(&mut self, text: &str, st: &State, finding: &'static str) {
        self.push(Part {
            program: text.to_owned(),
            argv: vec![Word {
                text: text.to_owned(),
                ..Word::default()
            }],
            cwd: st.cwd.clone(),
            findings: vec![finding],
            ..Part::default()
        });
    }

    /// The substitutions and expansions in an unquoted heredoc's body run.
    fn heredoc_body(&mut self, body: Node<'_>, src: &[u8], st: &State) {
        let mut c = body.walk();
        let kids: Vec<Node<'_>> = body.named_children(&mut c).collect();
        for k in kids {
            if matches!(
                k.kind(),
                "expansion" | "simple_expansion" | "command_substitution"
            ) {
                let mut inner = st.clone();
                let _ = self.word(k, src, &mut inner);
            }
        }
    }

    /// Walks a substitution's commands; what the last one writes.
    fn substitution_output(&mut self, node: Node<'_>, src: &[u8], st: &mut State) -> Output {
        let mut c = node.walk();
        let kids: Vec<Node<'_>> = node.children(&mut c).collect();
        let mut last = Output::Unknown;
        for k in kids {
            if k.is_error() || k.is_missing() {
                self.out.unparseable = true;
            }
            if k.is_named() {
                last = self.walk(k, src, st, None);
            }
        }
        last
    }
}

/// The last path segment of a program word (`/usr/bin/rm` → `rm`).
pub(crate) fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}
