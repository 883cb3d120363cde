//! Passwords in database URLs: hidden wherever idem prints a URL or an error.
//!
//! libpq accepts a password in three places, and so does idem: the URL's
//! user-info (`postgres://user:pw@host/db`), a query parameter
//! (`?password=pw`, also `sslpassword`), and a key/value connection string
//! (`host=h password='pw'`). [`redact`] replaces each with `***`. Errors come
//! from drivers that may quote what they were given, so every password found
//! is also remembered, and [`scrub`] removes it from any text before it is
//! printed.

use std::sync::Mutex;

/// What a hidden password is shown as.
const HIDDEN: &str = "***";

/// Parameter names that carry a secret, in URLs and key/value strings alike.
const SECRET_KEYS: [&str; 2] = ["password", "sslpassword"];

/// Every password seen in this process, raw and percent-decoded.
static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// The URL or connection string with every password replaced, safe to print.
/// Also remembers the passwords, so that [`scrub`] can find them in errors.
pub fn redact(target: &str) -> String {
    let (shown, found) = if target.contains("://") {
        redact_url(target)
    } else {
        redact_key_values(target)
    };
    remember(found);
    shown
}

/// Removes every remembered password from `text`, every remembered
/// header value where it stands as a whole token, and every value read
/// from a variable ([`hide_variable`]) in any form it can come back in.
pub fn scrub(text: &str) -> String {
    let mut text = hide_variables(text);
    let seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    for secret in seen.iter() {
        text = text.replace(secret.as_str(), HIDDEN);
    }
    drop(seen);
    let tokens = TOKENS.lock().unwrap_or_else(|e| e.into_inner());
    for token in tokens.iter() {
        text = replace_whole(&text, token);
    }
    text
}

/// Every header value given on the command line (and the credential after
/// an `Authorization` scheme), hidden only where it stands whole: a short
/// value such as `12` must not garble `127.0.0.1:8012` in an error.
static TOKENS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Header values shorter than this are not hidden: too short to be a secret,
/// too likely to stand in unrelated text.
const MIN_TOKEN_CHARS: usize = 4;

/// Remembers a header's value, so that [`scrub`] hides it wherever it stands
/// as a whole token; for `Scheme credential` values, the credential too.
pub fn hide_header_value(value: &str) {
    let value = value.trim();
    let mut tokens = TOKENS.lock().unwrap_or_else(|e| e.into_inner());
    let credential = value.split_once(' ').map(|(_, c)| c.trim());
    for token in std::iter::once(value).chain(credential) {
        if token.chars().count() >= MIN_TOKEN_CHARS && !tokens.iter().any(|t| t == token) {
            tokens.push(token.to_owned());
        }
    }
    tokens.sort_by_key(|t| std::cmp::Reverse(t.len()));
}

/// Characters that continue a token (base64 and URL-safe alphabets; not
/// `.`, which more often ends a sentence than a token).
fn continues_token(c: char) -> bool {
    c.is_alphanumeric() || "-_~+/=".contains(c)
}

/// Whether the characters beside a match (nearest first) continue it: a
/// token character, or a `.` with a letter or digit beyond it (`127.0.0.1`
/// continues past `0.0.1`; a sentence's last full stop does not).
fn touches(beside: &mut impl Iterator<Item = char>) -> bool {
    match beside.next() {
        Some('.') => beside.next().is_some_and(char::is_alphanumeric),
        Some(c) => continues_token(c),
        None => false,
    }
}

/// `text` with each occurrence of `token` that no token character touches
/// on either side replaced by the hidden mark.
fn replace_whole(text: &str, token: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(token) {
        let mut before = rest[..at].chars().rev();
        let mut after = rest[at + token.len()..].chars();
        out.push_str(&rest[..at]);
        if touches(&mut before) || touches(&mut after) {
            out.push_str(token);
        } else {
            out.push_str(HIDDEN);
        }
        rest = &rest[at + token.len()..];
    }
    out.push_str(rest);
    out
}

/// Values read from the environment for a `${VAR}` (a probe plan's), each
/// with the forms it can come back in and the `${VAR}` shown in its place.
static VARIABLES: Mutex<Vec<Hidden>> = Mutex::new(Vec::new());

