//! The values a command's options are given, in the many ways options are spelled.

use super::Word;

/// The values of `command_options`: an option written `--opt=prefix` gives only the values that
/// start with `prefix`, without it (`--checkpoint-action=exec=CMD`).
pub(super) fn command_option_values(args: &[Word], opts: &[String]) -> Vec<String> {
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

/// The words of a part that are not flags (everything after `--`).
pub(crate) fn operands(args: &[Word]) -> Vec<&Word> {
    let mut out = Vec::new();
    let mut done = false;
    for a in args {
        if !done && a.text == "--" {
            done = true;
            continue;
        }
        if done || !a.text.starts_with('-') || a.text == "-" {
            out.push(a);
        }
    }
    out
}
