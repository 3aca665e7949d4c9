//! The store's error: what a caller can act on (an unknown agent, try again, a run lost to
//! another process), never a driver's type. Driver errors are sorted into these at the boundary
//! (`From<sqlx::Error>` here, `sqlite::appender::sqlite_error` for rusqlite), so nothing above
//! the store depends on which database or driver answered.

use uuid::Uuid;

/// What the store's operations return (short, so that their signatures fit on a line).
pub type StoreResult<T> = Result<T, StoreError>;

/// Errors of the store boundary.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("agent {0} does not exist")]
    UnknownAgent(Uuid),
    /// A row that cannot be decoded or breaks an invariant (e.g. seq out of order).
    #[error("the stored log is inconsistent: {0}")]
    Corrupt(String),
    /// The database refused the statement (a constraint, a full disk, a failed migration …).
    #[error("the database failed: {0}")]
    Failed(String),
    /// The database could not do it now (busy, I/O trouble); trying again may work.
    #[error("the database is unavailable: {0}")]
    Unavailable(String),
    /// Events of a run this process no longer executes: its lease ran out and another process
    /// ended it. Nothing was written.
    #[error("run {0} is no longer executed by this process (its lease ran out and it was ended)")]
    RunNotOwned(Uuid),
    /// A producer's batch was fenced against a position that moved before it committed (another
    /// server or request committed the producer's next batch): nothing was written; fence again.
    #[error("producer {producer_id:?} of agent {agent_id} moved on before this batch committed")]
    ProducerMoved { agent_id: Uuid, producer_id: String },
    /// `DATABASE_URL` names no database this server can use.
    #[error("unsupported DATABASE_URL {0:?}: expected sqlite://… or postgres://…")]
    UnsupportedUrl(String),
}

impl StoreError {
    /// True when the same call may succeed if tried again: nothing was written, and the cause
    /// is the database's state, not the request.
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }

    /// A stable name of the kind of error, for a metric's label.
    pub fn kind(&self) -> &'static str {
        match self {
            StoreError::UnknownAgent(_) => "unknown_agent",
            StoreError::Corrupt(_) => "corrupt",
            StoreError::Failed(_) => "failed",
            StoreError::Unavailable(_) => "unavailable",
            StoreError::RunNotOwned(_) => "run_not_owned",
            StoreError::ProducerMoved { .. } => "producer_moved",
            StoreError::UnsupportedUrl(_) => "unsupported_url",
        }
    }
}

/// What kind of trouble a sqlx error is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Trouble {
    /// Not now: the connection, the pool or the database's state.
    Passing,
    /// A row the store cannot read back.
    Unreadable,
    /// Anything else: the statement was refused.
    Refused,
}

fn trouble(error: &sqlx::Error) -> Trouble {
    match error {
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::WorkerCrashed => {
            Trouble::Passing
        }
        sqlx::Error::Database(database)
            if database.code().is_some_and(|code| is_transient_code(&code)) =>
        {
            Trouble::Passing
        }
        sqlx::Error::ColumnDecode { .. }
        | sqlx::Error::ColumnNotFound(_)
        | sqlx::Error::ColumnIndexOutOfBounds { .. }
        | sqlx::Error::Decode(_) => Trouble::Unreadable,
        _ => Trouble::Refused,
    }
}

/// Database error codes that mean "not now" rather than "never": SQLite's BUSY (5) and LOCKED
/// (6); PostgreSQL's serialization failure and deadlock (class 40), connection trouble (class
/// 08) and server shutdown or start-up (57P01–57P03).
fn is_transient_code(code: &str) -> bool {
    matches!(code, "5" | "6" | "40001" | "40P01" | "57P01" | "57P02" | "57P03")
        || code.starts_with("08")
}

impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> StoreError {
        match trouble(&error) {
            Trouble::Passing => StoreError::Unavailable(error.to_string()),
            Trouble::Unreadable => StoreError::Corrupt(error.to_string()),
            Trouble::Refused => StoreError::Failed(error.to_string()),
        }
    }
}

impl From<sqlx::migrate::MigrateError> for StoreError {
    fn from(error: sqlx::migrate::MigrateError) -> StoreError {
        let passing = matches!(&error, sqlx::migrate::MigrateError::Execute(inner)
            if trouble(inner) == Trouble::Passing);
        let message = format!("migrating: {error}");
        if passing {
            StoreError::Unavailable(message)
        } else {
            StoreError::Failed(message)
        }
    }
}

