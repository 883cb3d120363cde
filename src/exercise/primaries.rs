//! Exercise 11: more than one primary. Lesson 2's claim inside the request's transaction, on a Galera cluster: where the claim commits, and what a retry on another node reads with.

use std::path::Path;

use anyhow::{Result, bail};

use super::spec::Exercise;
use crate::db::Database;
use crate::probe::conformance::Check;
use crate::race::engine::Engine;
use crate::strategy::guard_file::Dialect;

/// The cluster's nodes the cases race on.
const NODES: usize = 3;

/// Reads the file: a guard file written for MariaDB.
fn read(path: &Path) -> Result<()> {
    if crate::strategy::guard_file::load(path)?.engine != Dialect::Mariadb {
        bail!(
            "{}: exercise 11 races on a Galera cluster of MariaDB nodes; its file says \
             engine = \"mariadb\" (idem exercise 11 writes one)",
            path.display()
        );
    }
    Ok(())
}

/// A burst over three primaries, two claims on two nodes before either
/// works, a claim refused at its COMMIT, and a retry on a node that is
/// behind.
pub async fn judge(db: &Database, file: &Path) -> Result<Vec<Check>> {
    let cluster = db.mariadb_on(NODES).await?;
    super::on_mariadb::more_than_one_primary(cluster, file).await
}

/// Lesson 11's exercise.
pub const EXERCISE: Exercise = Exercise {
    lesson: 11,
    file: "11-more-than-one-primary.toml",
    goal: "one service call per key on three primaries, and a retry on a node behind answered \
           with the stored response",
    try_it: "idem race --engine mariadb --nodes 3 --strategy-file {file}",
    start: include_str!("../../exercises/mariadb/11-more-than-one-primary.toml"),
    solution: include_str!("../../exercises/solutions/mariadb/11-more-than-one-primary.toml"),
    hints: [
        "On one server a second claim of the key waits for the first one's COMMIT. On a \
         cluster, when does node 2 learn of a claim made on node 1? What has each request \
         done by then?",
        "A claim inside the request's transaction reaches the other nodes with its COMMIT, \
         after the work. Let the claim commit on its own (transaction = \"none\"): \
         certification then judges it before anything is done. Then some losers' claims are \
         refused at their COMMIT (1213): what does that say about the key? \
         refused_commit chooses their answer.",
        "A refused claim is a lost claim: refused_commit = \"read\" answers it from the key. \
         And a node applies what the cluster certified in its own time: a read there may not \
         see a completion that another node already answered for. sync_wait = true makes \
         each read wait until its node has caught up.",
    ],
    why: "Galera decides between two nodes' writes at COMMIT, so the claim has to commit \
          before the work for the decision to come first; a loser's claim is refused at its \
          own COMMIT (1213) or finds the winner's row, and a refusal is a lost claim, to be \
          answered from the key, not a failure. Certification orders writes, not reads: a \
          retry on another node reads that node's rows as they are, unless the read waits \
          for the node to catch up (wsrep_sync_wait).",
    read,
    judge: |db, path| Box::pin(judge(db, path)),
    engine: Engine::Mariadb,
    mariadb: super::spec::OnMariadb::Own,
};
