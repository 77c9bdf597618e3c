//! Markdown for the terminal, as it streams: headings, emphasis, inline code, links, lists,
//! quotes and rules line by line (pulldown-cmark for a line's inline text), code blocks framed
//! and coloured by their language (syntect, its syntaxes loaded on the first code block), and
//! tables drawn aligned once they end. A line is drawn when it is complete; while it is not,
//! it is shown as it came (plain) and redrawn once its end arrives. Used only where colour is
//! on: piped or under `NO_COLOR` the text is written as the model wrote it.

use std::fmt::Write as _;
use std::sync::OnceLock;

use pulldown_cmark::{Alignment, Event, Options, Parser, Tag, TagEnd};
use unicode_width::UnicodeWidthStr as _;

const RESET: &str = "\x1b[0m";
const BOLD: &str = "\x1b[1m";
const DIM: &str = "\x1b[2m";
const ITALIC: &str = "\x1b[3m";
const UNDERLINE: &str = "\x1b[4m";
const STRIKE: &str = "\x1b[9m";
const CYAN: &str = "\x1b[36m";
const MAGENTA: &str = "\x1b[35m";

/// A Markdown text drawn as it streams.
#[derive(Default)]
pub struct Markdown {
    /// The line not ended yet.
    partial: String,
    /// How much of it is on the screen (plain), to be wiped when the line is drawn.
    shown: String,
    /// An open code block: its fence and its colouring.
    fence: Option<Fence>,
    /// Table rows waiting for the table's end (its widths need every row).
    table: Vec<String>,
    /// The window's columns (`None`: the terminal's, asked when needed).
    width: Option<usize>,
}

struct Fence {
    marker: String,
    lines: Option<syntect::easy::HighlightLines<'static>>,
}

impl Markdown {
    /// A text with nothing drawn yet.
    pub fn new() -> Markdown {
        Markdown::default()
    }

    /// A text drawn for a window `width` columns wide (`None`: the terminal's).
    pub fn with_width(width: Option<usize>) -> Markdown {
        Markdown {
            width,
            ..Markdown::default()
        }
    }

    fn columns(&self) -> usize {
        self.width.unwrap_or_else(columns).max(20)
    }

    /// Whether something is held (a line not ended, a table, an open code block).
    pub fn pending(&self) -> bool {
        !self.partial.is_empty() || !self.table.is_empty() || self.fence.is_some()
    }

    /// Takes a piece of the text; gives what to write. `live`: the line not ended yet is
    /// shown plain now (and wiped when it is drawn), else it waits for its end.
    pub fn push(&mut self, text: &str, live: bool) -> String {
        let mut out = String::new();
        for piece in text.split_inclusive('\n') {
            match piece.strip_suffix('\n') {
                Some(end) => {
                    self.partial.push_str(end);
                    out.push_str(&self.wipe());
                    let line = std::mem::take(&mut self.partial);
                    out.push_str(&self.line(line.strip_suffix('\r').unwrap_or(&line)));
                }
                None => self.partial.push_str(piece),
            }
        }
        if live && !self.partial.is_empty() && !self.partial_is_held() {
            let new = &self.partial[self.shown.len()..];
            out.push_str(new);
            self.shown = self.partial.clone();
        }
        out
    }

