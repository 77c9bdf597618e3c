//! Error answers classified: context overflow, capacity, or anything else — from an HTTP status
//! and body, from an `error` object inside a 200 stream, or from a 200 body that is only an
//! error. The texts come from `quirks.json` (`errors`).

use std::time::Duration;

use serde_json::Value;

use crate::quirks::{ErrorClassTexts, Quirks};

pub use crate::error::{ErrorClass, ModelError};

/// The longest piece of a body kept as an error's message.
const MESSAGE_LIMIT: usize = 600;

fn matches_class(
    texts: &ErrorClassTexts,
    status: Option<u16>,
    codes: &[String],
    hay: &str,
) -> bool {
    if status.is_some_and(|s| texts.statuses.contains(&s)) {
        return true;
    }
    if codes
        .iter()
        .any(|c| texts.codes.iter().any(|k| k.eq_ignore_ascii_case(c)))
    {
        return true;
    }
    texts.texts.iter().any(|t| hay.contains(t.as_str()))
        && !texts.not_texts.iter().any(|t| hay.contains(t.as_str()))
}

fn shorten(text: &str) -> String {
    let text = text.trim();
    if text.len() <= MESSAGE_LIMIT {
        return text.to_string();
    }
    let mut end = MESSAGE_LIMIT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Pulls the message and the codes out of an error value: an object `{message, code, type,
/// metadata}`, a string, or a body with `detail`/`message` at the top.
fn describe(error: &Value) -> (String, Vec<String>, Option<u16>) {
    let mut codes = Vec::new();
    let mut numeric = None;
    let message = match error {
        Value::String(s) => s.clone(),
        Value::Object(map) => {
            for key in ["code", "type", "status"] {
                match map.get(key) {
                    Some(Value::String(s)) => codes.push(s.clone()),
                    Some(Value::Number(n)) => {
                        numeric = n.as_u64().and_then(|n| u16::try_from(n).ok());
                    }
                    _ => {}
                }
            }
            if let Some(t) = map
                .get("metadata")
                .and_then(|m| m.get("error_type"))
                .and_then(Value::as_str)
            {
                codes.push(t.to_string());
            }
            map.get("message")
                .or_else(|| map.get("detail"))
                .or_else(|| map.get("error"))
                .map(|m| match m {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .unwrap_or_else(|| error.to_string())
        }
        other => other.to_string(),
    };
    (message, codes, numeric)
}

/// Classifies an error: `status` is the HTTP status (None inside a stream), `error` the error
/// value found (the `error` of a body or chunk, or the whole body), `raw` the text it came in
/// (searched for the class texts, so a provider's raw message counts too).
pub fn classify_value(
    quirks: &Quirks,
    status: Option<u16>,
    error: &Value,
    raw: &str,
    retry_after: Option<Duration>,
) -> ModelError {
    let (message, codes, numeric) = describe(error);
    let status_for_class = match status {
        Some(s) if s != 200 => Some(s),
        _ => numeric,
    };
    let hay = format!("{}\n{}", raw, message).to_lowercase();
    let texts = &quirks.errors;
    // A 4xx status that is not a capacity status decides alone: 400, 401, 403 and the like are
    // never capacity (so never retried), whatever their text or code says ("please try again",
    // "rate limit"). Only an overflow may still be read from such an answer.
    let refused = status_for_class
        .is_some_and(|s| (400..500).contains(&s) && !texts.capacity.statuses.contains(&s));
    // A 5xx that says when to come back (`Retry-After`) is a busy server, whatever its status.
    let asks_to_wait = retry_after.is_some() && status_for_class.is_some_and(|s| s >= 500);
    let class = if matches_class(&texts.context_overflow, status_for_class, &codes, &hay) {
        ErrorClass::ContextOverflow
    } else if !refused
        && (asks_to_wait || matches_class(&texts.capacity, status_for_class, &codes, &hay))
    {
        ErrorClass::Capacity
    } else {
        ErrorClass::Other
    };
    let loading = texts
        .capacity
        .loading_texts
        .iter()
        .any(|t| hay.contains(t.as_str()));
    let retryable = match class {
        ErrorClass::Capacity => true,
        ErrorClass::ContextOverflow => false,
        ErrorClass::Other => status_for_class.is_none_or(|s| s >= 500),
    };
    ModelError {
        class,
        status: status_for_class,
        message: shorten(if message.is_empty() { raw } else { &message }),
        retry_after,
        loading,
        retryable,
    }
}

/// Classifies an HTTP error answer from its status, its body and its `Retry-After` header.
pub fn classify_http(
    quirks: &Quirks,
    status: u16,
    body: &str,
    retry_after: Option<&str>,
) -> ModelError {
    let retry_after = retry_after.and_then(parse_retry_after);
    let parsed: Option<Value> = serde_json::from_str(body.trim()).ok();
    let error = match &parsed {
        Some(Value::Object(map)) if map.contains_key("error") => map["error"].clone(),
        Some(value @ Value::Object(_)) => value.clone(),
        _ => Value::String(if body.trim().is_empty() {
            format!("HTTP {status} with an empty body")
        } else {
            body.to_string()
        }),
    };
    classify_value(quirks, Some(status), &error, body, retry_after)
}

/// Reads a `Retry-After` value: seconds, or an HTTP date (then the wait until it, from now).
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<f64>() {
        if secs.is_finite() && secs >= 0.0 {
            return Some(Duration::from_secs_f64(secs));
        }
        return None;
    }
    let at = parse_http_date(value)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs();
    Some(Duration::from_secs(at.saturating_sub(now)))
}

/// Parses an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) into seconds since the epoch.
fn parse_http_date(value: &str) -> Option<u64> {
    let parts: Vec<&str> = value.split_whitespace().collect();
    if parts.len() != 6 || parts[5] != "GMT" {
        return None;
    }
    let day: u64 = parts[1].parse().ok()?;
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| *m == parts[2])? as u64
        + 1;
    let year: u64 = parts[3].parse().ok()?;
    let hms: Vec<u64> = parts[4]
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<Vec<u64>>>()?;
    if hms.len() != 3 || year < 1970 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let (y, m) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hms[0] * 3600 + hms[1] * 60 + hms[2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_seconds_and_dates() {
        assert_eq!(parse_retry_after("7"), Some(Duration::from_secs(7)));
        assert_eq!(parse_retry_after("0.5"), Some(Duration::from_millis(500)));
        assert_eq!(
            parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon"), None);
    }

    #[test]
    fn classes_from_the_spec_texts() {
        let q = Quirks::embedded().unwrap();
        let vllm = classify_http(
            q,
            400,
            r#"{"object":"error","message":"This model's maximum context length is 8192 tokens. However, you requested 9000 tokens (8000 in the messages, 1000 in the completion).","type":"BadRequestError","code":400}"#,
            None,
        );
        assert_eq!(vllm.class, ErrorClass::ContextOverflow);
        let rate = classify_http(
            q,
            429,
            r#"{"error":{"message":"Rate limit reached: too many tokens per minute"}}"#,
            Some("3"),
        );
        assert_eq!(rate.class, ErrorClass::Capacity);
        assert_eq!(rate.retry_after, Some(Duration::from_secs(3)));
        let loading = classify_http(
            q,
            503,
            r#"{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}"#,
            None,
        );
        assert!(loading.loading && loading.retryable);
        let auth = classify_http(q, 401, r#"{"error":{"message":"Invalid API key"}}"#, None);
        assert_eq!(auth.class, ErrorClass::Other);
        assert!(!auth.retryable);
    }
}
