//! Opening a store by its URL's scheme: SQLite or PostgreSQL, and [`Store`], the sum of the
//! interface's traits the server is wired with.

use crate::store::StoreResult;
use std::sync::Arc;

use crate::store::branches::Branches;
use crate::store::error::redact_url;
use crate::store::interface::{Agents, ClusterOptions, ClusterStore, EventLog, RunKeys};
use crate::store::streams::Streams;
use crate::store::{migrations, postgres, sqlite, StoreError};

/// The whole store, as the server is wired with it. Code that needs less takes less: the
/// delivery layer sees an [`EventLog`] only (`Arc<dyn Store>` coerces to `Arc<dyn EventLog>`).
pub trait Store: Agents + Branches + EventLog + RunKeys + Streams {}

impl<T: Agents + Branches + EventLog + RunKeys + Streams> Store for T {}

/// PostgreSQL's schema as of migration `version`: for the test that upgrades a log written by an
/// earlier schema (SQLite's has a database file for that; a PostgreSQL database is no file).
#[doc(hidden)]
pub fn postgres_migrations_through(version: i64) -> sqlx::migrate::Migrator {
    migrations::postgres_through(version)
}

/// Opens the store `url` names, migrating it: `sqlite://path` (created if missing) or
/// `postgres://…` / `postgresql://…`. PostgreSQL comes with its [`ClusterStore`].
pub async fn open(url: &str, cluster: &ClusterOptions) -> StoreResult<Opened> {
    if is_sqlite(url) {
        let store = Arc::new(sqlite::SqliteStore::open(url).await?);
        Ok(Opened { store, cluster: None })
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let store = Arc::new(postgres::PgStore::open(url, cluster).await?);
        Ok(Opened { store: store.clone(), cluster: Some(store) })
    } else {
        Err(StoreError::UnsupportedUrl(redact_url(url)))
    }
}

/// Whether `url` names a SQLite store (what [`open`] opens as one).
pub fn is_sqlite(url: &str) -> bool {
    url.starts_with("sqlite:")
}

/// The file a `sqlite://path` URL names (without its query); `None` for any other URL.
pub fn sqlite_path(url: &str) -> Option<std::path::PathBuf> {
    let path = url.strip_prefix("sqlite://")?;
    let path = path.split('?').next().unwrap_or(path);
    (!path.is_empty() && path != ":memory:").then(|| std::path::PathBuf::from(path))
}

/// An opened store.
pub struct Opened {
    pub store: Arc<dyn Store>,
    pub cluster: Option<Arc<dyn ClusterStore>>,
}
