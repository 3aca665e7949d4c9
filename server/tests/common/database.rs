//! The test database: SQLite or PostgreSQL, as the suite runs, and a direct connection to it.

use sqlx::postgres::PgPool;
use sqlx::sqlite::SqlitePool;
use uuid::Uuid;

/// Whether the suite runs against PostgreSQL (`AGENTSTREAM_TEST_DATABASE_URL` is set).
pub fn testing_postgres() -> bool {
    std::env::var("AGENTSTREAM_TEST_DATABASE_URL").is_ok_and(|url| !url.trim().is_empty())
}

/// A row of SQLite's `recent` table not moved into `events` yet (moved rows stay a while).
const SQLITE_LIVE: &str = "first_seq > COALESCE((SELECT moved.last_seq FROM events moved \
     WHERE moved.agent_id = recent.agent_id ORDER BY moved.first_seq DESC LIMIT 1), 0)";

/// A PostgreSQL server for the tests that need one whatever the suite's backend (several server
/// processes on one database): `AGENTSTREAM_TEST_POSTGRES_URL`, else
/// `AGENTSTREAM_TEST_DATABASE_URL`. `scripts/test.sh` starts a throwaway one and sets both.
pub fn postgres_admin_url() -> String {
    ["AGENTSTREAM_TEST_POSTGRES_URL", "AGENTSTREAM_TEST_DATABASE_URL"]
        .iter()
        .filter_map(|name| std::env::var(name).ok())
        .find(|url| !url.trim().is_empty())
        .expect(
            "this test needs PostgreSQL: run scripts/test.sh (it starts one), or set \
             AGENTSTREAM_TEST_POSTGRES_URL=postgres://user@host:port/postgres",
        )
}

/// A database for one test server: a new PostgreSQL database when the suite runs against
/// PostgreSQL, else a SQLite file at `sqlite_path`.
pub async fn fresh_database_url(sqlite_path: &std::path::Path) -> String {
    if !testing_postgres() {
        return format!("sqlite://{}", sqlite_path.display());
    }
    create_postgres_database(&std::env::var("AGENTSTREAM_TEST_DATABASE_URL").unwrap()).await
}

/// Creates an empty database on the PostgreSQL server of `admin` (a URL to an existing
/// database there) and returns its URL.
pub async fn create_postgres_database(admin: &str) -> String {
    agentstream_server::store::postgres::PgStore::create_database(admin, "agentstream_test")
        .await
        .expect("the test database is created")
}

/// A direct connection to a test server's database.
pub enum TestDatabase {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

impl TestDatabase {
    /// Rows of `table`.
    pub async fn count_rows(&self, table: &str) -> i64 {
        let sql = format!("SELECT COUNT(*) FROM {table}");
        match self {
            TestDatabase::Sqlite(pool) => sqlx::query_scalar(&sql).fetch_one(pool).await.unwrap(),
            TestDatabase::Postgres(pool) => sqlx::query_scalar(&sql).fetch_one(pool).await.unwrap(),
        }
    }

    /// Events in the log (runs of appends share a row: counted by their seqs; on SQLite the
    /// newest rows are in `recent` until they move into `events`, and moved rows stay there a
    /// while: not counted twice).
    pub async fn count_events(&self) -> i64 {
        let sum = |table: &str| {
            format!(
                "SELECT CAST(COALESCE(SUM(last_seq - first_seq + 1), 0) AS BIGINT) FROM {table}"
            )
        };
        match self {
            TestDatabase::Sqlite(pool) => {
                let sql =
                    format!("SELECT ({}) + ({} WHERE {SQLITE_LIVE})", sum("events"), sum("recent"));
                sqlx::query_scalar(&sql).fetch_one(pool).await.unwrap()
            }
            TestDatabase::Postgres(pool) => {
                sqlx::query_scalar(&sum("events")).fetch_one(pool).await.unwrap()
            }
        }
    }

    /// How many events of the agent have seq ≤ `seq`, and the id of the one at `seq`: the
    /// rows from the start to the one holding `seq` (the id `seq - first_seq` places after its
    /// first).
    pub async fn committed_through(&self, agent_id: Uuid, seq: u64) -> (i64, Option<String>) {
        let rows: Vec<(i64, i64, Uuid)> = match self {
            TestDatabase::Sqlite(pool) => {
                let rows: Vec<(i64, i64, Vec<u8>)> = sqlx::query_as(&format!(
                    "SELECT first_seq, last_seq, id FROM events WHERE agent_id = ?1 \
                     AND first_seq <= ?2 UNION ALL SELECT first_seq, last_seq, id FROM recent \
                     WHERE agent_id = ?1 AND first_seq <= ?2 AND {SQLITE_LIVE}"
                ))
                .bind(agent_id.to_string())
                .bind(seq as i64)
                .fetch_all(pool)
                .await
                .unwrap();
                rows.into_iter()
                    .map(|(first, last, id)| (first, last, Uuid::from_slice(&id).unwrap()))
                    .collect()
            }
            TestDatabase::Postgres(pool) => sqlx::query_as(
                "SELECT first_seq, last_seq, id FROM events WHERE agent_id = $1 \
                 AND first_seq <= $2",
            )
            .bind(agent_id)
            .bind(seq as i64)
            .fetch_all(pool)
            .await
            .unwrap(),
        };
        let seq = seq as i64;
        let count = rows.iter().map(|(first, last, _)| (*last).min(seq) - first + 1).sum();
        let id = rows
            .iter()
            .find(|(first, last, _)| (*first..=*last).contains(&seq))
            .and_then(|(first, _, id)| {
                agentstream_server::store::chunk::nth_id(*id, (seq - first) as u64)
            })
            .map(|id| id.to_string());
        (count, id)
    }
}
