//! A row's ids and times: the k-th event of a row has the row's first id plus k (never carrying
//! into the UUIDv7 time and counter above the low 32 bits), and times are kept as nanoseconds.

use crate::store::StoreResult;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::store::StoreError;

/// The id after `id` in a run of appends; `None` when the low 32 bits are all ones (the run
/// starts over with an id of its own rather than carry into the bits that make ids unique).
pub fn next_id(id: Uuid) -> Option<Uuid> {
    let value = id.as_u128();
    (value as u32 != u32::MAX).then(|| Uuid::from_u128(value + 1))
}

/// The id `k` places after `first` (as [`next_id`] applied `k` times).
pub fn nth_id(first: Uuid, k: u64) -> Option<Uuid> {
    let low = u128::from(first.as_u128() as u32) + u128::from(k);
    (low <= u128::from(u32::MAX)).then(|| Uuid::from_u128(first.as_u128() + u128::from(k)))
}

/// A time as the stores keep it: nanoseconds since the Unix epoch.
pub fn time_nanos(time: DateTime<Utc>) -> StoreResult<i64> {
    time.timestamp_nanos_opt()
        .ok_or_else(|| StoreError::Failed(format!("time {time} is beyond what the log keeps")))
}

pub fn time_from_nanos(nanos: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_nanos(nanos)
}
