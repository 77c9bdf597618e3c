//! The per-program table: what a program runs or writes that its words say (a shell's `-c`,
//! `eval`, `su -c`, awk's `system()`, an interpreter's one-liner, `find -exec`), and what it
//! writes to the next command of a pipeline (a literal, a download, a decoding). Most of the
//! programs are named in `hardline.json` (`shells`, `awk`, `interpreters`, `streams`,
//! `command_options`, `program_commands`, `config_options`, `name_operands`); the few with
//! their own reading are named in [`NAMED`].

use base64::Engine as _;

use super::options::{command_option_values, option_values};
use super::{Ctx, Output, Part, Redirect, State, Word};
use crate::data::Data;
use crate::normalise::decode_ansi_c;

/// How a program is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// `busybox CMD`, `toybox CMD`: the command is the rest.
    Multicall,
    /// A shell (`shells`): its `-c` string, or its stdin, is read.
    Shell,
    /// `eval`: its words are read as a script.
    Eval,
    /// `source`, `.`: a download sourced is `fetch_to_shell`.
    Source,
    /// `su`, `runuser`: privileged; `-c CMD` and `-u USER CMD` run a command.
    SwitchUser,
    /// An awk (`awk.programs`): its program's `system()`, pipes and writes.
    Awk,
    /// `pkexec`, `run0`: privileged; the rest is the command.
    Elevate,
    /// An interpreter (`interpreters`): its one-liner's exec and delete calls.
    Interpreter,
    /// `find`: `-exec` and its kin run a command.
    Find,
    /// `script`: `-c CMD` or `script FILE CMD`.
    Script,
    /// `echo`, `printf` of known words: their output is a literal.
    Echo,
    /// A fetcher (`streams.fetchers`): its output is a download.
    Fetcher,
    /// A decoder (`streams.decoders`): its output is known only when it runs.
    Decoder,
    /// `cat` with no operand passes its stdin on.
    Cat,
    /// Nothing of its own to read.
    Plain,
}

/// The programs read by name rather than by a list in `hardline.json`.
const NAMED: &[(&str, Kind)] = &[
    ("busybox", Kind::Multicall),
    ("toybox", Kind::Multicall),
    ("eval", Kind::Eval),
    ("source", Kind::Source),
    (".", Kind::Source),
    ("su", Kind::SwitchUser),
    ("runuser", Kind::SwitchUser),
    ("pkexec", Kind::Elevate),
    ("run0", Kind::Elevate),
    ("find", Kind::Find),
    ("script", Kind::Script),
    ("echo", Kind::Echo),
    ("printf", Kind::Echo),
    ("cat", Kind::Cat),
];

impl Kind {
    /// How `program` (run with `args`; `dynamic` when a word is known only when it runs) is
    /// read: a shell or an awk by the spec's lists first, then the named programs, then the
    /// interpreters, fetchers and decoders.
    pub(super) fn of(data: &Data, program: &str, args: &[Word], dynamic: bool) -> Kind {
        let named = NAMED.iter().find(|(n, _)| *n == program).map(|(_, k)| *k);
        if named == Some(Kind::Multicall) && !args.is_empty() {
            return Kind::Multicall;
        }
        if data.shells.contains(program) {
            return Kind::Shell;
        }
        if data.awk.programs.contains(program) {
            return Kind::Awk;
        }
        match named {
            Some(Kind::Multicall) => Kind::Plain,
            Some(Kind::Echo) if dynamic => Kind::Plain,
            Some(Kind::Cat) if !args.is_empty() => Kind::Plain,
            Some(k) => k,
            None if interpreter(data, program).is_some() => Kind::Interpreter,
            None if data.streams.fetchers.contains(program) => Kind::Fetcher,
            None if data.streams.decoders.contains(program) => Kind::Decoder,
            None => Kind::Plain,
        }
    }
}

