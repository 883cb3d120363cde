//! Reading a guard file: TOML in, a checked [`GuardFile`] out, every error one line naming the file's line.

use std::collections::BTreeMap;

use anyhow::{Result, anyhow, bail};
use serde::Deserialize;
use toml::Spanned;

use super::file::{Dialect, GuardFile, RefusedCommit, Shape, Statement, StepName};
use super::named::{Style, positional, written};
use crate::db::statements::Sql;
use crate::files::{line_at, parse_toml};
use crate::strategy::transaction::{Isolation, Transaction};

/// The file as TOML says it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    shape: Shape,
    #[serde(default)]
    engine: Dialect,
    #[serde(default)]
    fingerprint: bool,
    transaction: Option<Transaction>,
    isolation: Option<Isolation>,
    synchronous: Option<String>,
    #[serde(default)]
    sync_wait: bool,
    refused_commit: Option<RefusedCommit>,
    steps: BTreeMap<Spanned<String>, Spanned<String>>,
}

/// What a file's `synchronous` may say: the workers' commits wait for the
/// primary alone, or for a standby to apply them (lesson 10).
pub const SYNCHRONOUS: [&str; 2] = ["off", "remote_apply"];

/// The steps a file for MariaDB may not give yet.
const NOT_ON_MARIADB: [StepName; 1] = [StepName::Fingerprint];

/// The statements a step may be: one that reads or writes rows.
const KEYWORDS: [&str; 5] = ["select", "insert", "update", "delete", "with"];

/// Reads `text`, the guard file `name`.
pub fn parse(name: &str, text: &str) -> Result<GuardFile> {
    let raw: Raw = parse_toml(name, text)?;
    let (required, optional) = raw.shape.steps();
    let mut statements = Vec::new();
    for (step_name, sql) in &raw.steps {
        let line = line_at(text, step_name.span().start);
        let Some(step) = StepName::named(step_name.get_ref())
            .filter(|s| required.contains(s) || optional.contains(s))
        else {
            let known: Vec<&str> = required.iter().chain(optional).map(|s| s.name()).collect();
            bail!(
                "{name} line {line}: {} has no step {:?}; its steps are {}",
                raw.shape.name(),
                step_name.get_ref(),
                known.join(", ")
            );
        };
        if raw.engine == Dialect::Mariadb && NOT_ON_MARIADB.contains(&step) {
            bail!(
                "{name} line {line}: step {} is not run on MariaDB yet (a file's own \
                 fingerprint is PostgreSQL's so far; idem's is used there)",
                step.name()
            );
        }
        statements.push(statement(name, text, step, sql, raw.engine)?);
    }
    engines_own(name, &raw)?;
    if let Some(missing) = required.iter().find(|s| !raw.steps.contains_key(s.name())) {
        bail!(
            "{name}: {} needs a {} step under [steps]",
            raw.shape.name(),
            missing.name()
        );
    }
    if raw.isolation.is_some() && raw.transaction == Some(Transaction::None) {
        bail!(
            "{name}: isolation sets the request transaction's level; transaction = \"none\" has none"
        );
    }
    if let Some(said) = raw.synchronous.as_deref()
        && !SYNCHRONOUS.contains(&said)
    {
        bail!(
            "{name}: synchronous is \"off\" or \"remote_apply\", not {:?}",
            crate::controls::escaped(said)
        );
    }
    Ok(GuardFile {
        name: name.to_string(),
        source: text.to_string(),
        shape: raw.shape,
        engine: raw.engine,
        fingerprint: raw.fingerprint || raw.steps.contains_key(StepName::Fingerprint.name()),
        transaction: raw.transaction,
        isolation: raw.isolation,
        synchronous: raw.synchronous,
        sync_wait: raw.sync_wait,
        refused_commit: raw.refused_commit.unwrap_or_default(),
        statements,
    })
}

