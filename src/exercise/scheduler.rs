//! Lesson 1's exercise: be the scheduler. The learner writes two orders of two check-then-store requests' steps, one that makes two XP rows and one that makes one, and each is replayed on the real database, step by step.

use std::path::Path;

use anyhow::Result;
use serde::Deserialize;

use crate::db::Database;
use crate::probe::conformance::Check;
use crate::race::moves::{Move, joined};
use crate::race::options::RaceInput;
use crate::race::stepper::Controller;
use crate::race::{Race, xp_rows};
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
    Ok(Check::judged(
        case,
        demands,
        r.xp_rows == want,
        format!("{}: {}", joined(order), xp_rows(r.xp_rows)),
    ))
}