impl<'a> Ctx<'a> {
    /// Reads what `part` runs by its kind; what it writes to the next command.
    pub(super) fn program(
        &mut self,
        kind: Kind,
        part: &mut Part,
        args: &[Word],
        st: &State,
        stdin: Option<&Output>,
        wrappers: &[String],
    ) -> Output {
        let mut inner = st.clone();
        inner.depth += 1;
        match kind {
            Kind::Shell => self.shell(part, args, stdin, &mut inner),
            Kind::Eval => {
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
            }
            Kind::Source => {
                if args.iter().any(|w| w.fetched) {
                    part.findings.push("fetch_to_shell");
                }
            }
            Kind::SwitchUser => self.switch_user(part, args, st, &mut inner, wrappers),
            Kind::Awk => self.awk(part, args, &mut inner),
            Kind::Elevate => {
                part.findings.push("privileged");
                if !args.is_empty() {
                    let mut tmp = st.clone();
                    let w = vec![part.program.clone()];
                    self.simple(args.to_vec(), Vec::new(), &mut tmp, None, w);
                }
            }
            Kind::Interpreter => self.interpreter_code(part, args, stdin, &mut inner),
            Kind::Find => self.find_exec(part, st),
            Kind::Script => self.script_program(part, args, st, wrappers),
            Kind::Echo => return Output::Literal(echo_output(&part.program, args)),
            Kind::Fetcher => return fetched(&part.program, args),
            Kind::Decoder => return decoded(&part.program, args, stdin),
            Kind::Cat => return stdin.cloned().unwrap_or(Output::Unknown),
            Kind::Multicall | Kind::Plain => {}
        }
        Output::Unknown
    }

    /// A shell: the command string after `-c` (options may come between), or its stdin.
    fn shell(&mut self, part: &mut Part, args: &[Word], stdin: Option<&Output>, inner: &mut State) {
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
            } else {
                if wants_c {
                    payload = Some(a.clone());
                } else {
                    operand = true;
                }
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
            self.script(&p, inner);
        } else if !operand {
            self.feed_stdin(part, stdin, inner, true);
        }
    }

    /// `su`, `runuser`: privileged; `-c CMD`, `--command=CMD` and `-u USER CMD ARGS` run a
    /// command.
    fn switch_user(
        &mut self,
        part: &mut Part,
        args: &[Word],
        st: &State,
        inner: &mut State,
        wrappers: &[String],
    ) {
        part.findings.push("privileged");
        let mut j = 0;
        let mut user_opt = false;
        let run_rest = |ctx: &mut Self, from: usize, part: &Part| {
            let mut w = wrappers.to_vec();
            w.push(part.program.clone());
            let mut tmp = st.clone();
            tmp.depth += 1;
            ctx.simple(args[from..].to_vec(), Vec::new(), &mut tmp, None, w);
        };
        while j < args.len() {
            let a = args[j].text.as_str();
            if a == "--" {
                if user_opt && j + 1 < args.len() {
                    run_rest(self, j + 1, part);
                }
                break;
            }
            if let Some(v) = a
                .strip_prefix("--command=")
                .or(a.strip_prefix("--session-command="))
            {
                part.inline_code = true;
                self.script(v, inner);
            } else if matches!(a, "--command" | "--session-command") {
                part.inline_code = true;
                if let Some(p) = args.get(j + 1) {
                    self.script(&p.text.clone(), inner);
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
                                self.script(&v, inner);
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
                run_rest(self, j, part);
                break;
            }
            j += 1;
        }
    }

    /// An interpreter's one-liner (`python -c CODE`, `perl -eCODE`) or the code fed to its stdin.
    fn interpreter_code(
        &mut self,
        part: &mut Part,
        args: &[Word],
        stdin: Option<&Output>,
        inner: &mut State,
    ) {
        let data: &'a Data = self.data;
        let Some(opts) = interpreter(data, &part.program) else {
            return;
        };
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
            self.exec_calls(&code, inner);
        } else if !args.iter().any(|a| !a.text.starts_with('-')) {
            self.feed_stdin(part, stdin, inner, false);
        }
    }

    /// Options whose values are commands, by program: `command_options` (`tar
    /// --checkpoint-action=exec=CMD`), `program_commands`, `config_options`, `name_operands`,
    /// sed's script; and a word transformed when it runs (`${x@E}`).
    pub(super) fn option_payloads(&mut self, part: &mut Part, args: &[Word], st: &State) {
        let data: &'a Data = self.data;
        if let Some(opts) = data.command_options.get(&part.program) {
            for v in command_option_values(args, opts) {
                part.inline_code = true;
                let mut tmp = st.clone();
                tmp.depth += 1;
                self.script(&v, &mut tmp);
            }
        }
        if part.argv.iter().any(|w| w.transform) {
            part.inline_code = true;
        }
        self.program_commands(part, args, st);
        self.config_options(part, args, st);
        self.name_operands(part, args, st);
        if part.program == "sed" {
            self.sed(part, args, st);
        }
    }
}