/// Refuses a key of one engine's in a file for the other.
fn engines_own(name: &str, raw: &Raw) -> Result<()> {
    if raw.sync_wait && raw.engine != Dialect::Mariadb {
        bail!(
            "{name}: sync_wait asks a Galera cluster's nodes for causal reads; it needs \
             engine = \"mariadb\" (on PostgreSQL, synchronous waits for a standby)"
        );
    }
    if raw.refused_commit.is_some() && raw.engine != Dialect::Mariadb {
        bail!(
            "{name}: refused_commit answers a Galera cluster's refused COMMIT (1213); it \
             needs engine = \"mariadb\""
        );
    }
    if raw.engine == Dialect::Mariadb && raw.synchronous.is_some() {
        bail!("{name}: synchronous waits for a PostgreSQL standby; MariaDB has none here");
    }
    Ok(())
}

/// One step's statement, checked and given positional parameters.
fn statement(
    name: &str,
    text: &str,
    step: StepName,
    sql: &Spanned<String>,
    engine: Dialect,
) -> Result<Statement> {
    let start = content_start(text, sql.span().start);
    let body = sql.get_ref();
    let lead = body.len() - body.trim_start().len();
    let line = line_at(text, start + lead);
    let at = |offset: usize| line_at(text, start + offset);
    let first = first_word(body);
    if first.is_empty() {
        bail!("{name} line {line}: step {} is empty", step.name());
    }
    if !KEYWORDS.contains(&first.to_ascii_lowercase().as_str()) {
        bail!(
            "{name} line {line}: step {} must be one SELECT, INSERT, UPDATE, DELETE or WITH \
             statement, not {first}",
            step.name()
        );
    }
    let said = body.trim_end().trim_end_matches(';');
    let misnamed = |e: super::named::Misnamed| {
        anyhow!(
            "{name} line {}: step {}: {}",
            at(e.at),
            step.name(),
            e.message
        )
    };
    let positional = positional(said, step.params()).map_err(misnamed)?;
    let on_mariadb = match engine {
        Dialect::Postgres => None,
        Dialect::Mariadb => {
            let q = written(said, step.params(), Style::Question).map_err(misnamed)?;
            Some((&*Box::leak(q.text.into_boxed_str()), q.params))
        }
    };
    let types: Vec<_> = positional.params.iter().map(|p| p.ty()).collect();
    Ok(Statement {
        step,
        written: Box::leak(body.trim().to_string().into_boxed_str()),
        sql: Sql::new(
            Box::leak(positional.text.into_boxed_str()),
            Box::leak(types.into_boxed_slice()),
        ),
        params: positional.params,
        on_mariadb,
        line,
    })
}

/// The first word of a statement, past whitespace and comments.
fn first_word(sql: &str) -> &str {
    let mut rest = sql.trim_start();
    loop {
        if let Some(after) = rest.strip_prefix("--") {
            rest = after.find('\n').map_or("", |i| &after[i..]).trim_start();
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after
                .find("*/")
                .map_or("", |i| &after[i + 2..])
                .trim_start();
        } else {
            break;
        }
    }
    let end = rest
        .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .unwrap_or(rest.len());
    &rest[..end]
}

