//! The interactive terminal's drawing: what each output looks like on the screen, as text, for a
//! window of a known width. It writes nothing itself (the terminal writes what it gives), so
//! what it draws is tested without a terminal.

use harness_agent::Event;
use harness_core::protocol::{Event as CoreEvent, Mode, Origin, TurnEnd};

use crate::render::{self, Style, paint};

/// How outputs are drawn on the terminal.
pub struct View {
    streamed: render::Streamed,
    color: bool,
    /// The window's columns, when known.
    width: Option<usize>,
    line_open: bool,
    reasoning_lines: usize,
    folded: usize,
    /// Model requests answered this session, and the tokens the server said.
    requests: u64,
    tokens_in: u64,
    tokens_out: u64,
    /// The last request's prompt size (the context in use).
    last_input: Option<u64>,
    /// The model's price, when known, and what the session cost at it (and at the prices of
    /// models used before a switch).
    price: Option<harness_spec::Cost>,
    cost: f64,
    /// Requests answered with no price known (their cost is not counted).
    unpriced: u64,
    /// The answer's Markdown, drawn as it streams (where colour is on; else written as it
    /// came).
    md: Option<render::markdown::Markdown>,
    /// Whether a line not ended yet is shown as it comes (not while the prompt is read: lines
    /// are printed above it whole).
    live: bool,
    /// Whether the open line is reasoning's.
    reasoning_open: bool,
}

/// Reasoning lines shown before the rest is folded.
const REASONING_LINES: usize = 4;

impl View {
    /// A view drawing in colour or not, for a window `width` columns wide (`None`: not known).
    pub fn new(color: bool, width: Option<usize>) -> View {
        View {
            streamed: render::Streamed::new(width),
            color,
            width,
            line_open: false,
            reasoning_lines: 0,
            folded: 0,
            requests: 0,
            tokens_in: 0,
            tokens_out: 0,
            last_input: None,
            price: None,
            cost: 0.0,
            unpriced: 0,
            md: color.then(|| render::markdown::Markdown::with_width(width)),
            live: false,
            reasoning_open: false,
        }
    }

    /// Whether a line not ended yet is shown as it comes (`false` while the prompt is read:
    /// lines are printed above it whole).
    pub fn set_live(&mut self, live: bool) {
        self.live = live;
    }

    /// The last request's prompt size (the context in use), once the server said it.
    pub fn last_input(&self) -> Option<u64> {
        self.last_input
    }

    /// Counts what requests cost from now on at `price` (US dollars per million tokens; `None`:
    /// not known).
    pub fn set_price(&mut self, price: Option<harness_spec::Cost>) {
        self.price = price;
    }

    /// What the session cost so far, when any request had a price (for the status line).
    pub fn cost(&self) -> Option<f64> {
        (self.price.is_some() || self.cost > 0.0).then_some(self.cost)
    }

    /// Notes that the open line was ended by whoever printed it.
    pub fn line_ended(&mut self) {
        self.line_open = false;
    }

    /// While a command runs and its output is past the lines shown, what the spinner's row
    /// says after `out`: the line the output is at, cut to the row (the tail follows).
    pub fn following(&self, out: &Event) -> Option<String> {
        let Event::ToolOutput { call_id, .. } = out else {
            return None;
        };
        let now = self.streamed.running_now(call_id)?;
        // The spinner's frame and time take a few columns.
        let room = self
            .width
            .unwrap_or(render::fold::DEFAULT_WIDTH)
            .saturating_sub(12)
            .max(10);
        Some(render::fold::cut_line(now, room).into_owned())
    }

