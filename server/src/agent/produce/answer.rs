//! What a producer's request is answered: what an accepted batch did, or why nothing was
//! written.

use uuid::Uuid;

use super::check::Refusal;
use crate::agent::registry::StartRunError;
use crate::delivery::writer::AppendError;
use crate::store::StoreError;

/// What an accepted batch did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Appended {
    /// The run the batch went to.
    pub run_id: Uuid,
    /// The seqs its events got in the agent's log.
    pub first_seq: u64,
    pub last_seq: u64,
    /// False once the batch ended the run.
    pub run_open: bool,
}

/// The answer to a producer's request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Produced {
    Appended(Appended),
    /// The batch was committed before (a retry): nothing written.
    Duplicate,
}

/// Why a producer's request wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum ProduceError {
    #[error("agent {0} does not exist")]
    UnknownAgent(Uuid),
    #[error("Producer-Epoch {received} is older than this producer's current epoch {current}")]
    StaleEpoch { current: u64, received: u64 },
    #[error("Producer-Seq {received} skips ahead: the next seq is {expected}")]
    Gap { expected: u64, received: u64 },
    #[error("a new Producer-Epoch ({epoch}) must start at Producer-Seq 0, not {seq}")]
    EpochNotAtZero { epoch: u64, seq: u64 },
    #[error("{0}")]
    Refused(Refusal),
    /// Another run (ours, or another producer's) holds the agent.
    #[error("agent {agent_id} is already running run {run_id}")]
    RunInProgress { agent_id: Uuid, run_id: Uuid },
    /// A call waits for a person's approval or a client tool's result: no run starts until it
    /// is answered (a producer cannot answer calls it did not make).
    #[error("tool call {tool_call_id} waits for its answer: answer it before a new run starts")]
    CallWaiting { tool_call_id: String },
    /// The producer's run ended without it (cancelled, or its lease ran out).
    #[error("run {run_id} ended ({how}): begin a new run with run_started")]
    RunEnded { run_id: Uuid, how: &'static str },
    #[error(transparent)]
    Run(#[from] StartRunError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the writer has stopped")]
    WriterStopped,
}

impl From<AppendError> for ProduceError {
    fn from(error: AppendError) -> ProduceError {
        match error {
            AppendError::Store(error) => ProduceError::Store(error),
            AppendError::WriterStopped => ProduceError::WriterStopped,
        }
    }
}
