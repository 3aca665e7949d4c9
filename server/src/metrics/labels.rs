//! Label values taken from outside, cut to a known set (`bounded`).

/// `value` when it is one of `known`, else `"other"`: a label's value from outside cut to a set
/// known when the server was built.
pub fn bounded(value: &str, known: &[&'static str]) -> &'static str {
    known
        .iter()
        .find(|candidate| **candidate == value)
        .copied()
        .unwrap_or("other")
}