    /// What an output looks like on the terminal (empty: nothing).
    pub fn render(&mut self, out: &Event) -> String {
        let mut stdout = String::new();
        match out {
            Event::Core(CoreEvent::TextDelta { text }) => {
                stdout.push_str(&self.fold_note());
                if self.reasoning_open && self.line_open {
                    stdout.push('\n');
                    self.line_open = false;
                }
                self.reasoning_open = false;
                match &mut self.md {
                    Some(md) => stdout.push_str(&md.push(text, self.live)),
                    None => {
                        stdout.push_str(text);
                        self.line_open = !text.ends_with('\n');
                    }
                }
            }
            Event::Core(CoreEvent::ReasoningDelta { text }) => {
                let shown_before = self.reasoning_lines;
                self.reasoning_lines += text.matches('\n').count();
                if shown_before < REASONING_LINES {
                    if let Some(md) = &mut self.md
                        && md.pending()
                    {
                        stdout.push_str(&md.finish());
                    }
                    stdout.push_str(&paint(text, Style::Dim, self.color));
                    self.line_open = !text.ends_with('\n');
                    self.reasoning_open = true;
                } else {
                    self.folded += text
                        .matches('\n')
                        .count()
                        .max(usize::from(self.folded == 0));
                }
            }
            Event::Core(CoreEvent::ModelAnswered { usage }) => {
                self.requests += 1;
                if let Some(u) = usage {
                    self.tokens_in += u.input_tokens;
                    self.tokens_out += u.output_tokens;
                    self.last_input = Some(u.input_tokens);
                    match &self.price {
                        Some(p) => self.cost += p.of(u.input_tokens, u.output_tokens),
                        None => self.unpriced += 1,
                    }
                }
            }
            Event::Core(CoreEvent::StepStarted { .. }) => {
                // A step's answer starts on a line of its own.
                stdout.push_str(&self.close_line());
                self.reasoning_lines = 0;
                self.folded = 0;
            }
            Event::Core(CoreEvent::TurnEnded { reason }) => {
                stdout.push_str(&self.fold_note());
                stdout.push_str(&self.close_line());
                if *reason != TurnEnd::Finished {
                    stdout.push_str(&paint(
                        &render::turn_end_line(reason),
                        Style::Yellow,
                        self.color,
                    ));
                    stdout.push('\n');
                }
            }
            Event::Core(CoreEvent::UserInput {
                origin: Origin::Person,
                ..
            }) => {}
            other => {
                let folded = self.streamed.fold(other, self.color);
                if let Some(text) = folded.unwrap_or_else(|| render::activity(other, self.color)) {
                    stdout.push_str(&self.fold_note());
                    stdout.push_str(&self.close_line());
                    stdout.push_str(&text);
                    self.line_open = !text.ends_with('\n');
                }
            }
        }
        stdout
    }

    /// `/status`.
    pub fn status(
        &self,
        id: &str,
        model: &str,
        endpoint: &str,
        mode: Mode,
        window: Option<u64>,
    ) -> String {
        let tokens = if self.tokens_in + self.tokens_out > 0 {
            format!(
                "in {} · out {} this session ({} request{})",
                self.tokens_in,
                self.tokens_out,
                self.requests,
                if self.requests == 1 { "" } else { "s" }
            )
        } else {
            format!("not said by the server ({} requests)", self.requests)
        };
        let context = match (self.last_input, window) {
            (Some(n), Some(w)) if w > 0 => format!("{n} of {w} tokens ({}%)", n * 100 / w),
            (Some(n), _) => format!("{n} tokens (the window is not known)"),
            (None, Some(w)) => format!("a {w}-token window, none said used yet"),
            (None, None) => "not known".to_owned(),
        };
        let cost = match (&self.price, self.unpriced) {
            (Some(p), 0) => format!(
                "{} this session (at {} in · {} out per million tokens)",
                usd(self.cost),
                usd(p.input),
                usd(p.output)
            ),
            (Some(_), n) => format!(
                "{} this session, and {n} request{} at no known price",
                usd(self.cost),
                if n == 1 { "" } else { "s" }
            ),
            (None, _) => format!(
                "not known for {model} ([prices.\"{model}\"] in config.toml sets its price)"
            ),
        };
        format!(
            "model     {model}\nendpoint  {endpoint}\nmode      {mode}\ntokens    {tokens}\ncost      {cost}\ncontext   {context}\nsession   {id}"
        )
    }

    fn fold_note(&mut self) -> String {
        if self.folded == 0 {
            return String::new();
        }
        let mut s = self.close_line();
        s.push_str(&paint(
            &format!("  ⋯ {} more lines of reasoning folded", self.folded),
            Style::Dim,
            self.color,
        ));
        s.push('\n');
        self.folded = 0;
        self.reasoning_lines = 0;
        s
    }

    /// Ends the open line (the held Markdown drawn): what to print.
    pub fn close_line(&mut self) -> String {
        if let Some(md) = &mut self.md
            && md.pending()
        {
            return md.finish();
        }
        if self.line_open {
            self.line_open = false;
            "\n".to_owned()
        } else {
            String::new()
        }
    }
}

/// An amount of US dollars as a person reads it: cents, or four places below a cent.
pub fn usd(amount: f64) -> String {
    if amount == 0.0 || amount >= 0.01 {
        format!("${amount:.2}")
    } else {
        format!("${amount:.4}")
    }
}
