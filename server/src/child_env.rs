//! The environment a child process starts with: nothing of the server's but `PATH`, `HOME` and
//! the variables the operator named for it. The server's own environment holds its secrets
//! (`ANTHROPIC_API_KEY`, `OPENAI_API_KEY`, `DATABASE_URL`, `AGENTSTREAM_API_TOKEN`,
//! `AGENTSTREAM_TOKEN_SECRET`); an MCP server or the Claude CLI gets none of them unless named.

/// What every child keeps: where programs are, and the user's home (the Claude CLI's login).
pub const CHILD_ENV_ALWAYS: &[&str] = &["PATH", "HOME"];

/// The variables a child starts with: [`CHILD_ENV_ALWAYS`] and `named`, each with its value in
/// this process (`lookup`) when it has one. Pure: `lookup` stands for the environment.
pub fn child_env(
    named: &[String],
    lookup: impl Fn(&str) -> Option<String>,
) -> Vec<(String, String)> {
    let mut names: Vec<&str> = CHILD_ENV_ALWAYS.to_vec();
    for name in named.iter().map(|name| name.trim()) {
        if !name.is_empty() && !names.contains(&name) {
            names.push(name);
        }
    }
    names
        .into_iter()
        .filter_map(|name| lookup(name).map(|value| (name.to_owned(), value)))
        .collect()
}

/// Clears `command`'s environment and gives it [`child_env`] of this process's.
pub fn clean(command: &mut tokio::process::Command, named: &[String]) {
    command.env_clear();
    command.envs(child_env(named, |name| std::env::var(name).ok()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_path_home_and_the_named_pass() {
        let server = |name: &str| {
            [
                ("PATH", "/usr/bin"),
                ("HOME", "/home/a"),
                ("ANTHROPIC_API_KEY", "sk-secret"),
                ("DATABASE_URL", "postgres://u:p@h/d"),
                ("LANG", "C.UTF-8"),
            ]
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| (*value).to_owned())
        };
        let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
            list.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
        };
        type Case = (Vec<String>, Vec<(String, String)>);
        let cases: [Case; 3] = [
            (vec![], pairs(&[("PATH", "/usr/bin"), ("HOME", "/home/a")])),
            (
                vec!["ANTHROPIC_API_KEY".into(), " LANG ".into(), "PATH".into()],
                pairs(&[
                    ("PATH", "/usr/bin"),
                    ("HOME", "/home/a"),
                    ("ANTHROPIC_API_KEY", "sk-secret"),
                    ("LANG", "C.UTF-8"),
                ]),
            ),
            (
                vec!["NOT_SET".into(), String::new()],
                pairs(&[("PATH", "/usr/bin"), ("HOME", "/home/a")]),
            ),
        ];
        for (named, expected) in cases {
            assert_eq!(child_env(&named, server), expected, "{named:?}");
        }
    }
}
