//! Every case `idem probe --conformance` runs, the IETF draft's and the failure classes real guards shipped in 2026 alike, as one list of specs: each case's names, what it needs, and its run.
//!
//! A case is a value in [`CASES`], run in the list's order, each on keys
//! of its own made from the probe's key. What it needs beyond the
//! endpoint (a second caller, a second endpoint, the sink) is declared,
//! and a case whose need is missing is not run: its verdicts are n/a,
//! saying what to give. A case returns its verdicts and what it saw of
//! the profile's points; the runner gathers both. Adding a case is its
//! function and one line here.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use anyhow::Result;
use bytes::Bytes;

use super::conformance::{self as draft, Check, Mark};
use super::failure_classes as classes;
use super::profile::Observed;
use super::{Caller, Counter, Probe};

pub mod names;

/// What a case may be run with, beside the endpoint itself.
pub struct Given<'a> {
    pub probe: &'a Probe,
    /// The key the cases' own keys are made from.
    pub key_base: &'a str,
    /// How many requests go at once where a case sends several.
    pub concurrent: usize,
    /// Another body than the probe's, for the cases that change it.
    pub other_body: &'a Bytes,
    /// When the in-flight cases send their second request, and in words.
    pub in_flight: &'a (Duration, String),
    /// How long the abort case retries.
    pub settle: Duration,
    pub other_caller: Option<&'a Caller>,
    pub other_endpoint: Option<&'a Probe>,
}

/// What a case needs that a probe may not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// A second identity (`--other-caller`).
    OtherCaller,
    /// A second endpoint (`--other-url`, or a plan's next endpoint).
    OtherEndpoint,
    /// The sink (`--sink`), to fail a call on purpose.
    Sink,
}

impl Need {
    fn met(self, g: &Given) -> bool {
        match self {
            Need::OtherCaller => g.other_caller.is_some(),
            Need::OtherEndpoint => g.other_endpoint.is_some(),
            Need::Sink => matches!(g.probe.counter, Some(Counter::Sink(_))),
        }
    }

    /// What to give for it, as an n/a verdict says.
    fn missing(self) -> &'static str {
        match self {
            Need::OtherCaller => {
                "no second caller: give --other-caller 'Authorization: ...' (the header that \
                 names another caller) to run it"
            }
            Need::OtherEndpoint => {
                "no second endpoint: give --other-url (a plan gives the next endpoint's)"
            }
            Need::Sink => "no sink: give --sink to observe it",
        }
    }
}

/// What one case gave: its verdicts, and what it saw of the profile.
#[derive(Debug, Default)]
pub struct Ran {
    checks: Vec<Check>,
    seen: Observed,
}

impl Ran {
    fn one(check: Check, seen: Observed) -> Self {
        Ran {
            checks: vec![check],
            seen,
        }
    }
}

/// A case's run, once started.
pub type Running<'a> = Pin<Box<dyn Future<Output = Result<Ran>> + 'a>>;

/// One case: the verdicts it gives, each its name and what it demands
/// (none for a case that only observes a point of the profile), what it
/// needs, and its run.
pub struct Case {
    verdicts: &'static [(&'static str, &'static str)],
    /// One of the four cases `idem challenge --url` judges an app with.
    pub(crate) in_challenge: bool,
    needs: &'static [Need],
    run: for<'a> fn(&'a Given<'a>) -> Running<'a>,
}

