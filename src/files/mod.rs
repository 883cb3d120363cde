//! Every file idem reads or writes goes through here: [`read`] takes regular files up to a stated size, [`write`] makes files whole beside their targets and never follows a planted link.

pub mod owners;
pub mod read;
pub mod write;

pub use read::{
    MAX_PEM_BYTES, MAX_SCENARIO_BYTES, line_at, parse_toml, read_named, read_regular, read_text,
};