    /// Ends the text: what is held is drawn.
    pub fn finish(&mut self) -> String {
        let mut out = self.wipe();
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            out.push_str(&self.line(&line));
        }
        out.push_str(&self.flush_table());
        if self.fence.take().is_some() {
            out.push_str(&close_frame());
        }
        out
    }

    /// A table row is not shown before its table is drawn whole.
    fn partial_is_held(&self) -> bool {
        self.fence.is_none() && self.partial.trim_start().starts_with('|')
    }

    /// Wipes the plain partial line from the screen (the cursor back to its start).
    fn wipe(&mut self) -> String {
        if self.shown.is_empty() {
            return String::new();
        }
        let width = self.shown.width().max(1);
        self.shown.clear();
        let rows = (width - 1) / self.columns();
        let mut s = String::from("\r");
        if rows > 0 {
            let _ = write!(s, "\x1b[{rows}A");
        }
        s.push_str("\x1b[J");
        s
    }

    /// Draws one complete line.
    fn line(&mut self, line: &str) -> String {
        let mut out = String::new();
        let trimmed = line.trim_start();
        if let Some(fence) = &mut self.fence {
            if trimmed.starts_with(&fence.marker) && trimmed[fence.marker.len()..].trim().is_empty()
            {
                self.fence = None;
                out.push_str(&close_frame());
            } else {
                let code = match &mut fence.lines {
                    Some(h) => highlight(h, line),
                    None => line.to_owned(),
                };
                let _ = writeln!(out, "  {DIM}│{RESET} {code}{RESET}");
            }
            return out;
        }
        if trimmed.starts_with('|') {
            self.table.push(line.to_owned());
            return out;
        }
        out.push_str(&self.flush_table());
        if line.len() - trimmed.len() < 4
            && let Some(marker) = fence_marker(trimmed)
        {
            let lang = trimmed[marker.len()..].trim();
            let lang = lang.split_whitespace().next().unwrap_or("");
            self.fence = Some(Fence {
                marker,
                lines: highlighter(lang),
            });
            let _ = writeln!(
                out,
                "  {DIM}╭─{}{RESET}",
                if lang.is_empty() {
                    String::new()
                } else {
                    format!(" {lang}")
                }
            );
            return out;
        }
        out.push_str(&block_line(line, self.columns()));
        out.push('\n');
        out
    }

    /// Draws the held table (its rows as written when they do not make one).
    fn flush_table(&mut self) -> String {
        if self.table.is_empty() {
            return String::new();
        }
        let rows = std::mem::take(&mut self.table);
        match table(&rows.join("\n"), self.columns()) {
            Some(t) => t,
            None => rows.iter().map(|r| format!("{}\n", inline(r))).collect(),
        }
    }
}

fn close_frame() -> String {
    format!("  {DIM}╰─{RESET}\n")
}

/// A code fence's marker (three or more backticks or tildes) at the start of `line`.
fn fence_marker(line: &str) -> Option<String> {
    let c = line.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let n = line.chars().take_while(|x| *x == c).count();
    (n >= 3 && !(c == '`' && line[n..].contains('`'))).then(|| c.to_string().repeat(n))
}

/// The terminal's width (80 when it does not say).
fn columns() -> usize {
    rustix::termios::tcgetwinsize(std::io::stdout())
        .ok()
        .map(|w| usize::from(w.ws_col))
        .filter(|c| *c > 0)
        .unwrap_or(80)
}

struct Syntaxes {
    set: syntect::parsing::SyntaxSet,
    theme: syntect::highlighting::Theme,
}

/// The syntaxes and the theme, loaded once, when the first code block comes.
fn syntaxes() -> Option<&'static Syntaxes> {
    static SYNTAXES: OnceLock<Option<Syntaxes>> = OnceLock::new();
    SYNTAXES
        .get_or_init(|| {
            let set = syntect::parsing::SyntaxSet::load_defaults_newlines();
            let mut themes = syntect::highlighting::ThemeSet::load_defaults();
            let theme = themes.themes.remove("base16-ocean.dark")?;
            Some(Syntaxes { set, theme })
        })
        .as_ref()
}

/// A colouring for code in `lang` (`None`: a language it does not know, drawn plain).
fn highlighter(lang: &str) -> Option<syntect::easy::HighlightLines<'static>> {
    if lang.is_empty() {
        return None;
    }
    let s = syntaxes()?;
    let syntax = s.set.find_syntax_by_token(lang)?;
    Some(syntect::easy::HighlightLines::new(syntax, &s.theme))
}

fn highlight(h: &mut syntect::easy::HighlightLines<'static>, line: &str) -> String {
    let Some(s) = syntaxes() else {
        return line.to_owned();
    };
    match h.highlight_line(&format!("{line}\n"), &s.set) {
        Ok(ranges) => syntect::util::as_24_bit_terminal_escaped(&ranges, false)
            .trim_end_matches('\n')
            .to_owned(),
        Err(_) => line.to_owned(),
    }
}

