//! Secrets stay out of what the server prints: the database password is not in its start-up log
//! nor in the error it exits with. The real binary.
use crate::common;

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

const PASSWORD: &str = "hunter2-do-not-print";

/// The binary with `DATABASE_URL = url`, its stdout and stderr merged line by line until a line
/// satisfies `enough` or the process ends.
async fn output_until(url: &str, enough: impl Fn(&str) -> bool) -> String {
    let port = common::processes::free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_server"))
        .env("LEPTOS_SITE_ADDR", format!("127.0.0.1:{port}"))
        .env("RUST_LOG", "info")
        .env("DATABASE_URL", url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the server binary starts");
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = String::new();
    let read = async {
        let (mut out_open, mut err_open) = (true, true);
        while out_open || err_open {
            let line = tokio::select! {
                line = stdout.next_line(), if out_open => line.unwrap_or(None).or_else(|| { out_open = false; None }),
                line = stderr.next_line(), if err_open => line.unwrap_or(None).or_else(|| { err_open = false; None }),
            };
            if let Some(line) = line {
                seen.push_str(&line);
                seen.push('\n');
                if enough(&line) {
                    return;
                }
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), read)
        .await
        .unwrap_or_else(|_| panic!("the server said nothing useful in 30 s:\n{seen}"));
    let _ = child.kill().await;
    seen
}

/// `url` with [`PASSWORD`] as its user's password.
fn with_password(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let (user_info, host) = rest.split_once('@').unwrap();
    let user = user_info.split(':').next().unwrap();
    format!("{scheme}://{user}:{PASSWORD}@{host}")
}

#[tokio::test]
async fn the_database_password_is_not_in_the_start_up_log() {
    let url = common::create_postgres_database(&common::postgres_admin_url()).await;
    // Trust authentication on the test server: the password is carried, not checked.
    let with_password = with_password(&url);
    let log = output_until(&with_password, |line| line.contains("listening on")).await;
    assert!(log.contains("listening on"), "{log}");
    assert!(log.contains(":***@"), "the log names the database: {log}");
    assert!(!log.contains(PASSWORD), "the password was printed: {log}");
}

#[tokio::test]
async fn the_database_password_is_not_in_the_error_it_exits_with() {
    let url = format!("mysql://root:{PASSWORD}@127.0.0.1/agents");
    let log = output_until(&url, |_| false).await;
    assert!(log.contains("unsupported DATABASE_URL"), "{log}");
    assert!(!log.contains(PASSWORD), "the password was printed: {log}");
}
