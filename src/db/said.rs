//! How a driver's error is said: in one line, each cause once.

/// An error with its causes, each said once (drivers often repeat their
/// cause's text in their own message).
pub fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(next) = cause {
        let said = next.to_string();
        if !text.contains(&said) {
            text = format!("{text}: {said}");
        }
        cause = next.source();
    }
    text
}

/// An error's first line, so one failure prints as one line.
pub fn first_line(err: &dyn std::fmt::Display) -> String {
    err.to_string()
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}