/// One form of a variable's value: matched whatever its letters' case
/// (a server folds a name it did not find to lower case); `whole` forms
/// (a URL's user, host or database) only where they stand as a token.
struct Hidden {
    form: String,
    whole: bool,
    name: String,
}

/// Remembers `value`, read from the environment as `name` (`${API_KEY}`),
/// so that [`hide_variables`] and [`scrub`] show `name` wherever the value
/// comes back: as it is, JSON- or backslash-escaped, with its quotes
/// doubled as SQL writes them, percent-encoded, or, for a URL, with its
/// password hidden, and its user, host and database each where it stands
/// as a token (when at least four characters long).
pub fn hide_variable(value: &str, name: &str) {
    if value.is_empty() {
        return;
    }
    let mut forms: Vec<(String, bool)> = vec![
        (value.to_owned(), false),
        (json_inner(value), false),
        (value.replace('\\', "\\\\"), false),
        (value.replace('\'', "''"), false),
        (value.replace('"', "\"\""), false),
        (percent_encode(value), false),
        (crate::controls::escaped(value).into_owned(), false),
        (xml_escaped(value), false),
    ];
    if value.contains("://") {
        let (shown, _) = redact_url(value);
        forms.push((shown, false));
        forms.extend(url_parts(value).into_iter().map(|part| (part, true)));
    }
    let mut hidden = VARIABLES.lock().unwrap_or_else(|e| e.into_inner());
    for (form, whole) in forms {
        let short = whole && form.chars().count() < MIN_TOKEN_CHARS;
        if short || form.is_empty() || hidden.iter().any(|h| h.form == form) {
            continue;
        }
        hidden.push(Hidden {
            form,
            whole,
            name: name.to_owned(),
        });
    }
    // Longest first, so that a value that contains another goes whole.
    hidden.sort_by_key(|h| std::cmp::Reverse(h.form.chars().count()));
}

/// `text` with every remembered variable's value, in each of its forms and
/// whatever its case, shown as its `${VAR}`.
pub fn hide_variables(text: &str) -> String {
    let hidden = VARIABLES.lock().unwrap_or_else(|e| e.into_inner());
    hidden.iter().fold(text.to_owned(), |text, h| {
        replace_caseless(&text, &h.form, &h.name, h.whole)
    })
}

/// A string's JSON text without its quotes.
fn json_inner(value: &str) -> String {
    let quoted = serde_json::to_string(value).unwrap_or_default();
    quoted
        .strip_prefix('"')
        .and_then(|q| q.strip_suffix('"'))
        .unwrap_or(value)
        .to_owned()
}

