//! A build is a list of named steps; a step that fails says which step, the command it ran, what
//! went wrong and what to do about it, so no failure is ever silent or anonymous.

use std::fmt;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// How long a stopped command may take to end after SIGTERM before it is killed.
const STOP_GRACE_MS: u64 = 5_000;

/// Why a step failed, in the words a person needs to act on it.
#[derive(Debug)]
pub struct StepError {
    pub step: String,
    /// The command line, when the step ran one.
    pub command: Option<String>,
    pub cause: String,
    /// What to do about it.
    pub hint: String,
}

impl StepError {
    pub fn new(step: &str, cause: impl Into<String>, hint: impl Into<String>) -> StepError {
        StepError { step: step.to_owned(), command: None, cause: cause.into(), hint: hint.into() }
    }

    pub fn with_command(mut self, command: &Command) -> StepError {
        self.command = Some(command_line(command));
        self
    }
}

impl fmt::Display for StepError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(formatter, "step failed: {}", self.step)?;
        if let Some(command) = &self.command {
            writeln!(formatter, "  command: {command}")?;
        }
        writeln!(formatter, "  cause: {}", self.cause)?;
        write!(formatter, "  what to do: {}", self.hint)
    }
}

/// The command as a person would type it (environment set by this tool first).
pub fn command_line(command: &Command) -> String {
    let mut words: Vec<String> = command
        .get_envs()
        .filter_map(|(key, value)| Some(format!("{}={}", key.to_str()?, value?.to_string_lossy())))
        .collect();
    words.push(command.get_program().to_string_lossy().into_owned());
    words.extend(command.get_args().map(|arg| arg.to_string_lossy().into_owned()));
    words.join(" ")
}

/// Prints the step's start the way the install script does, so one log reads as one story.
pub fn announce(step: &str) {
    eprintln!("==> {step}");
}

/// A command started by a step and not yet waited for (the server and the wasm builds run side
/// by side: on two cores the wasm bundle's single-threaded link-time optimisation leaves a core
/// free for the server).
pub struct Running {
    step: String,
    command: Command,
    child: Child,
    hint: String,
    started: Instant,
}

/// Starts `command` for `step`; `hint` says what to do if it fails.
pub fn start(step: &str, mut command: Command, hint: &str) -> Result<Running, StepError> {
    announce(step);
    match command.spawn() {
        Ok(child) => Ok(Running {
            step: step.to_owned(),
            command,
            child,
            hint: hint.to_owned(),
            started: Instant::now(),
        }),
        Err(error) => Err(StepError::new(
            step,
            format!("cannot start {:?}: {error}", command.get_program()),
            hint,
        )
        .with_command(&command)),
    }
}

impl Running {
    /// Waits for the command; a non-zero exit is the step's failure.
    pub fn wait(mut self) -> Result<(), StepError> {
        let status = self.child.wait();
        let seconds = self.started.elapsed().as_secs_f64();
        match status {
            Ok(status) if status.success() => {
                eprintln!("==> {} done in {seconds:.1} s", self.step);
                Ok(())
            }
            Ok(status) => Err(StepError::new(&self.step, exit_cause(status), &self.hint)
                .with_command(&self.command)),
            Err(error) => Err(StepError::new(
                &self.step,
                format!("waiting for it failed: {error}"),
                &self.hint,
            )
            .with_command(&self.command)),
        }
    }

    /// Stops the command: SIGTERM first, so a server shuts down as it would in production
    /// (its runs end cleanly), then SIGKILL after [`STOP_GRACE_MS`]. A stopped cargo's compiler
    /// processes finish the crate they are on and exit.
    pub fn stop(mut self) {
        let terminated = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .is_ok_and(|status| status.success());
        if terminated {
            let deadline = Instant::now() + Duration::from_millis(STOP_GRACE_MS);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Whether the command has ended on its own, and how.
    pub fn ended(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(exit_cause(status)),
            Ok(None) => None,
            Err(error) => Some(format!("cannot tell: {error}")),
        }
    }
}

/// Runs `command` to its end as `step`.
pub fn run(step: &str, command: Command, hint: &str) -> Result<(), StepError> {
    start(step, command, hint)?.wait()
}

fn exit_cause(status: ExitStatus) -> String {
    match status.code() {
        Some(code) => format!("exited with status {code} (its own messages are above)"),
        None => format!("ended by a signal ({status})"),
    }
}
