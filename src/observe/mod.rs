//! Evidence and waiting: what the live state says (pure derivation, predicates and
//! explanations), the observer that waits on watches, and the append-only observations.

pub mod evidence;
pub mod explain;
pub mod observations;
pub mod observer;
pub mod predicates;