/// A string as XML text writes it (a JUnit report's attributes).
fn xml_escaped(value: &str) -> String {
    value
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

/// Every byte but the unreserved ones written `%XX`.
fn percent_encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A URL's user, host and database (its path), percent-decoded.
fn url_parts(value: &str) -> Vec<String> {
    let Ok(url) = url::Url::parse(value) else {
        return Vec::new();
    };
    let path = url.path().trim_start_matches('/').to_owned();
    [
        url.username().to_owned(),
        url.host_str().unwrap_or_default().to_owned(),
        path,
    ]
    .into_iter()
    .map(|part| percent_decode(&part))
    .filter(|part| !part.is_empty())
    .collect()
}

/// `text` with `form` replaced by `name` wherever it stands, compared
/// letter by letter without case; with `whole`, only where no token
/// character touches it.
fn replace_caseless(text: &str, form: &str, name: &str, whole: bool) -> String {
    let wanted: Vec<char> = form.chars().collect();
    let same = |a: char, b: char| a == b || a.to_lowercase().eq(b.to_lowercase());
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while at < text.len() {
        let rest = &text[at..];
        let mut chars = rest.char_indices();
        let matched = wanted
            .iter()
            .all(|w| chars.next().is_some_and(|(_, c)| same(c, *w)));
        let len = match (matched, chars.next()) {
            (true, Some((end, _))) => Some(end),
            (true, None) => Some(rest.len()),
            _ => None,
        };
        let standalone = |len: usize| {
            !whole || !(touches(&mut text[..at].chars().rev()) || touches(&mut rest[len..].chars()))
        };
        match len {
            Some(len) if standalone(len) => {
                out.push_str(name);
                at += len;
            }
            _ => {
                let c = rest.chars().next().unwrap_or_default();
                out.push(c);
                at += c.len_utf8();
            }
        }
    }
    out
}

fn remember(found: Vec<String>) {
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    for secret in found {
        // A one-character password would scrub every such letter from the
        // text; it is still hidden in URLs, where its place is known.
        if secret.chars().count() < 2 {
            continue;
        }
        let decoded = percent_decode(&secret);
        for s in [secret, decoded] {
            if !seen.contains(&s) {
                seen.push(s);
            }
        }
    }
    // Longest first, so a password that contains another is replaced whole.
    seen.sort_by_key(|s| std::cmp::Reverse(s.len()));
}

/// `scheme://[user[:password]@]host[/db][?k=v&...][#...]`
fn redact_url(url: &str) -> (String, Vec<String>) {
    let mut found = Vec::new();
    let (scheme, rest) = url.split_once("://").expect("checked by the caller");
    let (rest, fragment) = match rest.split_once('#') {
        Some((rest, fragment)) => (rest, Some(fragment)),
        None => (rest, None),
    };
    let (before_query, query) = match rest.split_once('?') {
        Some((before, query)) => (before, Some(query)),
        None => (rest, None),
    };
    let (authority, path) =
        before_query.split_at(before_query.find('/').unwrap_or(before_query.len()));
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, password)) => {
                found.push(password.to_string());
                format!("{user}:{HIDDEN}@{host}")
            }
            None => authority.to_string(),
        },
        None => authority.to_string(),
    };
    let mut shown = format!("{scheme}://{authority}{path}");
    if let Some(query) = query {
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, value)) if is_secret_key(&percent_decode(key)) => {
                    found.push(value.to_string());
                    format!("{key}={HIDDEN}")
                }
                _ => pair.to_string(),
            })
            .collect();
        shown.push('?');
        shown.push_str(&pairs.join("&"));
    }
    if let Some(fragment) = fragment {
        shown.push('#');
        shown.push_str(fragment);
    }
    (shown, found)
}

/// `key=value key = 'quoted \' value' ...`, as libpq reads it.
fn redact_key_values(text: &str) -> (String, Vec<String>) {
    let mut found = Vec::new();
    let mut shown = String::new();
    let mut chars = text.char_indices().peekable();
    while let Some(&(_, c)) = chars.peek() {
        if c.is_whitespace() {
            shown.push(c);
            chars.next();
            continue;
        }
        // The key, up to '=' or white space.
        let mut key = String::new();
        while let Some(&(_, c)) = chars.peek() {
            if c == '=' || c.is_whitespace() {
                break;
            }
            key.push(c);
            chars.next();
        }
        let mut between = String::new();
        while let Some(&(_, c)) = chars.peek() {
            if c != '=' && !c.is_whitespace() {
                break;
            }
            between.push(c);
            chars.next();
            if c == '=' {
                while let Some(&(_, c)) = chars.peek() {
                    if !c.is_whitespace() {
                        break;
                    }
                    between.push(c);
                    chars.next();
                }
                break;
            }
        }
        if !between.contains('=') {
            // Not a key=value pair: keep the text as it was.
            shown.push_str(&key);
            shown.push_str(&between);
            continue;
        }
        let value_start = chars.peek().map_or(text.len(), |&(i, _)| i);
        let mut value = String::new();
        if chars.peek().is_some_and(|&(_, c)| c == '\'') {
            chars.next();
            while let Some((_, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, next)) = chars.next() {
                            value.push(next);
                        }
                    }
                    '\'' => break,
                    c => value.push(c),
                }
            }
        } else {
            while let Some(&(_, c)) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                value.push(c);
                chars.next();
            }
        }
        let value_end = chars.peek().map_or(text.len(), |&(i, _)| i);
        shown.push_str(&key);
        shown.push_str(&between);
        if is_secret_key(&key) {
            found.push(value);
            shown.push_str(HIDDEN);
        } else {
            shown.push_str(&text[value_start..value_end]);
        }
    }
    (shown, found)
}