/// A line outside code and tables: its block marker (heading, list item, quote, rule) drawn,
/// its text's inline Markdown styled.
fn block_line(line: &str, width: usize) -> String {
    let trimmed = line.trim_start();
    let indent = &line[..line.len() - trimmed.len()];
    if trimmed.is_empty() {
        return String::new();
    }
    let rule = trimmed.replace([' ', '\t'], "");
    if rule.len() >= 3
        && ["-", "*", "_"]
            .iter()
            .any(|c| rule.chars().all(|x| x.to_string() == *c))
    {
        return format!("{DIM}{}{RESET}", "─".repeat(width.min(60)));
    }
    let hashes = trimmed.chars().take_while(|c| *c == '#').count();
    if (1..=6).contains(&hashes) && trimmed[hashes..].starts_with(' ') {
        let text = inline(trimmed[hashes..].trim().trim_end_matches('#').trim_end());
        let style = if hashes <= 2 {
            format!("{BOLD}{MAGENTA}")
        } else {
            BOLD.to_owned()
        };
        let under = if hashes == 1 { UNDERLINE } else { "" };
        return wrap(
            &format!(
                "{style}{under}{}{RESET}",
                restyle(&text, &format!("{style}{under}"))
            ),
            width,
            0,
        );
    }
    if let Some(rest) = trimmed.strip_prefix('>') {
        return wrap(
            &format!(
                "{indent}{DIM}│{RESET} {ITALIC}{}{RESET}",
                restyle(&inline(rest.trim_start()), ITALIC)
            ),
            width,
            indent.width() + 2,
        );
    }
    if let Some((marker, rest)) = list_marker(trimmed) {
        let (marker, rest) = match rest.strip_prefix("[ ] ") {
            Some(r) => ("☐".to_owned(), r),
            None => match rest
                .strip_prefix("[x] ")
                .or_else(|| rest.strip_prefix("[X] "))
            {
                Some(r) => ("☑".to_owned(), r),
                None => (marker, rest),
            },
        };
        let hang = indent.width() + marker.width() + 1;
        return wrap(
            &format!("{indent}{CYAN}{marker}{RESET} {}", inline(rest)),
            width,
            hang,
        );
    }
    wrap(
        &format!("{indent}{}", inline(trimmed)),
        width,
        indent.width(),
    )
}

/// A styled line wrapped at word boundaries to `width` columns, its following rows indented
/// by `hang`; a word longer than a row is broken where the row ends.
fn wrap(styled: &str, width: usize, hang: usize) -> String {
    if visible_width(styled) <= width {
        return styled.to_owned();
    }
    let hang = hang.min(width / 2);
    let mut out = String::new();
    let mut col = 0usize;
    // Words with the blanks before them, escapes kept with the text they style.
    for (i, word) in styled.split(' ').enumerate() {
        let w = visible_width(word);
        if i > 0 {
            if col + 1 + w <= width {
                out.push(' ');
                col += 1;
            } else {
                out.push('\n');
                out.push_str(&" ".repeat(hang));
                col = hang;
            }
        }
        if col + w <= width {
            out.push_str(word);
            col += w;
            continue;
        }
        // Longer than what is left of a fresh row: broken where rows end.
        let mut chars = word.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                out.push(c);
                for e in chars.by_ref() {
                    out.push(e);
                    if e.is_ascii_alphabetic() {
                        break;
                    }
                }
                continue;
            }
            let cw = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
            if col + cw > width {
                out.push('\n');
                out.push_str(&" ".repeat(hang));
                col = hang;
            }
            out.push(c);
            col += cw;
        }
    }
    out
}

/// A list item's marker (`•` for `-`, `*`, `+`; the number for `1.`) and its text.
fn list_marker(line: &str) -> Option<(String, &str)> {
    for b in ["- ", "* ", "+ "] {
        if let Some(rest) = line.strip_prefix(b) {
            return Some(("•".into(), rest));
        }
    }
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    if (1..=9).contains(&digits) {
        let after = &line[digits..];
        for d in [". ", ") "] {
            if let Some(rest) = after.strip_prefix(d) {
                return Some((format!("{}.", &line[..digits]), rest));
            }
        }
    }
    None
}

/// After a style's reset inside `text`, the outer style again.
fn restyle(text: &str, outer: &str) -> String {
    text.replace(RESET, &format!("{RESET}{outer}"))
}