/// Every case, in the order they run.
pub const CASES: &[Case] = &[
    Case {
        verdicts: &[(names::MISSING_KEY, draft::MISSING_KEY_DEMANDS)],
        in_challenge: true,
        needs: &[],
        run: |g| {
            Box::pin(async move {
                let mut seen = Observed::default();
                let check = draft::missing_key(g.probe, &mut seen).await?;
                Ok(Ran::one(check, seen))
            })
        },
    },
    Case {
        verdicts: &[(names::OTHER_BODY, draft::OTHER_BODY_DEMANDS)],
        in_challenge: true,
        needs: &[],
        run: |g| {
            Box::pin(async move {
                let mut seen = Observed::default();
                let check = draft::reused_key(g.probe, g.key_base, g.other_body, &mut seen).await?;
                Ok(Ran::one(check, seen))
            })
        },
    },
    Case {
        verdicts: &[(names::CONCURRENT, draft::CONCURRENT_DEMANDS)],
        in_challenge: true,
        needs: &[],
        run: |g| {
            Box::pin(async move {
                let check = draft::at_once(g.probe, g.key_base, g.concurrent).await?;
                Ok(Ran::one(check, Observed::default()))
            })
        },
    },
    Case {
        verdicts: &[(names::RETRIED, draft::RETRIED_DEMANDS)],
        in_challenge: true,
        needs: &[],
        run: |g| {
            Box::pin(async move {
                let mut seen = Observed::default();
                let check = draft::retried(g.probe, g.key_base, &mut seen).await?;
                Ok(Ran::one(check, seen))
            })
        },
    },
    Case {
        verdicts: &[
            (names::IN_FLIGHT_SAME, draft::IN_FLIGHT_SAME_DEMANDS),
            (names::IN_FLIGHT_OTHER, draft::IN_FLIGHT_OTHER_DEMANDS),
        ],
        in_challenge: false,
        needs: &[],
        run: |g| {
            Box::pin(async move {
                let mut seen = Observed::default();
                let checks =
                    draft::in_flight(g.probe, g.key_base, g.other_body, g.in_flight, &mut seen)
                        .await?;
                Ok(Ran { checks, seen })
            })
        },
    },
    Case {
        verdicts: &[(names::AFTER_AN_ABORT, draft::AFTER_AN_ABORT)],
        in_challenge: false,
        needs: &[],
        run: |g| {
            Box::pin(async move {
                let check = draft::after_an_abort(g.probe, g.key_base, g.in_flight, g.settle);
                Ok(Ran::one(check.await?, Observed::default()))
            })
        },
    },
    Case {
        verdicts: &[(names::ANOTHER_CALLER, draft::ANOTHER_CALLER)],
        in_challenge: false,
        needs: &[Need::OtherCaller],
        run: |g| {
            Box::pin(async move {
                let Some(caller) = g.other_caller else {
                    return Ok(Ran::default());
                };
                let check = draft::another_caller(g.probe, g.key_base, caller).await?;
                Ok(Ran::one(check, Observed::default()))
            })
        },
    },
    Case {
        verdicts: &[(names::TWO_KEY_HEADERS, classes::TWO_KEYS)],
        in_challenge: false,
        needs: &[],
        run: |g| {
            Box::pin(async move {
                let check = classes::two_key_headers(g.probe, g.key_base).await?;
                Ok(Ran::one(check, Observed::default()))
            })
        },
    },
    Case {
        verdicts: &[(names::REPLAY_MARKER, classes::MARKER)],
        in_challenge: false,
        needs: &[],
        run: |g| {
            Box::pin(async move {
                let check = classes::replay_marker(g.probe, g.key_base).await?;
                Ok(Ran::one(check, Observed::default()))
            })
        },
    },
    Case {
        verdicts: &[(names::ANOTHER_QUERY, classes::QUERY)],
        in_challenge: false,
        needs: &[],
        run: |g| {
            Box::pin(async move {
                let check = classes::another_query(g.probe, g.key_base).await?;
                Ok(Ran::one(check, Observed::default()))
            })
        },
    },
    Case {
        verdicts: &[(names::ANOTHER_ENDPOINT, classes::ENDPOINT)],
        in_challenge: false,
        needs: &[Need::OtherEndpoint],
        run: |g| {
            Box::pin(async move {
                let Some(other) = g.other_endpoint else {
                    return Ok(Ran::default());
                };
                let check = classes::another_endpoint(g.probe, g.key_base, other).await?;
                Ok(Ran::one(check, Observed::default()))
            })
        },
    },
    Case {
        verdicts: &[(names::DISTINCT_KEYS, classes::PARALLEL)],
        in_challenge: false,
        needs: &[],
        run: |g| {
            Box::pin(async move {
                let check = classes::distinct_keys(g.probe, g.key_base, g.concurrent).await?;
                Ok(Ran::one(check, Observed::default()))
            })
        },
    },
    // Observed, never judged: the profile's "after a failed effect".
    Case {
        verdicts: &[],
        in_challenge: false,
        needs: &[Need::Sink],
        run: |g| {
            Box::pin(async move {
                let Some(Counter::Sink(sink)) = &g.probe.counter else {
                    return Ok(Ran::default());
                };
                let seen = Observed {
                    failure_replayed: classes::after_a_failed_effect(g.probe, g.key_base, sink)
                        .await,
                    ..Observed::default()
                };
                Ok(Ran {
                    checks: Vec::new(),
                    seen,
                })
            })
        },
    },
];

/// Runs every case of [`CASES`] that `which` takes, in turn: the
/// verdicts in order, and what they saw of the profile together. A case
/// whose need is missing is not run; each of its verdicts is n/a, saying
/// what to give.
pub async fn run(g: &Given<'_>, which: fn(&Case) -> bool) -> Result<(Vec<Check>, Observed)> {
    let (mut checks, mut seen) = (Vec::new(), Observed::default());
    for case in CASES.iter().filter(|c| which(c)) {
        if let Some(need) = case.needs.iter().find(|n| !n.met(g)) {
            let missing =
                |&(name, demands)| Check::not_applicable(name, demands, need.missing().into());
            checks.extend(case.verdicts.iter().map(missing));
            continue;
        }
        let mut ran = (case.run)(g).await?;
        // A failure names its key, so that it can be found in the API's logs.
        for check in ran.checks.iter_mut().filter(|c| c.mark == Mark::Fail) {
            if !check.saw.contains(g.key_base) {
                check.saw = format!("keys {}-…: {}", g.key_base, check.saw);
            }
        }
        checks.extend(ran.checks);
        seen.merge(ran.seen);
    }
    Ok((checks, seen))
}