/// A statement about `agent_id` that broke a foreign key: the agent does not exist.
pub(crate) fn unknown_agent_or(agent_id: Uuid) -> impl Fn(sqlx::Error) -> StoreError {
    move |error| match &error {
        sqlx::Error::Database(database) if database.is_foreign_key_violation() => {
            StoreError::UnknownAgent(agent_id)
        }
        _ => StoreError::from(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_errors_sort_into_what_a_caller_can_act_on() {
        let cases: Vec<(sqlx::Error, Trouble)> = vec![
            (sqlx::Error::PoolTimedOut, Trouble::Passing),
            (sqlx::Error::WorkerCrashed, Trouble::Passing),
            (
                sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset)),
                Trouble::Passing,
            ),
            (sqlx::Error::ColumnNotFound("seq".into()), Trouble::Unreadable),
            (sqlx::Error::Decode("bad".into()), Trouble::Unreadable),
            (sqlx::Error::RowNotFound, Trouble::Refused),
            (sqlx::Error::Protocol("garbage".into()), Trouble::Refused),
        ];
        for (error, expected) in cases {
            let text = error.to_string();
            assert_eq!(trouble(&error), expected, "{text}");
            let converted = StoreError::from(error);
            assert_eq!(converted.is_transient(), expected == Trouble::Passing, "{text}");
            assert!(converted.to_string().contains(&text), "{converted} names {text}");
        }
    }

    #[test]
    fn only_busy_locked_and_connection_codes_pass() {
        for code in ["5", "6", "40001", "40P01", "08006", "57P01", "57P03"] {
            assert!(is_transient_code(code), "{code}");
        }
        for code in ["19", "23505", "23503", "42P01", "53100", "57014"] {
            assert!(!is_transient_code(code), "{code}");
        }
    }
}

/// `url` with its password (in `user:password@`, or a `password=` parameter) replaced by `***`:
/// what may be logged or shown in an error. Everything else stays, so the operator still sees
/// which database it is.
pub fn redact_url(url: &str) -> String {
    let (before_query, query) = match url.split_once('?') {
        Some((before, query)) => (before, Some(query)),
        None => (url, None),
    };
    let mut redacted = match before_query.split_once("://") {
        Some((scheme, rest)) => {
            let authority_end = rest.find('/').unwrap_or(rest.len());
            let (authority, path) = rest.split_at(authority_end);
            let authority = match authority.rsplit_once('@') {
                Some((user_info, host)) => match user_info.split_once(':') {
                    Some((user, _password)) => format!("{user}:***@{host}"),
                    None => authority.to_owned(),
                },
                None => authority.to_owned(),
            };
            format!("{scheme}://{authority}{path}")
        }
        None => before_query.to_owned(),
    };
    if let Some(query) = query {
        let parameters: Vec<String> = query
            .split('&')
            .map(|parameter| match parameter.split_once('=') {
                Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
                _ => parameter.to_owned(),
            })
            .collect();
        redacted.push('?');
        redacted.push_str(&parameters.join("&"));
    }
    redacted
}

#[cfg(test)]
mod redact_tests {
    use super::redact_url;

    #[test]
    fn passwords_are_redacted_and_the_rest_stays() {
        let cases = [
            ("postgres://app:s3cret@db:5432/log", "postgres://app:***@db:5432/log"),
            ("postgres://app@db/log", "postgres://app@db/log"),
            (
                "postgresql://app:p%40ss@db/log?sslmode=require",
                "postgresql://app:***@db/log?sslmode=require",
            ),
            (
                "postgres://db/log?user=app&password=s3cret",
                "postgres://db/log?user=app&password=***",
            ),
            ("postgres://a:b@db/log?PASSWORD=x&x=1", "postgres://a:***@db/log?PASSWORD=***&x=1"),
            ("sqlite://data/agentstream.db", "sqlite://data/agentstream.db"),
            ("sqlite:data.db", "sqlite:data.db"),
            ("mysql://root:pw@host", "mysql://root:***@host"),
            ("", ""),
        ];
        for (url, redacted) in cases {
            assert_eq!(redact_url(url), redacted, "{url}");
        }
    }
}