/// A line's inline Markdown styled: strong bold, emphasis italic, code cyan, strikethrough,
/// links underlined with their address after them.
pub fn inline(text: &str) -> String {
    let mut out = String::new();
    let mut styles: Vec<&str> = Vec::new();
    let mut link: Option<String> = None;
    let mut link_text = String::new();
    let reopen = |styles: &[&str]| styles.concat();
    for ev in Parser::new_ext(text, Options::ENABLE_STRIKETHROUGH) {
        match ev {
            Event::Start(Tag::Strong) => {
                styles.push(BOLD);
                out.push_str(BOLD);
            }
            Event::Start(Tag::Emphasis) => {
                styles.push(ITALIC);
                out.push_str(ITALIC);
            }
            Event::Start(Tag::Strikethrough) => {
                styles.push(STRIKE);
                out.push_str(STRIKE);
            }
            Event::Start(Tag::Link { dest_url, .. }) => {
                styles.push(UNDERLINE);
                out.push_str(UNDERLINE);
                link = Some(dest_url.to_string());
                link_text.clear();
            }
            Event::End(TagEnd::Strong | TagEnd::Emphasis | TagEnd::Strikethrough) => {
                styles.pop();
                out.push_str(RESET);
                out.push_str(&reopen(&styles));
            }
            Event::End(TagEnd::Link) => {
                styles.pop();
                out.push_str(RESET);
                if let Some(url) = link.take()
                    && url != link_text
                {
                    let _ = write!(out, " {DIM}({url}){RESET}");
                }
                out.push_str(&reopen(&styles));
            }
            Event::Text(t) => {
                link_text.push_str(&t);
                out.push_str(&t);
            }
            Event::Code(c) => {
                link_text.push_str(&c);
                let _ = write!(out, "{CYAN}{c}{RESET}{}", reopen(&styles));
            }
            Event::SoftBreak | Event::HardBreak => out.push(' '),
            Event::Html(h) | Event::InlineHtml(h) => out.push_str(&h),
            Event::TaskListMarker(done) => out.push_str(if done { "☑ " } else { "☐ " }),
            Event::FootnoteReference(f) => {
                let _ = write!(out, "[^{f}]");
            }
            Event::Rule => out.push_str("───"),
            Event::End(TagEnd::Item) => out.push(' '),
            _ => {}
        }
    }
    if !styles.is_empty() {
        out.push_str(RESET);
    }
    out
}

/// The visible width of a styled text (its escapes left out).
fn visible_width(styled: &str) -> usize {
    without_escapes(styled).width()
}

/// A styled text without its escapes.
fn without_escapes(styled: &str) -> String {
    let mut plain = String::new();
    let mut chars = styled.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for e in chars.by_ref() {
                if e.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
}

/// A table drawn with its columns aligned, the head bold (`None`: the rows are not a table).
fn table(text: &str, width: usize) -> Option<String> {
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut aligns: Vec<Alignment> = Vec::new();
    let mut cell: Option<String> = None;
    let mut head_rows = 0usize;
    let mut styles: Vec<&str> = Vec::new();
    for ev in Parser::new_ext(text, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH) {
        match ev {
            Event::Start(Tag::Table(a)) => aligns = a,
            Event::Start(Tag::TableHead) => rows.push(Vec::new()),
            Event::End(TagEnd::TableHead) => head_rows = rows.len(),
            Event::Start(Tag::TableRow) => rows.push(Vec::new()),
            Event::Start(Tag::TableCell) => cell = Some(String::new()),
            Event::End(TagEnd::TableCell) => {
                let c = cell.take().unwrap_or_default();
                if let Some(r) = rows.last_mut() {
                    r.push(c);
                }
            }
            Event::Start(Tag::Strong) => push_style(&mut cell, &mut styles, BOLD),
            Event::Start(Tag::Emphasis) => push_style(&mut cell, &mut styles, ITALIC),
            Event::Start(Tag::Strikethrough) => push_style(&mut cell, &mut styles, STRIKE),
            Event::End(TagEnd::Strong | TagEnd::Emphasis | TagEnd::Strikethrough) => {
                styles.pop();
                if let Some(c) = &mut cell {
                    c.push_str(RESET);
                    c.push_str(&styles.concat());
                }
            }
            Event::Text(t) => {
                if let Some(c) = &mut cell {
                    c.push_str(&t);
                }
            }
            Event::Code(t) => {
                if let Some(c) = &mut cell {
                    let _ = write!(c, "{CYAN}{t}{RESET}{}", styles.concat());
                }
            }
            Event::Start(Tag::Paragraph) if cell.is_none() => return None,
            _ => {}
        }
    }
    if rows.is_empty() {
        return None;
    }
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0usize; n];
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(visible_width(c));
        }
    }
    // Two columns of indent, a bar, and each cell with a blank either side and a bar.
    let drawn: usize = 3 + widths.iter().map(|w| w + 3).sum::<usize>();
    if drawn > width {
        return Some(table_as_list(&rows, head_rows, width));
    }
    let rule = |l: &str, m: &str, r: &str| {
        let mid: Vec<String> = widths.iter().map(|w| "─".repeat(w + 2)).collect();
        format!("  {DIM}{l}{}{r}{RESET}\n", mid.join(m))
    };
    let mut out = rule("┌", "┬", "┐");
    for (ri, r) in rows.iter().enumerate() {
        let mut line = format!("  {DIM}│{RESET}");
        for (i, w) in widths.iter().enumerate() {
            let c = r.get(i).map(String::as_str).unwrap_or("");
            let pad = w - visible_width(c);
            let (left, right) = match aligns.get(i) {
                Some(Alignment::Right) => (pad, 0),
                Some(Alignment::Center) => (pad / 2, pad - pad / 2),
                _ => (0, pad),
            };
            let c = if ri < head_rows {
                format!("{BOLD}{}{RESET}", restyle(c, BOLD))
            } else {
                c.to_owned()
            };
            let _ = write!(
                line,
                " {}{c}{} {DIM}│{RESET}",
                " ".repeat(left),
                " ".repeat(right)
            );
        }
        out.push_str(&line);
        out.push('\n');
        if ri + 1 == head_rows {
            out.push_str(&rule("├", "┼", "┤"));
        }
    }
    out.push_str(&rule("└", "┴", "┘"));
    Some(out)
}

