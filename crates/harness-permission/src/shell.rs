//! Reading a command as a shell reads it: tree-sitter-bash's tree, walked into the simple
//! commands that would run, with their words expanded as far as they are known, wrappers peeled
//! and payloads (`bash -c`, `eval`, heredocs fed to a shell, interpreter one-liners) read too.

use std::cell::RefCell;
use std::collections::HashMap;

use base64::Engine as _;
use tree_sitter::{Node, Parser};

use crate::data::Data;
use crate::normalise::decode_ansi_c;
use crate::paths;

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

const FETCHERS: &[&str] = &[
    "curl",
    "wget",
    "fetch",
    "http",
    "https",
    "aria2c",
    "lwp-request",
    "GET",
    "nc",
    "ncat",
    "xh",
];
const DECODERS: &[&str] = &[
    "base64", "base32", "base16", "xxd", "openssl", "tr", "rev", "gunzip", "zcat", "gzip", "bzip2",
    "xz", "uudecode", "perl", "python3", "python",
];

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

    /// Builds the part(s) for one argv: peels wrappers, follows payloads.
    fn simple_with(
        &mut self,
        mut argv: Vec<Word>,
        redirects: Vec<Redirect>,
        st: &mut State,
        stdin: Option<&Output>,
        mut wrappers: Vec<String>,
        mut assigns: Vec<(String, String)>,
    ) -> Output {
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
            let Some(w) = self.data.wrapper(&base) else {
                break;
            };
            let mut i = 1;
            let mut no_command = false;
            let mut split_payload: Option<String> = None;
            let mut positionals = w.positionals;
            let mut replace: Option<String> = None;
            while i < argv.len() {
                let a = argv[i].text.as_str();
                if a == "--" {
                    i += 1;
                    break;
                }
                if w.assignments && is_assignment(a) {
                    if let Some((n, v)) = a.split_once('=') {
                        assigns.push((n.to_owned(), v.to_owned()));
                    }
                    i += 1;
                    continue;
                }
                if a.starts_with('-') && a.len() > 1 && !a.starts_with("--") {
                    // a cluster of short options: `-iS'cmd'`, `-u user`, `-vS cmd`
                    let has = |list: &[String], c: char| {
                        list.iter()
                            .any(|f| f.len() == 2 && f.ends_with(c) && f.starts_with('-'))
                    };
                    let letters: Vec<(usize, char)> = a.char_indices().skip(1).collect();
                    let mut step = 1;
                    let mut stop = false;
                    for (pos, c) in letters {
                        let rest = &a[pos + c.len_utf8()..];
                        if has(&w.no_command, c) {
                            no_command = true;
                            stop = true;
                            break;
                        }
                        if has(&w.split_options, c) {
                            if rest.is_empty() {
                                split_payload = argv.get(i + 1).map(|w| w.text.clone());
                                step = 2;
                            } else {
                                split_payload = Some(rest.to_owned());
                            }
                            stop = true;
                            break;
                        }
                        if has(&w.replace_options, c) {
                            let takes = has(&w.value_options, c);
                            replace = Some(if !rest.is_empty() {
                                rest.to_owned()
                            } else if takes {
                                step = 2;
                                argv.get(i + 1).map(|w| w.text.clone()).unwrap_or_default()
                            } else {
                                "{}".to_owned()
                            });
                            break;
                        }
                        if has(&w.value_options, c) {
                            if rest.is_empty() {
                                step = 2;
                            }
                            break;
                        }
                        if let Some(flags) = &w.flags
                            && !has(flags, c)
                        {
                            uncertain = true;
                        }
                    }
                    if no_command {
                        break;
                    }
                    i += step;
                    if stop {
                        break;
                    }
                    continue;
                }
                if a.starts_with('-') && a.len() > 1 {
                    let (name, attached) = match a.split_once('=') {
                        Some((n, _)) => (n, true),
                        None => (a, false),
                    };
                    if w.no_command.iter().any(|f| f == name) {
                        no_command = true;
                        break;
                    }
                    if w.split_options.iter().any(|f| f == name) {
                        if attached {
                            split_payload = a.split_once('=').map(|(_, v)| v.to_owned());
                            i += 1;
                        } else {
                            split_payload = argv.get(i + 1).map(|w| w.text.clone());
                            i += 2;
                        }
                        break;
                    }
                    let takes = w.value_options.iter().any(|f| f == name);
                    if w.replace_options.iter().any(|f| f == name) {
                        replace = Some(match a.split_once('=') {
                            Some((_, v)) => v.to_owned(),
                            None if takes => {
                                argv.get(i + 1).map(|w| w.text.clone()).unwrap_or_default()
                            }
                            None => "{}".to_owned(),
                        });
                    }
                    if !takes
                        && let Some(flags) = &w.flags
                        && !flags.iter().any(|f| f == name)
                    {
                        uncertain = true;
                    }
                    i += if takes && !attached { 2 } else { 1 };
                    continue;
                }
                if positionals > 0 {
                    positionals -= 1;
                    i += 1;
                    continue;
                }
                break;
            }
            if no_command {
                break;
            }
            wrappers.push(base.clone());
            let mut rest: Vec<Word> = argv.split_off(i.min(argv.len()));
            if let Some(payload) = split_payload {
                // `env -S` splits its string much as a shell does: read it as one
                let mut joined = payload;
                for r in &rest {
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
                self.parallel(&rest, replace.as_deref(), stdin, st);
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
            if w.stdin_operands && !w.joins {
                if rest.is_empty() {
                    rest.push(Word {
                        text: "echo".into(),
                        ..Word::default()
                    });
                }
                stdin_words = stdin_operand_words(stdin);
                // `xargs -I% rm -f %`: every operand goes where the replace string is
                if let Some(r) = replace.as_deref().filter(|r| !r.is_empty())
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
                            self.simple(v, redirects.clone(), &mut tmp, None, wrappers.clone());
                        }
                        rest = last;
                    }
                }
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
        let mut inner = st.clone();
        inner.depth += 1;
        let mut output = Output::Unknown;
        let args: Vec<Word> = part.args().to_vec();
        // busybox / toybox multicall.
        if (program == "busybox" || program == "toybox") && !args.is_empty() {
            return self.simple(args, part.redirects, st, stdin, wrappers);
        }
        if self.data.shells.contains(&program) {
            let mut payload: Option<String> = None;
            let mut operand = false;
            let mut wants_c = false;
            let mut j = 0;
            while j < args.len() {
                let a = &args[j].text;
                if (a.starts_with('-') || a.starts_with('+'))
                    && !a.starts_with("--")
                    && !a.starts_with("++")
                    && a.len() > 1
                {
                    // options go on after `-c`: the command string is the first operand
                    if a.starts_with('-') && a[1..].contains('c') {
                        wants_c = true;
                    }
                    if a[1..].ends_with('o') || a[1..].ends_with('O') {
                        j += 1;
                    }
                } else if a == "--" || a == "-" {
                    j += 1;
                    if wants_c {
                        payload = args.get(j).map(|w| w.text.clone());
                        if args.get(j).is_some_and(|w| w.fetched) {
                            part.findings.push("fetch_to_shell");
                        }
                    } else if j < args.len() {
                        operand = true;
                    }
                    break;
                } else if a.starts_with("--") {
                    if matches!(a.as_str(), "--rcfile" | "--init-file") {
                        j += 1;
                    }
                } else if wants_c {
                    payload = Some(a.clone());
                    if args[j].fetched {
                        part.findings.push("fetch_to_shell");
                    }
                    break;
                } else {
                    operand = true;
                    if args[j].fetched {
                        part.findings.push("fetch_to_shell");
                    }
                    break;
                }
                j += 1;
            }
            if wants_c && payload.is_none() {
                part.findings.push("uncertain");
            }
            if let Some(p) = payload {
                part.inline_code = true;
                self.script(&p, &mut inner);
            } else if !operand {
                self.feed_stdin(&mut part, stdin, &mut inner, true);
            }
        } else if program == "eval" {
            part.inline_code = true;
            if args.iter().any(|w| w.fetched) {
                part.findings.push("fetch_to_shell");
            }
            let joined = args
                .iter()
                .map(|w| w.text.clone())
                .collect::<Vec<_>>()
                .join(" ");
            self.script(&joined, &mut inner);
        } else if program == "source" || program == "." {
            if args.iter().any(|w| w.fetched) {
                part.findings.push("fetch_to_shell");
            }
        } else if program == "su" || program == "runuser" {
            part.findings.push("privileged");
            let mut j = 0;
            let mut user_opt = false;
            while j < args.len() {
                let a = args[j].text.as_str();
                if a == "--" {
                    if user_opt && j + 1 < args.len() {
                        let mut w = wrappers.clone();
                        w.push(program.clone());
                        let rest = args[j + 1..].to_vec();
                        let mut tmp = st.clone();
                        tmp.depth += 1;
                        self.simple(rest, Vec::new(), &mut tmp, None, w);
                    }
                    break;
                }
                if let Some(v) = a
                    .strip_prefix("--command=")
                    .or(a.strip_prefix("--session-command="))
                {
                    part.inline_code = true;
                    self.script(v, &mut inner);
                } else if matches!(a, "--command" | "--session-command") {
                    part.inline_code = true;
                    if let Some(p) = args.get(j + 1) {
                        self.script(&p.text.clone(), &mut inner);
                    }
                    j += 1;
                } else if a.starts_with('-') && !a.starts_with("--") && a.len() > 1 {
                    for (pos, c) in a.char_indices().skip(1) {
                        let rest = &a[pos + 1..];
                        if matches!(c, 'c' | 's' | 'g' | 'G' | 'u' | 'w' | 'C') {
                            let value = if rest.is_empty() {
                                j += 1;
                                args.get(j).map(|w| w.text.clone())
                            } else {
                                Some(rest.to_owned())
                            };
                            if c == 'c' {
                                part.inline_code = true;
                                if let Some(v) = value {
                                    self.script(&v, &mut inner);
                                }
                            }
                            if c == 'u' {
                                user_opt = true;
                            }
                            break;
                        }
                    }
                } else if a.starts_with("--") {
                    if matches!(
                        a,
                        "--shell"
                            | "--group"
                            | "--supp-group"
                            | "--user"
                            | "--whitelist-environment"
                            | "--pty-size"
                    ) {
                        user_opt |= a == "--user";
                        j += 1;
                    }
                    user_opt |= a.starts_with("--user=");
                } else if user_opt {
                    // `runuser -u user cmd args`: the rest is the command
                    let mut w = wrappers.clone();
                    w.push(program.clone());
                    let rest = args[j..].to_vec();
                    let mut tmp = st.clone();
                    tmp.depth += 1;
                    self.simple(rest, Vec::new(), &mut tmp, None, w);
                    break;
                }
                j += 1;
            }
        } else if self.data.awk.programs.contains(&program) {
            self.awk(&mut part, &args, &mut inner);
        } else if program == "pkexec" || program == "run0" {
            part.findings.push("privileged");
            if !args.is_empty() {
                let mut tmp = st.clone();
                self.simple(
                    args.clone(),
                    Vec::new(),
                    &mut tmp,
                    None,
                    vec![program.clone()],
                );
            }
        } else if let Some(opts) = interpreter(self.data, &program) {
            let mut code: Option<String> = None;
            for (j, a) in args.iter().enumerate() {
                if opts.iter().any(|o| o == &a.text) {
                    code = args.get(j + 1).map(|w| w.text.clone());
                    break;
                }
                if let Some(o) = opts.iter().find(|o| {
                    o.len() == 2
                        && a.text.starts_with(o.as_str())
                        && a.text.len() > 2
                        && !a.text.starts_with("--")
                }) {
                    code = Some(a.text[o.len()..].to_owned());
                    break;
                }
                if !a.text.starts_with('-') {
                    break;
                }
            }
            if let Some(code) = code {
                part.inline_code = true;
                self.exec_calls(&code, &mut inner);
            } else if !args.iter().any(|a| !a.text.starts_with('-')) {
                self.feed_stdin(&mut part, stdin, &mut inner, false);
            }
        } else if program == "find" {
            self.find_exec(&part, st);
        } else if program == "script" {
            self.script_program(&mut part, &args, st, &wrappers);
        } else if (program == "echo" || program == "printf") && !part.dynamic {
            output = Output::Literal(echo_output(&program, &args));
        } else if FETCHERS.contains(&program.as_str()) {
            let to_file = args.iter().any(|a| {
                a.text == "-o"
                    || a.text == "--output"
                    || a.text.starts_with("--output=")
                    || (a.text == "-O" && program == "curl")
            });
            if program != "curl"
                || !to_file
                || args.iter().any(|a| a.text == "-O-" || a.text == "-")
            {
                output = Output::Fetched;
            }
        } else if DECODERS.contains(&program.as_str()) {
            output = match stdin {
                Some(Output::Literal(t))
                    if program == "base64"
                        && args
                            .iter()
                            .any(|a| matches!(a.text.as_str(), "-d" | "--decode" | "-D")) =>
                {
                    let clean: String = t.chars().filter(|c| !c.is_whitespace()).collect();
                    match base64::engine::general_purpose::STANDARD.decode(clean.as_bytes()) {
                        Ok(b) => Output::Literal(String::from_utf8_lossy(&b).into_owned()),
                        Err(_) => Output::Fetched,
                    }
                }
                Some(Output::Literal(_)) | Some(Output::Fetched) => Output::Fetched,
                _ if args
                    .iter()
                    .any(|a| matches!(a.text.as_str(), "-d" | "--decode" | "-D" | "-r")) =>
                {
                    Output::Fetched
                }
                _ => Output::Unknown,
            };
        } else if program == "cat" && args.is_empty() {
            output = stdin.cloned().unwrap_or(Output::Unknown);
        }
        if let Some(opts) = self.data.command_options.get(&program) {
            for v in command_option_values(&args, opts) {
                part.inline_code = true;
                let mut tmp = st.clone();
                tmp.depth += 1;
                self.script(&v, &mut tmp);
            }
        }
        if part.argv.iter().any(|w| w.transform) {
            part.inline_code = true;
        }
        self.program_commands(&mut part, &args, st);
        self.config_options(&mut part, &args, st);
        self.name_operands(&mut part, &args, st);
        if program == "sed" {
            self.sed(&mut part, &args, st);
        }
        if let Some(method) = self.data.listings.producers.get(&program) {
            output = Output::Listing(listed(method, &args));
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

    /// `script -c CMD` (util-linux) and `script FILE CMD...` (BSD) run a command.
    fn script_program(&mut self, part: &mut Part, args: &[Word], st: &State, wrappers: &[String]) {
        let opts = vec!["-c".to_owned(), "--command".to_owned()];
        let values = option_values(args, &opts);
        if !values.is_empty() {
            part.inline_code = true;
            for v in values {
                let mut tmp = st.clone();
                tmp.depth += 1;
                self.script(&v, &mut tmp);
            }
            return;
        }
        let ops: Vec<&Word> = args.iter().filter(|w| !w.text.starts_with('-')).collect();
        if ops.len() >= 2 {
            part.inline_code = true;
            let rest: Vec<Word> = ops[1..].iter().map(|w| (*w).clone()).collect();
            let mut w = wrappers.to_vec();
            w.push("script".into());
            let mut tmp = st.clone();
            tmp.depth += 1;
            self.simple(rest, Vec::new(), &mut tmp, None, w);
        }
    }

    /// awk's `system()`, `print | "cmd"`, `"cmd" | getline` and `print > "file"`.
    fn awk(&mut self, part: &mut Part, args: &[Word], inner: &mut State) {
        let awk = &self.data.awk;
        let mut code: Vec<String> = Vec::new();
        let mut j = 0;
        let mut from_file = false;
        while j < args.len() {
            let a = args[j].text.as_str();
            if a == "--" {
                j += 1;
                break;
            }
            if !a.starts_with('-') || a == "-" {
                break;
            }
            if let Some(o) = awk.program_options.iter().find(|o| a == *o) {
                let _ = o;
                if let Some(v) = args.get(j + 1) {
                    code.push(v.text.clone());
                }
                j += 2;
                from_file = true;
                continue;
            }
            if let Some(v) = awk
                .program_options
                .iter()
                .find_map(|o| a.strip_prefix(&format!("{o}=")))
            {
                code.push(v.to_owned());
                from_file = true;
                j += 1;
                continue;
            }
            let takes = awk.value_options.iter().any(|o| a == o);
            if matches!(a, "-f" | "--file" | "-E" | "--exec") || a.starts_with("--file=") {
                from_file = true;
            }
            j += if takes { 2 } else { 1 };
        }
        if !from_file && let Some(w) = args.get(j) {
            code.push(w.text.clone());
        }
        for c in code {
            let runs: Vec<String> = awk
                .runs
                .captures_iter(&c)
                .filter_map(|m| {
                    m.iter()
                        .skip(1)
                        .flatten()
                        .next()
                        .map(|x| x.as_str().to_owned())
                })
                .collect();
            let writes: Vec<String> = awk
                .writes
                .captures_iter(&c)
                .filter_map(|m| m.get(1).map(|x| x.as_str().to_owned()))
                .collect();
            let dynamic = awk.dynamic.is_match(&c);
            if !runs.is_empty() || dynamic {
                part.inline_code = true;
            }
            if dynamic {
                part.findings.push("uncertain");
            }
            for r in runs {
                let cmd = r.replace("\\\"", "\"").replace("\\\\", "\\");
                self.script(&cmd, inner);
            }
            for w in writes {
                part.redirects.push(Redirect {
                    target: Word {
                        text: w,
                        ..Word::default()
                    },
                    write: true,
                });
            }
        }
    }

    /// `git -c KEY=VALUE` where the value is a command (a pager, an editor, an alias `!cmd`).
    fn git_config(&mut self, part: &mut Part, args: &[Word], st: &State) {
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

    /// A program's own command language: a pager's `+!cmd`, an editor's `-c '!cmd'`.
    fn program_commands(&mut self, part: &mut Part, args: &[Word], st: &State) {
        let data: &'a Data = self.data;
        let Some(pc) = data.program_commands.get(&part.program) else {
            return;
        };
        let mut values: Vec<String> = Vec::new();
        if pc.plus {
            for a in args {
                if a.text == "--" {
                    break;
                }
                if let Some(v) = a.text.strip_prefix('+') {
                    values.push(v.strip_prefix('+').unwrap_or(v).to_owned());
                }
            }
        }
        values.extend(option_values(args, &pc.options));
        for v in values {
            let runs: Vec<String> = pc
                .escape
                .captures_iter(&v)
                .filter_map(|c| c.get(1).map(|m| m.as_str().trim().to_owned()))
                .filter(|t| !t.is_empty())
                .collect();
            for cmd in runs {
                self.extracted(part, &cmd, st);
            }
            if data.exec_calls.is_match(&v) {
                let before = self.out.unparseable;
                let mut inner = st.clone();
                inner.depth += 1;
                self.exec_calls(&v, &mut inner);
                if self.out.unparseable && !before {
                    self.out.unparseable = false;
                }
                part.inline_code = true;
            }
            if !pc.safe.is_match(&v) {
                part.inline_code = true;
                if !part.findings.contains(&"uncertain") {
                    part.findings.push("uncertain");
                }
            }
        }
    }

    /// `ssh -o ProxyCommand=CMD` and the like: settings that are commands.
    fn config_options(&mut self, part: &mut Part, args: &[Word], st: &State) {
        let data: &'a Data = self.data;
        let Some(co) = data.config_options.get(&part.program) else {
            return;
        };
        for v in option_values(args, &co.options) {
            let v = v.trim();
            let Some(at) = v.find(|c: char| c == '=' || c.is_whitespace()) else {
                continue;
            };
            let (key, rest) = v.split_at(at);
            let value = rest.trim_start_matches(|c: char| c == '=' || c.is_whitespace());
            if co.keys.is_match(key) && !value.is_empty() && !value.eq_ignore_ascii_case("none") {
                self.extracted(part, value, st);
            }
        }
    }

    /// Words bash evaluates as a name or arithmetic (`printf -v 'a[$(cmd)]'`, `read`, `unset`):
    /// a substitution in their text runs.
    fn name_operands(&mut self, part: &mut Part, args: &[Word], st: &State) {
        let data: &'a Data = self.data;
        let Some(opts) = data.name_operands.get(&part.program) else {
            return;
        };
        let texts: Vec<String> = if opts.is_empty() {
            args.iter()
                .filter(|w| !w.dynamic)
                .map(|w| w.text.clone())
                .collect()
        } else {
            option_values(args, opts)
        };
        for t in texts {
            if let Some(at) = t.find("$(").or_else(|| t.find('`')) {
                self.extracted(part, &format!(": {}", &t[at..]), st);
                if !part.findings.contains(&"expansion_runs") {
                    part.findings.push("expansion_runs");
                }
            }
        }
    }

    /// sed's `e CMD` and `s///e` run commands; `w FILE` (and the `w` flag) write files, `r FILE`
    /// reads one.
    fn sed(&mut self, part: &mut Part, args: &[Word], st: &State) {
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

    /// git options whose value is a command (`grep -O`, `fetch --upload-pack`, `rebase -x`)
    /// and subcommands that run the rest (`bisect run`).
    fn git_commands(&mut self, part: &mut Part, args: &[Word], st: &State, wrappers: &[String]) {
        let data: &'a Data = self.data;
        let texts: Vec<&str> = args.iter().map(|w| w.text.as_str()).collect();
        let Some((i, sub)) = crate::floor::git_sub(&texts) else {
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

    /// `parallel CMD ::: ARGS`, `... | parallel CMD`: CMD with each ARG put in (or appended).
    fn parallel(
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

    fn feed_stdin(
        &mut self,
        part: &mut Part,
        stdin: Option<&Output>,
        inner: &mut State,
        shell: bool,
    ) {
        match stdin {
            Some(Output::Literal(t)) => {
                if shell {
                    self.script(&t.clone(), inner);
                } else {
                    self.exec_calls(&t.clone(), inner);
                }
                part.inline_code = true;
            }
            Some(Output::Fetched) => part.findings.push("fetch_to_shell"),
            _ => {}
        }
    }

    fn exec_calls(&mut self, code: &str, inner: &mut State) {
        let found: Vec<String> = self
            .data
            .exec_calls
            .captures_iter(code)
            .filter_map(|c| {
                c.iter()
                    .skip(1)
                    .flatten()
                    .next()
                    .map(|m| m.as_str().to_owned())
            })
            .collect();
        let deletes: Vec<String> = self
            .data
            .delete_calls
            .captures_iter(code)
            .filter_map(|c| c.get(1).map(|m| m.as_str().to_owned()))
            .collect();
        for path in deletes {
            self.script(&format!("rm -rf '{}'", path.replace('\'', "")), inner);
        }
        for lit in found {
            let body = lit
                .strip_prefix("%x(")
                .map(|b| b.trim_end_matches(')'))
                .unwrap_or_else(|| lit.get(1..lit.len().saturating_sub(1)).unwrap_or(""));
            let unescaped = body
                .replace("\\\"", "\"")
                .replace("\\'", "'")
                .replace("\\\\", "\\");
            self.script(&unescaped, inner);
        }
    }

    fn find_exec(&mut self, part: &Part, st: &State) {
        let args = part.args();
        let starts: Vec<String> = args
            .iter()
            .take_while(|a| !a.text.starts_with('-') && a.text != "(" && a.text != "!")
            .map(|a| a.text.clone())
            .collect();
        let starts = if starts.is_empty() {
            vec![".".to_owned()]
        } else {
            starts
        };
        let mut j = 0;
        while j < args.len() {
            let a = args[j].text.as_str();
            if matches!(a, "-exec" | "-execdir" | "-ok" | "-okdir") {
                let mut inner_argv = Vec::new();
                j += 1;
                while j < args.len() && args[j].text != ";" && args[j].text != "+" {
                    inner_argv.push(args[j].clone());
                    j += 1;
                }
                for s in &starts {
                    let argv: Vec<Word> = inner_argv
                        .iter()
                        .map(|w| Word {
                            text: w.text.replace("{}", s),
                            ..w.clone()
                        })
                        .collect();
                    if !argv.is_empty() {
                        let mut tmp = st.clone();
                        tmp.depth += 1;
                        self.simple(argv, Vec::new(), &mut tmp, None, vec!["find".into()]);
                    }
                }
            }
            j += 1;
        }
    }

    /// Expands one word node into the words it becomes.
    fn word(&mut self, node: Node<'_>, src: &[u8], st: &mut State) -> Vec<Word> {
        let raw = text(node, src);
        if raw.contains('{') && raw.contains('}') && matches!(node.kind(), "word" | "concatenation")
        {
            let plain = !raw.contains(['\'', '"', '$', '`']);
            match brace_expand(raw, 64) {
                Some(alts) if plain => {
                    let mut out = Vec::new();
                    for a in alts {
                        let mut t = unescape_word(&a);
                        if t == "~" || t.starts_with("~/") {
                            t = format!("{}{}", self.home, &t[1..]);
                        }
                        out.push(Word {
                            glob: has_glob(&a),
                            text: t,
                            ..Word::default()
                        });
                    }
                    return out;
                }
                Some(_) => {
                    let mut frags = Vec::new();
                    self.frags(node, src, st, false, &mut frags);
                    let mut ws = assemble(frags);
                    for w in &mut ws {
                        w.glob = true;
                    }
                    return ws;
                }
                None => {}
            }
        }
        let mut frags = Vec::new();
        self.frags(node, src, st, false, &mut frags);
        assemble(frags)
    }

    fn frags(
        &mut self,
        node: Node<'_>,
        src: &[u8],
        st: &mut State,
        quoted: bool,
        out: &mut Vec<Frag>,
    ) {
        match node.kind() {
            "word" | "number" => {
                let raw = text(node, src);
                let mut t = unescape_word(raw);
                if !quoted && out.is_empty() && (t == "~" || t.starts_with("~/")) {
                    t = format!("{}{}", self.home, &t[1..]);
                }
                out.push(Frag {
                    glob: !quoted && has_glob(raw),
                    text: t,
                    ..Frag::default()
                });
            }
            "raw_string" => {
                let raw = text(node, src);
                let inner = raw.get(1..raw.len().saturating_sub(1)).unwrap_or("");
                out.push(Frag {
                    text: inner.to_owned(),
                    quoted: true,
                    ..Frag::default()
                });
            }
            "ansi_c_string" => {
                let raw = text(node, src);
                let inner = raw.get(2..raw.len().saturating_sub(1)).unwrap_or("");
                // a NUL is kept here and ends the word (`assemble`): the argument as execve gets
                // it; bash's own reading, the string ending there, is the plain spelling's
                out.push(Frag {
                    text: decode_ansi_c(inner),
                    quoted: true,
                    ..Frag::default()
                });
            }
            "string" | "translated_string" => {
                let start = node.start_byte();
                let end = node.end_byte();
                let open = if node.kind() == "translated_string" {
                    2
                } else {
                    1
                };
                let mut pos = start + open;
                out.push(Frag {
                    text: String::new(),
                    quoted: true,
                    ..Frag::default()
                });
                let mut c = node.walk();
                let kids: Vec<Node<'_>> = node.named_children(&mut c).collect();
                for k in kids {
                    if k.kind() == "string" {
                        self.frags(k, src, st, true, out);
                        pos = k.end_byte();
                        continue;
                    }
                    if k.start_byte() > pos {
                        out.push(Frag {
                            text: unescape_dq(slice(src, pos, k.start_byte())),
                            quoted: true,
                            ..Frag::default()
                        });
                    }
                    if k.kind() == "string_content" {
                        out.push(Frag {
                            text: unescape_dq(text(k, src)),
                            quoted: true,
                            ..Frag::default()
                        });
                    } else {
                        self.frags(k, src, st, true, out);
                    }
                    pos = k.end_byte();
                }
                if end > pos + 1 {
                    out.push(Frag {
                        text: unescape_dq(slice(src, pos, end - 1)),
                        quoted: true,
                        ..Frag::default()
                    });
                }
            }
            "concatenation" => {
                let mut c = node.walk();
                let kids: Vec<Node<'_>> = node.named_children(&mut c).collect();
                let before = out.len();
                for k in kids {
                    let mut sub = Vec::new();
                    self.frags(k, src, st, quoted, &mut sub);
                    if out.len() > before && k.kind() == "word" {
                        // a `~` only expands at the start of the whole word
                        if let Some(f) = sub.first_mut()
                            && f.text.starts_with(self.home)
                            && text(k, src).starts_with('~')
                        {
                            f.text = unescape_word(text(k, src));
                        }
                    }
                    out.extend(sub);
                }
            }
            "simple_expansion" | "expansion" => {
                let raw = text(node, src).to_owned();
                self.expansion(&raw, node, src, st, quoted, out);
            }
            "command_substitution" => {
                let before = self.out.parts.len();
                let mut inner = st.clone();
                inner.depth += 1;
                let output = self.substitution_output(node, src, &mut inner);
                if let Output::Listing(paths) = output
                    && !quoted
                {
                    // `rm -rf $(find /)`: the listed paths
                    let words = listing_words(&paths);
                    out.push(Frag {
                        text: words
                            .iter()
                            .map(|w| w.text.as_str())
                            .collect::<Vec<_>>()
                            .join(" "),
                        split: true,
                        dynamic: true,
                        ..Frag::default()
                    });
                    return;
                }
                let new = &self.out.parts[before..];
                let fetched = new.iter().any(|p| FETCHERS.contains(&p.program.as_str()));
                let literal = if new.len() == 1
                    && (new[0].program == "echo" || new[0].program == "printf")
                    && !new[0].dynamic
                {
                    Some(
                        echo_output(&new[0].program, new[0].args())
                            .trim_end_matches('\n')
                            .to_owned(),
                    )
                } else {
                    None
                };
                match literal {
                    Some(t) => out.push(Frag {
                        text: t,
                        split: !quoted,
                        dynamic: true,
                        quoted,
                        fetched,
                        glob: false,
                        transform: false,
                    }),
                    None => out.push(Frag {
                        text: text(node, src).to_owned(),
                        dynamic: true,
                        quoted,
                        fetched,
                        glob: false,
                        transform: false,
                        split: false,
                    }),
                }
            }
            "process_substitution" => {
                let before = self.out.parts.len();
                let mut inner = st.clone();
                inner.depth += 1;
                self.children(node, src, &mut inner);
                let fetched = self.out.parts[before..]
                    .iter()
                    .any(|p| FETCHERS.contains(&p.program.as_str()));
                out.push(Frag {
                    text: "/dev/fd/63".into(),
                    dynamic: true,
                    quoted,
                    fetched,
                    glob: false,
                    transform: false,
                    split: false,
                });
            }
            "arithmetic_expansion" | "brace_expression" => {
                let mut inner = st.clone();
                self.children(node, src, &mut inner);
                out.push(Frag {
                    text: text(node, src).to_owned(),
                    dynamic: node.kind() == "arithmetic_expansion",
                    quoted,
                    ..Frag::default()
                });
            }
            _ => {
                let mut inner = st.clone();
                self.children(node, src, &mut inner);
                out.push(Frag {
                    text: text(node, src).to_owned(),
                    quoted,
                    ..Frag::default()
                });
            }
        }
    }

    fn expansion(
        &mut self,
        raw: &str,
        node: Node<'_>,
        src: &[u8],
        st: &mut State,
        quoted: bool,
        out: &mut Vec<Frag>,
    ) {
        let data: &'a Data = self.data;
        let first = out.len();
        let before = self.out.parts.len();
        self.expansion_value(raw, node, src, st, quoted, out);
        if !raw.starts_with("${") {
            return;
        }
        if data.expansions.runs.is_match(raw) {
            // `${x@P}`, `${!x}`: the value is run as shell code
            self.flag_part(raw, st, "expansion_runs");
        } else if data.expansions.unknown.is_match(raw) {
            for f in &mut out[first..] {
                f.transform = true;
                f.dynamic = true;
            }
        }
        if self.out.parts.len() == before
            && let Some(at) = raw.find("$(").or_else(|| raw.find('`'))
        {
            // an operand kept as text (`${x#$(cmd)}`) still runs its substitution
            let cmd = format!(": {}", raw[at..].trim_end_matches('}'));
            if self.extract(&cmd, st) {
                self.flag_part(raw, st, "uncertain");
            }
        }
    }

    fn expansion_value(
        &mut self,
        raw: &str,
        node: Node<'_>,
        src: &[u8],
        st: &mut State,
        quoted: bool,
        out: &mut Vec<Frag>,
    ) {
        // walk substitutions nested in ${x:-$(...)}
        {
            let mut inner = st.clone();
            self.children(node, src, &mut inner);
        }
        let body = if let Some(b) = raw.strip_prefix("${").and_then(|b| b.strip_suffix('}')) {
            b
        } else {
            raw.strip_prefix('$').unwrap_or(raw)
        };
        let name_len = body
            .char_indices()
            .find(|(_, c)| !c.is_ascii_alphanumeric() && *c != '_')
            .map(|(i, _)| i)
            .unwrap_or(body.len());
        let (name, rest) = if name_len == 0 {
            body.split_at(body.len().min(1))
        } else {
            body.split_at(name_len)
        };
        if name == "IFS" {
            out.push(Frag {
                text: " ".into(),
                split: !quoted,
                dynamic: false,
                quoted,
                fetched: false,
                glob: false,
                transform: false,
            });
            return;
        }
        let known: Option<String> = match name {
            "HOME" => Some(self.home.to_owned()),
            "PWD" => Some(st.cwd.clone()),
            _ => st.vars.get(name).cloned(),
        };
        let alt: Option<String> = if let Some(d) = rest
            .strip_prefix(":-")
            .or_else(|| rest.strip_prefix('-'))
            .or_else(|| rest.strip_prefix(":="))
            .or_else(|| rest.strip_prefix('='))
        {
            Some(d.to_owned())
        } else if let Some(r) = rest.strip_prefix("//").or_else(|| rest.strip_prefix('/')) {
            r.split_once('/').map(|(_, rep)| rep.to_owned())
        } else {
            None
        };
        let stable = matches!(name, "HOME" | "PWD");
        if let Some(sub) = rest
            .strip_prefix(':')
            .filter(|r| r.starts_with(|c: char| c.is_ascii_digit()))
        {
            // ${x:offset:length}
            let mut it = sub.splitn(2, ':');
            let off: Option<usize> = it.next().and_then(|o| o.trim().parse().ok());
            let len: Option<Option<usize>> = match it.next() {
                Some(l) => l.trim().parse().ok().map(Some),
                None => Some(None),
            };
            if let (Some(v), Some(off), Some(len)) = (known.as_ref(), off, len) {
                let cut: String = v
                    .chars()
                    .skip(off)
                    .take(len.unwrap_or(usize::MAX))
                    .collect();
                out.push(Frag {
                    text: cut,
                    split: !quoted,
                    dynamic: !stable,
                    quoted,
                    fetched: false,
                    glob: false,
                    transform: false,
                });
            } else {
                out.push(Frag {
                    text: raw.to_owned(),
                    split: false,
                    dynamic: true,
                    quoted,
                    fetched: false,
                    glob: false,
                    transform: false,
                });
            }
            return;
        }
        if alt.is_none() && !rest.is_empty() {
            out.push(Frag {
                text: raw.to_owned(),
                split: false,
                dynamic: true,
                quoted,
                fetched: false,
                glob: false,
                transform: false,
            });
            return;
        }
        let value = known.filter(|v| !v.is_empty() || alt.is_none()).or(alt);
        match value {
            Some(v) => out.push(Frag {
                text: v,
                split: !quoted,
                dynamic: !stable,
                quoted,
                fetched: false,
                glob: false,
                transform: false,
            }),
            None => out.push(Frag {
                text: raw.to_owned(),
                split: false,
                dynamic: true,
                quoted,
                fetched: false,
                glob: false,
                transform: false,
            }),
        }
    }
}

/// The words a command fed by stdin gets (xargs, parallel): a literal's words, a listing's paths
/// (each start point and everything under it), or one word known only when it runs.
fn stdin_operand_words(stdin: Option<&Output>) -> Vec<Word> {
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
fn listing_words(paths: &[String]) -> Vec<Word> {
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

/// The start points a listing command lists (`listings.producers`).
fn listed(method: &str, args: &[Word]) -> Vec<String> {
    let found: Vec<String> = match method {
        "root" => return vec!["/".to_owned()],
        "find" => args
            .iter()
            .skip_while(|a| matches!(a.text.as_str(), "-H" | "-L" | "-P"))
            .take_while(|a| !a.text.starts_with('-') && a.text != "(" && a.text != "!")
            .map(|a| a.text.clone())
            .collect(),
        _ => crate::floor::operands(args)
            .into_iter()
            .skip(1)
            .map(|w| w.text.clone())
            .collect(),
    };
    if found.is_empty() {
        vec![".".to_owned()]
    } else {
        found
    }
}

/// A word put back into a command line: a pattern or an unknown stays as it is, text is quoted.
fn script_word(w: &Word) -> String {
    if w.glob || (w.dynamic && w.text.starts_with('$')) {
        w.text.clone()
    } else {
        shell_quote(&w.text)
    }
}

/// What a sed script does beyond editing its stream.
#[derive(Debug, Default)]
struct SedEffects {
    /// Commands it runs (`e CMD`; an `s///e` replacement, the likely command).
    runs: Vec<String>,
    /// It runs its pattern space (`e` alone, the `e` flag): a command known only when it runs.
    pattern_space: bool,
    writes: Vec<String>,
    reads: Vec<String>,
}

/// The index just past the closing `delim` of a sed regex or replacement starting at `from`.
fn sed_delimited(c: &[char], from: usize, delim: char) -> usize {
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
fn sed_effects(script: &str) -> SedEffects {
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

#[derive(Debug, Clone, Default)]
struct Frag {
    text: String,
    split: bool,
    dynamic: bool,
    quoted: bool,
    fetched: bool,
    glob: bool,
    transform: bool,
}

/// Whether an unquoted word's source holds a pattern the shell expands (`*`, `?`, `[...]`).
fn has_glob(raw: &str) -> bool {
    let b = raw.as_bytes();
    let mut i = 0;
    let mut open = false;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b'*' | b'?' => return true,
            b'[' => open = true,
            b']' if open => return true,
            _ => {}
        }
        i += 1;
    }
    false
}

/// Whether a path text holds a shell pattern character.
pub(crate) fn has_pattern(t: &str) -> bool {
    has_glob(t)
}

/// Bash's brace expansion of an unquoted word (`{a,b}`, `x{1..3}`), at most `cap` words;
/// `None` when there is nothing to expand or it cannot be expanded with certainty.
fn brace_expand(raw: &str, cap: usize) -> Option<Vec<String>> {
    let b = raw.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'{' => {
                let mut depth = 0;
                let mut commas = Vec::new();
                let mut j = i;
                let mut end = None;
                while j < b.len() {
                    match b[j] {
                        b'\\' => j += 1,
                        b'{' => depth += 1,
                        b'}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = Some(j);
                                break;
                            }
                        }
                        b',' if depth == 1 => commas.push(j),
                        _ => {}
                    }
                    j += 1;
                }
                let end = end?;
                let (pre, body, post) = (&raw[..i], &raw[i + 1..end], &raw[end + 1..]);
                let alts: Vec<String> = if !commas.is_empty() {
                    let mut v = Vec::new();
                    let mut start = i + 1;
                    for c in commas.iter().copied().chain(std::iter::once(end)) {
                        v.push(raw[start..c].to_owned());
                        start = c + 1;
                    }
                    v
                } else if let Some((a, z)) = body.split_once("..") {
                    let (a, z) = (a.parse::<i64>().ok()?, z.parse::<i64>().ok()?);
                    if (z - a).unsigned_abs() as usize > cap {
                        return None;
                    }
                    let v: Vec<i64> = if a <= z {
                        (a..=z).collect()
                    } else {
                        (z..=a).rev().collect()
                    };
                    v.into_iter().map(|n| n.to_string()).collect()
                } else {
                    i = end + 1;
                    continue;
                };
                let mut out = Vec::new();
                for alt in alts {
                    let word = format!("{pre}{alt}{post}");
                    match brace_expand(&word, cap) {
                        Some(more) => out.extend(more),
                        None => out.push(word),
                    }
                    if out.len() > cap {
                        return None;
                    }
                }
                return Some(out);
            }
            _ => i += 1,
        }
    }
    None
}

fn assemble(frags: Vec<Frag>) -> Vec<Word> {
    let mut words = Vec::new();
    let mut cur = Word::default();
    let mut has = false;
    for f in frags {
        if f.split {
            let mut first = true;
            let pieces: Vec<&str> = f.text.split(|c: char| c.is_ascii_whitespace()).collect();
            for p in pieces {
                if !first && has {
                    words.push(std::mem::take(&mut cur));
                    has = false;
                }
                first = false;
                if !p.is_empty() {
                    cur.text.push_str(p);
                    cur.dynamic |= f.dynamic;
                    cur.fetched |= f.fetched;
                    cur.transform |= f.transform;
                    cur.glob |= f.dynamic && has_glob(p);
                    has = true;
                }
            }
            if f.text.is_empty() && f.dynamic {
                cur.dynamic = true;
                cur.transform |= f.transform;
            }
        } else {
            cur.text.push_str(&f.text);
            cur.dynamic |= f.dynamic;
            cur.quoted |= f.quoted;
            cur.fetched |= f.fetched;
            cur.glob |= f.glob;
            cur.transform |= f.transform;
            has = has || f.quoted || !f.text.is_empty() || f.dynamic;
        }
    }
    if has {
        words.push(cur);
    }
    // an argument ends at its first NUL, as execve passes it
    for w in &mut words {
        if let Some(nul) = w.text.find('\0') {
            w.text.truncate(nul);
        }
    }
    words
}

fn join_words(ws: Vec<Word>) -> Word {
    let mut w = Word::default();
    for (i, x) in ws.into_iter().enumerate() {
        if i > 0 {
            w.text.push(' ');
        }
        w.text.push_str(&x.text);
        w.dynamic |= x.dynamic;
        w.quoted |= x.quoted;
        w.fetched |= x.fetched;
        w.transform |= x.transform;
    }
    w
}

fn text<'s>(node: Node<'_>, src: &'s [u8]) -> &'s str {
    std::str::from_utf8(&src[node.start_byte()..node.end_byte()]).unwrap_or("")
}

fn slice(src: &[u8], a: usize, b: usize) -> &str {
    src.get(a..b)
        .and_then(|s| std::str::from_utf8(s).ok())
        .unwrap_or("")
}

fn unescape_word(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut it = raw.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            match it.next() {
                Some('\n') | None => {}
                Some(n) => out.push(n),
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn unescape_dq(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut it = raw.chars().peekable();
    while let Some(c) = it.next() {
        if c == '\\' {
            match it.peek() {
                Some('\n') => {
                    it.next();
                }
                Some(&n) if matches!(n, '$' | '`' | '"' | '\\') => {
                    out.push(n);
                    it.next();
                }
                _ => out.push(c),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The values of `command_options`: an option written `--opt=prefix` gives only the values that
/// start with `prefix`, without it (`--checkpoint-action=exec=CMD`).
fn command_option_values(args: &[Word], opts: &[String]) -> Vec<String> {
    let mut plain: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for o in opts {
        match o.split_once('=') {
            Some((name, prefix)) => out.extend(
                option_values(args, &[name.to_owned()])
                    .into_iter()
                    .filter_map(|v| v.strip_prefix(prefix).map(str::to_owned)),
            ),
            None => plain.push(o.clone()),
        }
    }
    out.extend(option_values(args, &plain));
    out
}

/// The values given to any of `opts` (`-c V`, `-cV`, `-qc V`, `--command=V`, `--command V`, and
/// single-dash long options: `-TT V`, `-fprint V`).
pub(crate) fn option_values(args: &[Word], opts: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut j = 0;
    while j < args.len() {
        let a = args[j].text.as_str();
        if a == "--" {
            break;
        }
        if a.starts_with("--") {
            for o in opts.iter().filter(|o| o.starts_with("--")) {
                if a == o {
                    if let Some(v) = args.get(j + 1) {
                        out.push(v.text.clone());
                    }
                    j += 1;
                } else if let Some(v) = a.strip_prefix(o.as_str()).and_then(|r| r.strip_prefix('='))
                {
                    out.push(v.to_owned());
                }
            }
        } else if a.starts_with('-')
            && a.len() > 2
            && opts
                .iter()
                .any(|o| o.len() > 2 && !o.starts_with("--") && a == o)
        {
            if let Some(v) = args.get(j + 1) {
                out.push(v.text.clone());
            }
            j += 1;
        } else if a.starts_with('-') && a.len() > 1 {
            for (pos, c) in a.char_indices().skip(1) {
                if opts
                    .iter()
                    .any(|o| o.len() == 2 && !o.starts_with("--") && o.ends_with(c))
                {
                    let rest = &a[pos + c.len_utf8()..];
                    if rest.is_empty() {
                        if let Some(v) = args.get(j + 1) {
                            out.push(v.text.clone());
                        }
                        j += 1;
                    } else {
                        out.push(rest.to_owned());
                    }
                    break;
                }
            }
        }
        j += 1;
    }
    out
}

fn shell_quote(t: &str) -> String {
    format!("'{}'", t.replace('\'', "'\\''"))
}

fn is_assignment(a: &str) -> bool {
    match a.split_once('=') {
        Some((n, _)) => {
            !n.is_empty()
                && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !n.starts_with(|c: char| c.is_ascii_digit())
        }
        None => false,
    }
}

/// The last path segment of a program word (`/usr/bin/rm` → `rm`).
pub(crate) fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

fn interpreter<'d>(data: &'d Data, program: &str) -> Option<&'d Vec<String>> {
    if let Some(o) = data.interpreters.get(program) {
        return Some(o);
    }
    let trimmed = program.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    data.interpreters.get(trimmed)
}

fn echo_output(program: &str, args: &[Word]) -> String {
    if program == "printf" {
        let Some(fmt) = args.first() else {
            return String::new();
        };
        let mut rest = args[1..].iter();
        let f = decode_ansi_c(&fmt.text);
        let mut out = String::new();
        let mut it = f.chars().peekable();
        while let Some(c) = it.next() {
            if c == '%' {
                match it.next() {
                    Some('s') | Some('b') | Some('d') => {
                        out.push_str(rest.next().map(|w| w.text.as_str()).unwrap_or(""))
                    }
                    Some('%') => out.push('%'),
                    Some(o) => {
                        out.push('%');
                        out.push(o)
                    }
                    None => out.push('%'),
                }
            } else {
                out.push(c);
            }
        }
        return out;
    }
    let mut words: Vec<&str> = Vec::new();
    let mut escapes = false;
    let mut opts = true;
    for a in args {
        if opts && matches!(a.text.as_str(), "-n" | "-e" | "-E" | "-ne" | "-en") {
            escapes |= a.text.contains('e');
            continue;
        }
        opts = false;
        words.push(&a.text);
    }
    let joined = words.join(" ");
    if escapes {
        decode_ansi_c(&joined)
    } else {
        joined
    }
}
