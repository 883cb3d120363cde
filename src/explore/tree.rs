//! The tree of interleavings, walked depth first: each run replays a path's choices, then takes the first free worker at every new turn, and the next run backs up to the deepest turn with a worker not yet tried.
//!
//! This is how a stateless model checker walks a program it cannot
//! snapshot: the database cannot be forked at a turn, so every leaf is a
//! run from fresh tables that replays the path to it. Which workers are
//! free at a turn (paused before a step, not waiting on a lock, not
//! finished) is what the run saw there; a replay that sees otherwise is
//! reported, never glossed over.

/// One turn of a run: the workers that were free to move, and the one
/// that moved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    pub free: Vec<usize>,
    pub moved: usize,
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
    /// Move this worker.
    Move(usize),
    /// The replay expected other free workers here than the run saw.
    Diverged,
}

impl Walk {
    /// Which worker moves at turn `at` (from 0), given the workers free
    /// there: the path's on a replay, the first free one past it.
    pub fn choose(&mut self, at: usize, free: &[usize]) -> Choice {
        if at < self.replay {
            let turn = &self.path[at];
            if turn.free != free {
                return Choice::Diverged;
            }
            return Choice::Move(turn.moved);
        }
        self.path.truncate(at);
        let moved = free[0];
        self.path.push(Turn {
            free: free.to_vec(),
            moved,
        });
        Choice::Move(moved)
    }

    /// The schedule the run took: one worker per turn.
    pub fn schedule(&self) -> Vec<usize> {
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

/// How many times a schedule switches from one worker to another.
pub fn switches(schedule: &[usize]) -> usize {
    schedule.windows(2).filter(|w| w[0] != w[1]).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two workers of `steps` steps each, every one free until done: the
    /// walk visits every interleaving once.
    fn walk_all(steps: [usize; 2]) -> Vec<Vec<usize>> {
        let mut walk = Walk::default();
        let mut seen = Vec::new();
        loop {
            let mut left = steps;
            let mut at = 0;
            while left.iter().any(|&n| n > 0) {
                let free: Vec<usize> = (1..=2).filter(|&w| left[w - 1] > 0).collect();
                let Choice::Move(w) = walk.choose(at, &free) else {
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
        assert_eq!(seen[0], vec![1, 1, 1, 1, 2, 2, 2, 2]);
    }

    #[test]
    fn a_replay_that_sees_other_free_workers_is_told_so() {
        let mut walk = Walk::default();
        assert_eq!(walk.choose(0, &[1, 2]), Choice::Move(1));
        assert_eq!(walk.choose(1, &[1, 2]), Choice::Move(1));
        assert!(walk.next());
        assert_eq!(walk.choose(0, &[1]), Choice::Diverged);
    }

    #[test]
    fn switches_count_the_changes_of_worker() {
        assert_eq!(switches(&[1, 1, 2, 2]), 1);
        assert_eq!(switches(&[1, 2, 1, 2]), 3);
        assert_eq!(switches(&[]), 0);
    }
}
