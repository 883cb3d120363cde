//! `idem probe --runs R`: R bursts, a fresh key each, and what they came to: in how many bursts the guard let duplicates through, how many effects each burst made, every status over all bursts, and how tight the releases were.
//!
//! One burst that holds says little about a race: a window of a tenth of a
//! millisecond is missed as often as it is hit. The rate over many bursts
//! is the figure, as `idem race --runs` gives it for the lessons.

use std::collections::BTreeMap;

use serde::Serialize;

use super::ProbeResult;
use super::release::Mode;

/// What R bursts came to; `--json` prints it after the bursts' own lines.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Bursts {
    /// Marks this line of `--json` as the summary.
    pub summary: bool,
    pub bursts: usize,
    pub requests_per_burst: usize,
    /// Bursts with more than one effect (or, uncounted, a sign of it).
    pub with_duplicates: usize,
    /// Bursts that made exactly one effect.
    pub held: usize,
    /// Judged bursts that made no effect, or whose statuses alone said nothing.
    pub undecided: usize,
    /// Bursts that were not judged: no race (fewer requests sent or
    /// answered than asked) or answers the probe cannot read.
    pub unjudged: usize,
    /// Effects per burst → how many bursts made that many (when counted).
    pub effects: BTreeMap<i64, usize>,
    /// Every status over all bursts (`none` for no answer).
    pub statuses: BTreeMap<String, u64>,
    /// How the bursts were released (the last burst's mode).
    pub mode: Option<Mode>,
    /// The median and the largest client-side spread of the final writes, µs.
    pub spread_us_median: f64,
    pub spread_us_max: f64,
}

impl Bursts {
    pub fn new(requests_per_burst: usize) -> Self {
        Self {
            summary: true,
            requests_per_burst,
            ..Self::default()
        }
    }

    /// Adds one burst; `spreads` keeps every burst's spread for the median.
    pub fn add(&mut self, burst: &ProbeResult, spreads: &mut Vec<f64>) {
        self.bursts += 1;
        match burst.verdict.held {
            Some(false) => self.with_duplicates += 1,
            Some(true) => self.held += 1,
            None if !burst.verdict.judged => self.unjudged += 1,
            None => self.undecided += 1,
        }
        if let Some(effects) = burst.effects {
            *self.effects.entry(effects.effects).or_default() += 1;
        }
        for (status, n) in &burst.statuses {
            *self.statuses.entry(status.clone()).or_default() += n;
        }
        self.mode = Some(burst.release.mode);
        spreads.push(burst.release.spread_us);
        spreads.sort_by(f64::total_cmp);
        self.spread_us_median = spreads[spreads.len() / 2];
        self.spread_us_max = spreads.last().copied().unwrap_or_default();
    }

    /// `duplicates in 37 of 50 bursts`; bursts that were not judged are
    /// counted apart (`duplicates in 2 of 17 judged bursts (judged 17 of 20)`).
    pub fn rate(&self) -> String {
        match self.unjudged {
            0 => format!(
                "duplicates in {} of {} bursts",
                self.with_duplicates, self.bursts
            ),
            unjudged => {
                let judged = self.bursts - unjudged;
                format!(
                    "duplicates in {} of {judged} judged bursts (judged {judged} of {})",
                    self.with_duplicates, self.bursts
                )
            }
        }
    }
}
