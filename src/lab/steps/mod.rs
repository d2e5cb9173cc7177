//! Each lab step's body, beside the steps it belongs with (`impl Lab` blocks; the dispatch is
//! [`crate::lab::Lab::run`]).

mod approval;
mod grading;
mod release;
mod waits;
mod wiring;
