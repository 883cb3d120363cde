//! The statements both reference clients send: pgbench from its script text, idem's bare loop through tokio-postgres.
//!
//! A script is the same statements either way, with the same ids carried
//! from one to the next. Sent bare (prepared once per connection, nothing
//! of idem's around them) they are the floor idem's own code is held
//! against; sent by pgbench they are the floor tokio-postgres is held
//! against.

use serde_json::json;
use tokio_postgres::types::Type;
use tokio_postgres::{Client, Statement};

use crate::db::statements::{Sends, Sql};

use crate::strategy::claims::{CLAIM, COMPLETE};
use crate::strategy::{OPERATION, work::AWARD};

/// insert-unique's one statement, the raw floor.
pub static RAW_INSERT: Sql = Sql::new(
    "INSERT INTO experience_points (user_id, amount, lesson, idempotency_key, worker)
     VALUES ($1, 10, 1, $2, $3) ON CONFLICT (idempotency_key) DO NOTHING",
    &[Type::INT8, Type::TEXT, Type::INT4],
);

static RAW_STATEMENTS: [&Sql; 1] = [&RAW_INSERT];
static CLAIM_WORK_COMPLETE_STATEMENTS: [&Sql; 3] = [&CLAIM, &AWARD, &COMPLETE];

/// pgbench's raw floor: the same statement.
const RAW_PGBENCH: &str = "\\set k random(1, 1000000000000)
INSERT INTO experience_points (user_id, amount, lesson, idempotency_key, worker)
  VALUES (:k, 10, 1, 'k' || :k, 1) ON CONFLICT (idempotency_key) DO NOTHING;
";

/// pgbench's claim-work-complete: its three statements, the claim's id and
/// the XP row's id carried from one to the next (`\\gset`).
const CLAIM_WORK_COMPLETE_PGBENCH: &str = "\\set k random(1, 1000000000000)
INSERT INTO idempotency_keys (key, operation, status, request_fingerprint, worker, locked_at)
  VALUES ('k' || :k, 'award_xp', 'pending', 'fingerprint', 1, now())
  ON CONFLICT (key) DO NOTHING RETURNING id AS claim \\gset
INSERT INTO experience_points (user_id, amount, lesson, worker)
  VALUES (:k, 10, 1, 1) RETURNING id AS xp \\gset
UPDATE idempotency_keys SET status = 'completed', response_code = 201,
  response_body = jsonb_build_object('xp_id', (:xp)::bigint, 'amount', 10), completed_at = now()
  WHERE id = (:claim)::bigint;
";

/// A reference client's statements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Script {
    /// insert-unique's one statement.
    Raw,
    /// claim-work-complete's three: claim, award, complete.
    ClaimWorkComplete,
}

impl Script {
    pub fn name(self) -> &'static str {
        match self {
            Script::Raw => "raw",
            Script::ClaimWorkComplete => "claim-work-complete",
        }
    }

    /// The script as pgbench reads it.
    pub fn pgbench_text(self) -> &'static str {
        match self {
            Script::Raw => RAW_PGBENCH,
            Script::ClaimWorkComplete => CLAIM_WORK_COMPLETE_PGBENCH,
        }
    }

    /// The statements as idem's strategies write them, in the order sent.
    fn statements(self) -> &'static [&'static Sql] {
        match self {
            Script::Raw => &RAW_STATEMENTS,
            Script::ClaimWorkComplete => &CLAIM_WORK_COMPLETE_STATEMENTS,
        }
    }

    /// Prepares the script's statements on `client`, once per connection
    /// (by name, as pgbench's `-M prepared` does: the floor is the server's
    /// cheapest path).
    pub async fn prepare(self, client: &impl Sends) -> Result<Prepared, tokio_postgres::Error> {
        let mut statements = Vec::new();
        for sql in self.statements() {
            statements.push(client.client().prepare(&client.text(sql)).await?);
        }
        Ok(Prepared {
            script: self,
            statements,
        })
    }
}

/// A script's statements, prepared on one connection.
pub struct Prepared {
    script: Script,
    statements: Vec<Statement>,
}

impl Prepared {
    /// Sends request `i` of `worker`: key `k{i}` (written into `key`, a
    /// buffer reused from request to request). Returns the statements sent.
    pub async fn send(
        &self,
        client: &Client,
        i: usize,
        worker: i32,
        key: &mut String,
    ) -> Result<u32, tokio_postgres::Error> {
        key.clear();
        let _ = std::fmt::Write::write_fmt(key, format_args!("k{i}"));
        let user = i as i64;
        match (self.script, self.statements.as_slice()) {
            (Script::Raw, [insert]) => {
                client.execute(insert, &[&user, &*key, &worker]).await?;
            }
            (Script::ClaimWorkComplete, [claim, award, complete]) => {
                // The fingerprint as pgbench sends it: a constant.
                let won = client
                    .query_opt(claim, &[&*key, &OPERATION, &"fingerprint", &worker])
                    .await?;
                let xp: i64 = client
                    .query_one(award, &[&user, &10i32, &1i32, &worker])
                    .await?
                    .get(0);
                // Keys are never repeated here, so the claim is always won.
                let Some(won) = won else { return Ok(2) };
                let claim_id: i64 = won.get(0);
                let body = json!({ "xp_id": xp, "amount": 10 });
                client
                    .execute(complete, &[&claim_id, &201i32, &body])
                    .await?;
            }
            _ => unreachable!("a script's statements are prepared from its own list"),
        }
        Ok(self.statements.len() as u32)
    }
}
