//! Paths given from outside a session (an upload, a link, an HTTP API), checked before the view
//! sees them: one spelling per name (Unicode NFC, so the composed and decomposed forms of `é`
//! name one file), no name longer than host file systems hold, and no character that makes a
//! name show as another (a right-to-left override shows `inv\u{202E}txt.exe` as `invexe.txt`).

use unicode_normalization::UnicodeNormalization as _;

use crate::error::{Error, Result};
use crate::path::is_portable_name;

/// The longest name, in bytes, that the host file systems hold (Linux's `NAME_MAX`).
pub const MAX_NAME_BYTES: usize = 255;

/// Whether `c` changes the direction text is shown in (the bidirectional controls: embeddings,
/// overrides, isolates and marks), which can make a name read as another.
pub fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}'
    )
}

/// `input` in NFC, every name in it checked: at most [`MAX_NAME_BYTES`] bytes, no bidirectional
/// control, portable (`spec/filesystem.md`, *Names*). The error names the name at fault.
pub fn checked_input(input: &str) -> Result<String> {
    let nfc: String = input.nfc().collect();
    for name in nfc.split('/').filter(|n| !matches!(*n, "" | "." | "..")) {
        check_name(name)?;
    }
    Ok(nfc)
}

fn check_name(name: &str) -> Result<()> {
    if name.len() > MAX_NAME_BYTES {
        return Err(Error::NameTooLong {
            name: name.to_owned(),
            bytes: name.len(),
        });
    }
    if let Some(c) = name.chars().find(|c| is_bidi_control(*c)) {
        return Err(Error::BadName {
            name: name.to_owned(),
            why: format!(
                "holds U+{:04X}, a text-direction control that makes a name show as another",
                u32::from(c)
            ),
        });
    }
    if !is_portable_name(name) {
        return Err(Error::BadName {
            name: name.to_owned(),
            why: "is not portable: a name holds no control character, '/', ':', '\\' or any of <>\"|?*, does not end in a dot or a space, and is not a device name such as CON or nul.txt".into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_composed_bounded_and_shown_as_they_are() {
        assert_eq!(
            checked_input("/a/cafe\u{301}.md").unwrap(),
            "/a/caf\u{e9}.md"
        );
        assert_eq!(
            checked_input("caf\u{e9}/./../x").unwrap(),
            "caf\u{e9}/./../x"
        );
        let long = "x".repeat(MAX_NAME_BYTES);
        assert!(checked_input(&format!("/a/{long}")).is_ok());
        // 128 two-byte characters: 256 bytes.
        let wide = "é".repeat(128);
        assert_eq!(
            checked_input(&format!("/a/{wide}/b"))
                .unwrap_err()
                .to_string(),
            format!("Name too long: {wide:?} is 256 bytes; a name holds at most 255.")
        );
        for c in [
            '\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}', '\u{202E}', '\u{2066}', '\u{2067}',
            '\u{2068}', '\u{2069}', '\u{200E}', '\u{200F}', '\u{061C}',
        ] {
            let e = checked_input(&format!("/a/inv{c}txt.exe")).unwrap_err();
            assert!(matches!(e, Error::BadName { .. }), "{c:?}");
            assert!(e.to_string().starts_with("Invalid name: \"inv\\u{"), "{e}");
        }
        for bad in ["a:b", "x.", "CON", "a\tb"] {
            assert!(
                checked_input(&format!("/h/{bad}"))
                    .unwrap_err()
                    .to_string()
                    .contains("is not portable"),
                "{bad:?}"
            );
        }
    }
}