/// A table too wide for the window as a list: each row a bullet with its first cell, then each
/// other cell under it after its column's head.
fn table_as_list(rows: &[Vec<String>], head_rows: usize, width: usize) -> String {
    let head = rows.first().filter(|_| head_rows > 0);
    let mut out = String::new();
    for r in rows.iter().skip(head_rows) {
        for (i, c) in r.iter().enumerate() {
            let name = head
                .and_then(|h| h.get(i))
                .map(|h| format!("{BOLD}{}{RESET}: ", restyle(h, BOLD)))
                .unwrap_or_default();
            let line = if i == 0 {
                format!("{CYAN}•{RESET} {name}{c}")
            } else {
                format!("  {name}{c}")
            };
            out.push_str(&wrap(&line, width, if i == 0 { 2 } else { 4 }));
            out.push('\n');
        }
    }
    out
}

fn push_style(cell: &mut Option<String>, styles: &mut Vec<&'static str>, style: &'static str) {
    styles.push(style);
    if let Some(c) = cell {
        c.push_str(style);
    }
}

/// A whole text drawn at once (a plan card's lines, a replayed answer).
pub fn render(text: &str) -> String {
    let mut md = Markdown::new();
    let mut out = md.push(text, false);
    out.push_str(&md.finish());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(s: &str) -> String {
        without_escapes(s)
    }

    #[test]
    fn blocks_are_drawn() {
        let text = "## Title\n\nSome **bold** and `code`.\n- one\n  2. two\n> quoted\n\n| a | bb |\n|---|---:|\n| 1 | 2 |\n\n```\nlet x = 1;\n```\n";
        assert_eq!(
            plain(&render(text)),
            "Title\n\nSome bold and code.\n• one\n  2. two\n│ quoted\n\n  ┌───┬────┐\n  │ a │ bb │\n  ├───┼────┤\n  │ 1 │  2 │\n  └───┴────┘\n\n  ╭─\n  │ let x = 1;\n  ╰─\n"
        );
    }

    #[test]
    fn a_partial_line_is_shown_plain_then_redrawn() {
        let mut md = Markdown::new();
        assert_eq!(md.push("Some **bo", true), "Some **bo");
        assert_eq!(md.push("ld**", true), "ld**");
        let out = md.push("\n", true);
        assert!(out.starts_with("\r\x1b[J"), "{out:?}");
        assert_eq!(plain(&out), "\rSome bold\n");
        // A table row waits for its table.
        assert_eq!(md.push("| a |", true), "");
    }
}
