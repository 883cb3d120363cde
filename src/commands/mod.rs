//! One file per command. Each checks its arguments before any database is
//! touched, then runs against the database the dispatcher opened.

pub mod audit;
pub mod bench;
pub mod challenge;
pub mod compare;
pub mod db;
pub mod doctor;
pub mod keys;
pub mod lesson;
pub mod matrix;
pub mod pooler;
pub mod probe;
pub mod race;
pub mod reap;
pub mod replica;
pub mod scenario;
pub mod serve;
pub mod step;
pub mod stores;
