//! The wire: the course's app as an HTTP service, and the client that races any such service.
//!
//! [`app`] answers `POST /lessons/{lesson}/complete` with a strategy,
//! exactly as a race's worker would handle the request; [`wire`] is what
//! both ends agree on (the `Idempotency-Key` header, the problem bodies,
//! how a status reads as an outcome); [`listener`] is the app's front door
//! (connection cap, read and idle timeouts); [`client`] sends requests on
//! connections opened before a start gate, so that they arrive together.

pub mod app;
pub mod caller;
pub mod client;
pub mod contract;
pub mod forward;
pub mod https;
pub mod last_byte;
pub mod listener;
pub mod message;
pub mod observed;
pub mod single_packet;
pub mod stream;
