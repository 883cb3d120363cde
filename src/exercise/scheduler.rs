//! Lesson 1's exercise: be the scheduler. The learner writes two orders of two check-then-store requests' steps, one that makes two XP rows and one that makes one, and each is replayed on the real database, step by step.

use std::path::Path;

use anyhow::Result;
use serde::Deserialize;

use super::spec::Exercise;
use crate::db::Database;
use crate::probe::conformance::Check;
use crate::race::Race;
use crate::race::moves::{Move, joined};
use crate::race::options::RaceInput;
use crate::race::stepper::Controller;
use crate::race::told::{Counted, Fact, Told, tell};
use crate::strategy::StrategyKind;

/// The most an orders file may hold.
pub const MAX_ORDERS_FILE_BYTES: u64 = 16 * 1024;

/// The two requests the orders move.
const WORKERS: usize = 2;

/// The learner's two orders.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Orders {
    pub makes_two: Vec<Move>,
    pub makes_one: Vec<Move>,
}

impl Orders {
    /// The orders file at `path`.
    pub fn load(path: &Path) -> Result<Self> {
        let name = path.display().to_string();
        let text = crate::files::read_text(path, MAX_ORDERS_FILE_BYTES, "orders file")?;
        crate::files::parse_toml(&name, &text)
    }
}

/// Replays both orders, each from fresh tables.
pub async fn judge(db: &Database, path: &Path) -> Result<Vec<Check>> {
    let orders = Orders::load(path)?;
    Ok(vec![
        replayed(
            db,
            &orders.makes_two,
            2,
            "an order that makes two",
            "makes_two, replayed step by step, leaves 2 XP rows",
        )
        .await?,
        replayed(
            db,
            &orders.makes_one,
            1,
            "an order that makes one",
            "makes_one, replayed step by step, leaves 1 XP row",
        )
        .await?,
    ])
}

/// One order, replayed under check-then-store: PASS when it names every
/// step of both requests and leaves `want` XP rows.
async fn replayed(
    db: &Database,
    order: &[Move],
    want: u64,
    case: &'static str,
    demands: &'static str,
) -> Result<Check> {
    let refused = |saw: String| Ok(Check::judged(case, demands, false, saw));
    if let Some(m) = order
        .iter()
        .find(|m| !matches!(m, Move::Step(w) if (1..=WORKERS).contains(w)))
    {
        return refused(format!("{m} is not request 1 or 2"));
    }
    let input = RaceInput::default().with(|r| {
        r.strategy.strategy = Some(StrategyKind::CheckThenStore);
        r.shape.workers = Some(WORKERS as u64);
        r.app.work_ms = Some(0);
        r.shape.schedule = Some(order.to_vec());
    });
    let race = Race::prepare(db, input.build_stepped()?).await?;
    let mut whole = false;
    let run = race
        .run_stepped(async |c: &mut Controller| {
            c.follow(order, |_, _| Ok(())).await?;
            whole = c.all_finished();
            Ok(())
        })
        .await;
    let r = match run {
        Ok(r) => r,
        Err(why) => return refused(format!("{}: {why:#}", joined(order))),
    };
    if !whole {
        return refused(format!(
            "{} ends before both requests have answered: the rest would run by chance; \
             give every step",
            joined(order)
        ));
    }
    Ok(Check::judged(case, demands, r.xp_rows == want, {
        let mut told = Told::new();
        tell!(
            told,
            "{}: {}",
            joined(order),
            Counted(Fact::XpRows(r.xp_rows), "XP row")
        );
        told.finish(&r)
    }))
}

/// Lesson 1's exercise.
pub const EXERCISE: Exercise = Exercise {
    lesson: 1,
    file: "1-two-orders.toml",
    goal: "an order of two check-then-store requests' steps that makes two XP rows, and one that makes one",
    try_it: "idem step -s check-then-store --workers 2 --work-ms 0",
    start: include_str!("../../exercises/1-two-orders.toml"),
    solution: include_str!("../../exercises/solutions/1-two-orders.toml"),
    hints: [
        "A request works when its find sees no key. When does request 2's find see \
         request 1's key, and when does it not?",
        "Request 1's store is its fourth step, request 2's find its second. For two rows, \
         both finds must come before either store; for one, a store before the other's find.",
        "makes_two = [1, 1, 2, 2, 1, 1, 2, 2]: both check out and find, then both work and \
         store. makes_one = [1, 1, 1, 1, 2, 2]: request 1 is done before request 2 looks.",
    ],
    why: "Check-then-store is right in every order where one request's store comes \
          before the other's find, and wrong in every order where both finds come first. \
          A burst of five at once is almost always the second kind; the pool decides how \
          many requests can be in it.",
    read: |path| Orders::load(path).map(drop),
    judge: |db, path| Box::pin(judge(db, path)),
    engine: crate::race::engine::Engine::Postgres,
    mariadb: super::spec::OnMariadb::Left(
        "its idea is the order of two requests' steps, which no engine changes: its orders are replayed on PostgreSQL",
    ),
};