/// Where a TOML string's text begins, from where its value begins: past
/// the quotes, and past the newline a multi-line string drops.
fn content_start(text: &str, value: usize) -> usize {
    let raw = &text[value.min(text.len())..];
    let open = if raw.starts_with("'''") || raw.starts_with("\"\"\"") {
        3
    } else {
        1
    };
    let after = &raw[open.min(raw.len())..];
    let newline = if after.starts_with("\r\n") {
        2
    } else {
        usize::from(after.starts_with('\n'))
    };
    value + open + newline
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::guard_file::Param;

    const CLAIM: &str = r#"# a guard
shape = "claim-work-complete"

[steps]
claim = '''
INSERT INTO idempotency_keys (key, operation, status, worker)
VALUES ($key, $operation, 'pending', $worker)
ON CONFLICT (key) DO NOTHING RETURNING id
'''
replay = "SELECT status, response_body FROM idempotency_keys WHERE key = $key"
complete = '''
UPDATE idempotency_keys SET status = 'completed', response_body = $response
WHERE id = $claim_id
'''
"#;

    #[test]
    fn a_claim_file_reads_into_three_statements_with_their_lines() {
        let file = parse("g.toml", CLAIM).unwrap();
        assert_eq!(file.shape, Shape::ClaimWorkComplete);
        let claim = file.statement(StepName::Claim).unwrap();
        assert_eq!(claim.line, 6);
        assert!(claim.sql.text.contains("VALUES ($1, $2, 'pending', $3)"));
        assert_eq!(file.statement(StepName::Replay).unwrap().line, 10);
        assert_eq!(file.statement(StepName::Complete).unwrap().line, 12);
        assert_eq!(file.place(claim), "g.toml line 6, step claim");
    }

    fn refused(text: &str) -> String {
        parse("g.toml", text).unwrap_err().to_string()
    }

    #[test]
    fn what_is_wrong_is_said_in_one_line_naming_the_line() {
        let bad_toml = CLAIM.replace("[steps]", "[steps");
        assert!(
            refused(&bad_toml).starts_with("g.toml line 4: "),
            "{}",
            refused(&bad_toml)
        );
        let unknown_step = CLAIM.replace("replay =", "reply =");
        assert_eq!(
            refused(&unknown_step),
            "g.toml line 10: claim-work-complete has no step \"reply\"; its steps are claim, replay, complete, release, fingerprint, renew"
        );
        let unknown_param = CLAIM.replace("WHERE id = $claim_id", "WHERE id = $claim");
        assert!(
            refused(&unknown_param)
                .starts_with("g.toml line 13: step complete: $claim is not a parameter idem gives"),
            "{}",
            refused(&unknown_param)
        );
        let early = CLAIM.replace("'pending', $worker)", "'pending', $xp_id)");
        assert!(refused(&early).starts_with("g.toml line 7: step claim: $xp_id is not known"));
        let drop = CLAIM.replace("replay = \"SELECT", "replay = \"DROP TABLE users; SELECT");
        assert_eq!(
            refused(&drop),
            "g.toml line 10: step replay must be one SELECT, INSERT, UPDATE, DELETE or WITH statement, not DROP"
        );
        let missing = CLAIM.replace("replay =", "# replay =");
        assert_eq!(
            refused(&missing),
            "g.toml: claim-work-complete needs a replay step under [steps]"
        );
        let extra = CLAIM.replace("shape =", "colour = 1\nshape =");
        assert!(refused(&extra).starts_with("g.toml line 2: unknown field `colour`"));
        for text in [bad_toml, unknown_step, unknown_param, drop, missing, extra] {
            assert!(!refused(&text).contains('\n'), "{}", refused(&text));
        }
    }

    #[test]
    fn a_fingerprint_step_names_only_what_the_request_asks_and_turns_checking_on() {
        let step = "fingerprint = \"SELECT md5(concat_ws('|', $user_id, $amount, $lesson))\"\n";
        let file = parse(
            "g.toml",
            &CLAIM.replace("[steps]\n", &format!("[steps]\n{step}")),
        )
        .unwrap();
        assert!(file.fingerprint, "a file's own fingerprint is compared");
        let own = file.statement(StepName::Fingerprint).unwrap();
        assert_eq!(own.params, [Param::UserId, Param::Amount, Param::Lesson]);
        for name in ["$fingerprint", "$key", "$worker"] {
            let text = CLAIM.replace(
                "[steps]\n",
                &format!("[steps]\nfingerprint = \"SELECT md5({name}::text)\"\n"),
            );
            let message = refused(&text);
            assert!(
                message.contains(&format!("{name} is not known at this step")),
                "{message}"
            );
        }
    }
}
