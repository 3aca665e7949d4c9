//! The schema migrations of each backend, compiled into the binary.
//!
//! Listed by hand rather than with `sqlx::migrate!`: that macro is sqlx's only use of its `macros`
//! feature here, and the feature compiles a second sqlx (and a second SQLite, from C) for the
//! build host, about a fifth of a cold release build on two cores. `Migration::new` computes the
//! same checksum the macro embeds (SHA-384 of the file), so databases migrated by either agree;
//! a test checks that every file in the directories is listed, in order.

use sqlx::migrate::{Migration, MigrationType, Migrator};
use std::borrow::Cow;

/// `(version, description, SQL)` as sqlx names a file `<version>_<description>.sql`.
type Source = (i64, &'static str, &'static str);

const SQLITE: &[Source] = &[
    (1, "event log", include_str!("../../migrations/0001_event_log.sql")),
    (2, "run keys", include_str!("../../migrations/0002_run_keys.sql")),
    (3, "run started index", include_str!("../../migrations/0003_run_started_index.sql")),
    (4, "run outline index", include_str!("../../migrations/0004_run_outline_index.sql")),
    (5, "open runs", include_str!("../../migrations/0005_open_runs.sql")),
    (6, "chat agents", include_str!("../../migrations/0006_chat_agents.sql")),
    (7, "compact log", include_str!("../../migrations/0007_compact_log.sql")),
    (8, "timeline snapshots", include_str!("../../migrations/0008_timeline_snapshots.sql")),
    (9, "agent owner", include_str!("../../migrations/0009_agent_owner.sql")),
    (10, "open approvals", include_str!("../../migrations/0010_open_approvals.sql")),
    (11, "producers", include_str!("../../migrations/0011_producers.sql")),
    (12, "streams", include_str!("../../migrations/0012_streams.sql")),
    (13, "recent", include_str!("../../migrations/0013_recent.sql")),
    (14, "branches", include_str!("../../migrations/0014_branches.sql")),
    (15, "events rowid", include_str!("../../migrations/0015_events_rowid.sql")),
];

const POSTGRES: &[Source] = &[
    (1, "event log", include_str!("../../migrations_postgres/0001_event_log.sql")),
    (2, "run outline index", include_str!("../../migrations_postgres/0002_run_outline_index.sql")),
    (3, "open runs", include_str!("../../migrations_postgres/0003_open_runs.sql")),
    (4, "chat agents", include_str!("../../migrations_postgres/0004_chat_agents.sql")),
    (
        5,
        "timeline snapshots",
        include_str!("../../migrations_postgres/0005_timeline_snapshots.sql"),
    ),
    (6, "compact log", include_str!("../../migrations_postgres/0006_compact_log.sql")),
    (7, "agent owner", include_str!("../../migrations_postgres/0007_agent_owner.sql")),
    (8, "open approvals", include_str!("../../migrations_postgres/0008_open_approvals.sql")),
    (9, "producers", include_str!("../../migrations_postgres/0009_producers.sql")),
    (10, "streams", include_str!("../../migrations_postgres/0010_streams.sql")),
    (11, "branches", include_str!("../../migrations_postgres/0011_branches.sql")),
];

/// The SQLite schema (`server/migrations/`).
pub fn sqlite() -> Migrator {
    migrator(SQLITE)
}

/// The PostgreSQL schema (`server/migrations_postgres/`).
pub fn postgres() -> Migrator {
    migrator(POSTGRES)
}

/// The PostgreSQL schema up to and including `version`.
pub fn postgres_through(version: i64) -> Migrator {
    let through = POSTGRES.iter().take_while(|(v, _, _)| *v <= version).count();
    migrator(&POSTGRES[..through])
}

/// Statements run before a PostgreSQL migration's file, in its transaction, by version. The
/// migration keeps its file's checksum: a database that ran
/// the file as first released agrees with it.
///
/// PostgreSQL's 6 copies `agent_events` into `events` and drops it. A server of the previous
/// release still running (a rolling upgrade) could commit an event after the copy read the
/// table and before the drop: that event would be gone. Locked first, the old table takes no
/// write until the migration commits; the old server's writes then fail (the table is gone)
/// instead of vanishing. Stop the old servers before upgrading past this migration.
const PREFIXES: &[(i64, &str)] = &[(6, "LOCK TABLE agent_events IN EXCLUSIVE MODE;\n")];

fn migrator(sources: &[Source]) -> Migrator {
    let postgres =
        sources.first().map(|source| source.2) == POSTGRES.first().map(|source| source.2);
    let migrations = sources
        .iter()
        .map(|&(version, description, sql)| {
            let mut migration = Migration::new(
                version,
                Cow::Borrowed(description),
                MigrationType::Simple,
                Cow::Borrowed(sql),
                false,
            );
            let prefix = PREFIXES.iter().find(|(v, _)| postgres && *v == version);
            if let Some((_, prefix)) = prefix {
                migration.sql = Cow::Owned(format!("{prefix}{sql}"));
            }
            migration
        })
        .collect::<Vec<_>>();
    Migrator { migrations: Cow::Owned(migrations), ..Migrator::DEFAULT }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `.sql` file of the directory is listed with its version and description, in order,
    /// and with its content: a migration added to the directory but not here fails.
    fn check(directory: &str, sources: &[Source]) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(directory);
        let mut files: Vec<_> = std::fs::read_dir(&path)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .filter(|name| name.ends_with(".sql"))
            .collect();
        files.sort();
        let listed: Vec<String> = sources
            .iter()
            .map(|(version, description, _)| {
                format!("{version:04}_{}.sql", description.replace(' ', "_"))
            })
            .collect();
        assert_eq!(files, listed, "{directory}: the files and the list differ");
        for (file, (_, _, sql)) in files.iter().zip(sources) {
            assert_eq!(std::fs::read_to_string(path.join(file)).unwrap(), *sql);
        }
        let versions: Vec<i64> =
            migrator(sources).iter().map(|migration| migration.version).collect();
        assert!(versions.windows(2).all(|pair| pair[0] < pair[1]));
    }

    #[test]
    fn every_migration_file_is_listed() {
        check("migrations", SQLITE);
        check("migrations_postgres", POSTGRES);
    }

    /// The checksums databases recorded when `sqlx::migrate!` ran the first migrations (the
    /// SHA-384 of the file, as `sha384sum` prints it), so a database made by an earlier build
    /// still opens: sqlx refuses one whose applied migration's checksum changed. Editing an
    /// applied migration fails here too, as it should.
    #[test]
    fn checksums_are_those_databases_recorded() {
        let hex = |migrator: Migrator| -> String {
            let checksum = &migrator.migrations[0].checksum;
            checksum.iter().map(|byte| format!("{byte:02x}")).collect()
        };
        assert_eq!(
            hex(sqlite()),
            "9fd792f2438183105cece29f1a0023efbf6334c4d54801bcbb2c0ec6cea4b517884870fb133b3ca07fc3000710d49157"
        );
        assert_eq!(
            hex(postgres()),
            "456b80b44d77c70ffe5f1bc327509eef9d8638e9a4a1aa82a12aa3942676acb5bbb3e924b75cbb64548695212066e790"
        );
    }
}
