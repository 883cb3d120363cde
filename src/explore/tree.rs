//! The tree of interleavings, walked depth first: each run replays a path's choices, then takes the first free worker at every new turn, and the next run backs up to the deepest turn with a worker not yet tried.
//!
//! This is how a stateless model checker walks a program it cannot
//! snapshot: the database cannot be forked at a turn, so every leaf is a
//! run from fresh tables that replays the path to it. Which workers are
//! free at a turn (paused before a step, not waiting on a lock, not
//! finished) is what the run saw there; a replay that sees otherwise is
//! reported, never glossed over.

use crate::race::moves::Move;

/// One turn of a run: the moves that could be made (a free worker's step,
/// and where the walk branches on them, a crash or the clock), and the
/// one that was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    pub free: Vec<Move>,
    pub moved: Move,
}

/// The walk: the path of the run in hand, turn by turn.
#[derive(Debug, Default)]
pub struct Walk {
    path: Vec<Turn>,
    /// How many turns of `path` the next run replays.
    replay: usize,
}

/// What a run is told at a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// Make this move.
    Make(Move),
    /// The replay expected other free workers here than the run saw.
    Diverged,
}

impl Walk {
    /// Which move is made at turn `at` (from 0), given the moves that can
    /// be: the path's on a replay, the first one past it.
    pub fn choose(&mut self, at: usize, free: &[Move]) -> Choice {
        if at < self.replay {
            let turn = &self.path[at];
            if turn.free != free {
                return Choice::Diverged;
            }
            return Choice::Make(turn.moved);
        }
        self.path.truncate(at);
        let moved = free[0];
        self.path.push(Turn {
            free: free.to_vec(),
            moved,
        });
        Choice::Make(moved)
    }

    /// The schedule the run took: one move per turn.
    pub fn schedule(&self) -> Vec<Move> {
        self.path.iter().map(|t| t.moved).collect()
    }

    /// Sets up the next run: the deepest turn with a free worker not yet
    /// tried takes the next one. False once every path has been run.
    pub fn next(&mut self) -> bool {
        while let Some(turn) = self.path.last_mut() {
            let tried = turn.free.iter().position(|&w| w == turn.moved);
            if let Some(next) = tried.and_then(|i| turn.free.get(i + 1)) {
                turn.moved = *next;
                self.replay = self.path.len();
                return true;
            }
            self.path.pop();
        }
        false
    }
}

/// How many times a schedule switches from one worker to another (the
/// clock counts as one more).
pub fn switches(schedule: &[Move]) -> usize {
    schedule.windows(2).filter(|w| w[0] != w[1]).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::race::moves::steps;

    /// Two workers of `steps` steps each, every one free until done: the
    /// walk visits every interleaving once.
    fn walk_all(counts: [usize; 2]) -> Vec<Vec<Move>> {
        let mut walk = Walk::default();
        let mut seen = Vec::new();
        loop {
            let mut left = counts;
            let mut at = 0;
            while left.iter().any(|&n| n > 0) {
                let free: Vec<Move> = (1..=2)
                    .filter(|&w| left[w - 1] > 0)
                    .map(Move::Step)
                    .collect();
                let Choice::Make(Move::Step(w)) = walk.choose(at, &free) else {
                    panic!("diverged")
                };
                left[w - 1] -= 1;
                at += 1;
            }
            seen.push(walk.schedule());
            if !walk.next() {
                return seen;
            }
        }
    }

    #[test]
    fn two_workers_of_four_steps_make_seventy_interleavings_each_once() {
        let seen = walk_all([4, 4]);
        assert_eq!(seen.len(), 70);
        let unique: std::collections::BTreeSet<_> = seen.iter().collect();
        assert_eq!(unique.len(), 70);
        assert_eq!(seen[0], steps(&[1, 1, 1, 1, 2, 2, 2, 2]));
    }

    #[test]
    fn a_replay_that_sees_other_free_workers_is_told_so() {
        let mut walk = Walk::default();
        let both = steps(&[1, 2]);
        assert_eq!(walk.choose(0, &both), Choice::Make(Move::Step(1)));
        assert_eq!(walk.choose(1, &both), Choice::Make(Move::Step(1)));
        assert!(walk.next());
        assert_eq!(walk.choose(0, &steps(&[1])), Choice::Diverged);
    }

    #[test]
    fn switches_count_the_changes_of_worker() {
        assert_eq!(switches(&steps(&[1, 1, 2, 2])), 1);
        assert_eq!(switches(&steps(&[1, 2, 1, 2])), 3);
        assert_eq!(switches(&[Move::Step(1), Move::Clock, Move::Step(1)]), 2);
        assert_eq!(switches(&[]), 0);
    }
}