/// A fetcher writes a download to the next command, unless curl writes it to a file.
fn fetched(program: &str, args: &[Word]) -> Output {
    let to_file = args.iter().any(|a| {
        a.text == "-o"
            || a.text == "--output"
            || a.text.starts_with("--output=")
            || (a.text == "-O" && program == "curl")
    });
    if program != "curl" || !to_file || args.iter().any(|a| a.text == "-O-" || a.text == "-") {
        Output::Fetched
    } else {
        Output::Unknown
    }
}

/// A decoder's output: `base64 -d` of a literal is decoded; anything else fed or decoded is
/// known only when it runs.
fn decoded(program: &str, args: &[Word], stdin: Option<&Output>) -> Output {
    let decoding = |extra: &[&str]| {
        args.iter().any(|a| {
            matches!(a.text.as_str(), "-d" | "--decode" | "-D") || extra.contains(&a.text.as_str())
        })
    };
    match stdin {
        Some(Output::Literal(t)) if program == "base64" && decoding(&[]) => {
            let clean: String = t.chars().filter(|c| !c.is_whitespace()).collect();
            match base64::engine::general_purpose::STANDARD.decode(clean.as_bytes()) {
                Ok(b) => Output::Literal(String::from_utf8_lossy(&b).into_owned()),
                Err(_) => Output::Fetched,
            }
        }
        Some(Output::Literal(_)) | Some(Output::Fetched) => Output::Fetched,
        _ if decoding(&["-r"]) => Output::Fetched,
        _ => Output::Unknown,
    }
}

impl<'a> Ctx<'a> {
    /// `script -c CMD` (util-linux) and `script FILE CMD...` (BSD) run a command.
    pub(super) fn script_program(
        &mut self,
        part: &mut Part,
        args: &[Word],
        st: &State,
        wrappers: &[String],
    ) {
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
    pub(super) fn awk(&mut self, part: &mut Part, args: &[Word], inner: &mut State) {
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

    /// A program's own command language: a pager's `+!cmd`, an editor's `-c '!cmd'`.
    pub(super) fn program_commands(&mut self, part: &mut Part, args: &[Word], st: &State) {
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
    pub(super) fn config_options(&mut self, part: &mut Part, args: &[Word], st: &State) {
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
    pub(super) fn name_operands(&mut self, part: &mut Part, args: &[Word], st: &State) {
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

    pub(super) fn feed_stdin(
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

    pub(super) fn exec_calls(&mut self, code: &str, inner: &mut State) {
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

    pub(super) fn find_exec(&mut self, part: &Part, st: &State) {
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
}

/// The start points a listing command lists (`listings.producers`).
pub(super) fn listed(method: &str, args: &[Word]) -> Vec<String> {
    let found: Vec<String> = match method {
        "root" => return vec!["/".to_owned()],
        "find" => args
            .iter()
            .skip_while(|a| matches!(a.text.as_str(), "-H" | "-L" | "-P"))
            .take_while(|a| !a.text.starts_with('-') && a.text != "(" && a.text != "!")
            .map(|a| a.text.clone())
            .collect(),
        _ => super::options::operands(args)
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

pub(super) fn interpreter<'d>(data: &'d Data, program: &str) -> Option<&'d Vec<String>> {
    if let Some(o) = data.interpreters.get(program) {
        return Some(o);
    }
    let trimmed = program.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    data.interpreters.get(trimmed)
}

pub(super) fn echo_output(program: &str, args: &[Word]) -> String {
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
