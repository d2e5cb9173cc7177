//! Each lab step's body, beside the steps it belongs with (`impl Lab` blocks; the dispatch is
//! [`crate::lab::Lab::run`]).

mod approval;
mod cluster_check;
mod grading;
mod release;
mod waits;
mod wiring;

/// " (NOTE)" when a step had to settle something in Argo CD (ask again to compare a revision,
/// clear a stale project reference), else nothing: the step's line in the evidence says how
/// often that remedy was needed.
fn settled_note(note: Option<String>) -> String {
    note.map_or(String::new(), |n| format!(" ({n})"))
}