fn is_secret_key(key: &str) -> bool {
    SECRET_KEYS.contains(&key.to_ascii_lowercase().as_str())
}

/// `%2F` and the like decoded (a URL's user-info or query part).
pub fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(hi), Some(lo)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((hi * 16 + lo) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::{hide_header_value, redact, scrub};

    #[test]
    fn header_values_are_hidden_only_where_they_stand_whole() {
        hide_header_value("Bearer tok-3141592653");
        hide_header_value("12");
        hide_header_value("8001x");
        assert_eq!(
            scrub("sent Bearer tok-3141592653 to 127.0.0.1:8001 (12 ms)"),
            "sent *** to 127.0.0.1:8001 (12 ms)"
        );
        assert_eq!(scrub("token tok-3141592653."), "token ***.");
        assert_eq!(scrub("port 8001xy"), "port 8001xy");
        hide_header_value("0.0.1");
        assert_eq!(scrub("to 127.0.0.1:80"), "to 127.0.0.1:80");
    }

    #[test]
    fn every_place_a_password_can_hide_is_hidden() {
        let cases = [
            ("postgres://u:s3cret@h/db", "postgres://u:***@h/db"),
            ("postgres://u:s3cret@h", "postgres://u:***@h"),
            (
                "postgres://u@h/db?password=s3cret",
                "postgres://u@h/db?password=***",
            ),
            (
                "postgresql://h/db?user=u&password=s3cret&sslmode=disable",
                "postgresql://h/db?user=u&password=***&sslmode=disable",
            ),
            (
                "postgres://h/db?pass%77ord=s3cret",
                "postgres://h/db?pass%77ord=***",
            ),
            (
                "postgres://h/db?sslpassword=s3cret",
                "postgres://h/db?sslpassword=***",
            ),
            (
                "postgres://u@h/db?PASSWORD=s3cret#x",
                "postgres://u@h/db?PASSWORD=***#x",
            ),
            (
                "host=h password=s3cret dbname=d",
                "host=h password=*** dbname=d",
            ),
            (
                "host=h password = 's3 cret' user=u",
                "host=h password = *** user=u",
            ),
            (
                "host=h password='it\\'s' user=u",
                "host=h password=*** user=u",
            ),
            ("postgres://u@h/db", "postgres://u@h/db"),
        ];
        for (given, shown) in cases {
            assert_eq!(redact(given), shown, "{given}");
        }
    }

    #[test]
    fn a_variable_is_hidden_in_every_form_it_comes_back_in() {
        super::hide_variable("Tenant_Secret", "${TABLE}");
        super::hide_variable("O'Brien \"x\"", "${QUOTED}");
        super::hide_variable(
            "postgres://alice:pw9@db.example:5432/payments_live",
            "${URL}",
        );
        for (text, want) in [
            (
                "relation \"tenant_secret\" does not exist",
                "relation \"${TABLE}\" does not exist",
            ),
            ("TENANT_SECRET", "${TABLE}"),
            ("'O''Brien \"x\"'", "'${QUOTED}'"),
            ("{\"key\":\"O'Brien \\\"x\\\"\"}", "{\"key\":\"${QUOTED}\"}"),
            ("O%27Brien%20%22x%22", "${QUOTED}"),
            (
                "postgres://alice:***@db.example:5432/payments_live",
                "${URL}",
            ),
            (
                "database \"payments_live\" does not exist",
                "database \"${URL}\" does not exist",
            ),
            (
                "could not reach db.example: refused",
                "could not reach ${URL}: refused",
            ),
            // A part stands whole only: not inside a longer name.
            ("payments_livestock", "payments_livestock"),
        ] {
            assert_eq!(scrub(text), want, "{text}");
        }
    }

    #[test]
    fn remembered_passwords_are_scrubbed_from_any_text() {
        redact("postgres://u@h/db?password=hunter%32two");
        let text = "could not parse 'hunter2two' nor 'hunter%32two'";
        assert_eq!(scrub(text), "could not parse '***' nor '***'");
        redact("host=h password='sp ace'");
        assert_eq!(scrub("got sp ace"), "got ***");
    }
}
