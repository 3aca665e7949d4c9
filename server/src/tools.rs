//! Built-in tools the agent loop can run: safe, local, bounded.
//!
//! A tool takes its input object and returns a result value or an error sentence; an error is
//! still a result (`is_error: true`), never a crash of the run. Tools may report progress, and
//! stop promptly when the run is cancelled.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::provider::ToolSpec;

/// The `slow` tool sleeps at most this long, whatever it is asked.
pub const SLOW_TOOL_SECONDS_MAX: f64 = 30.0;
/// Expressions longer than this are refused by the calculator.
pub const CALCULATOR_EXPRESSION_CHARS_MAX: usize = 256;
/// Parenthesis nesting the calculator follows at most (its parser recurses).
const CALCULATOR_NESTING_MAX: usize = 32;

/// Progress reports of one call, as JSON values merged into the call's message.
pub type ProgressSender = mpsc::Sender<Value>;

/// What a tool's call returns: its result, or an error sentence the model reads.
pub type ToolFuture = BoxFuture<'static, Result<Value, String>>;

/// One call of a tool: its input object, where it reports progress, and the run's cancel.
pub struct ToolCall {
    pub input: Value,
    pub progress: ProgressSender,
    pub cancel: CancellationToken,
}

pub trait Tool: Send + Sync + 'static {
    fn spec(&self) -> ToolSpec;
    /// Whether every call waits for a person's approval, whichever agent makes it (an MCP
    /// server's `requires_approval` in the config file). Agents add their own with
    /// `metadata.requires_approval`.
    fn requires_approval(&self) -> bool {
        false
    }
    /// Whether the tool runs in the client (`agent::client_tools`): the server never calls it;
    /// a call waits in the log for the client's result.
    fn runs_in_client(&self) -> bool {
        false
    }
    fn call(&self, call: ToolCall) -> ToolFuture;
}

/// The tools every agent has.
pub fn builtin() -> Vec<Arc<dyn Tool>> {
    vec![Arc::new(Clock), Arc::new(Calculator), Arc::new(Slow)]
}

/// `clock`: the current time in UTC.
pub struct Clock;

impl Tool for Clock {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "clock".into(),
            description: "The current date and time in UTC (RFC 3339).".into(),
            input_schema: json!({ "type": "object", "properties": {} }),
        }
    }

    fn call(&self, _: ToolCall) -> ToolFuture {
        Box::pin(async { Ok(json!(chrono::Utc::now().to_rfc3339())) })
    }
}

/// `calculator`: evaluates `+ - * /`, parentheses and decimals.
pub struct Calculator;

impl Tool for Calculator {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "calculator".into(),
            description: "Evaluates an arithmetic expression with + - * / and parentheses.".into(),
            input_schema: json!({
                "type": "object",
                "properties": { "expression": { "type": "string" } },
                "required": ["expression"]
            }),
        }
    }

    fn call(&self, ToolCall { input, .. }: ToolCall) -> ToolFuture {
        Box::pin(async move {
            let expression = input
                .get("expression")
                .and_then(Value::as_str)
                .ok_or("the input needs an \"expression\" string")?;
            if expression.chars().count() > CALCULATOR_EXPRESSION_CHARS_MAX {
                return Err(format!(
                    "the expression is longer than {CALCULATOR_EXPRESSION_CHARS_MAX} characters"
                ));
            }
            let value = evaluate(expression)?;
            // Whole numbers read as whole numbers (`42`, not `42.0`) up to where f64 is exact.
            const EXACT_INTEGER_MAX: f64 = 9_007_199_254_740_992.0;
            if value.fract() == 0.0 && value.abs() <= EXACT_INTEGER_MAX {
                Ok(json!(value as i64))
            } else {
                Ok(json!(value))
            }
        })
    }
}

/// Evaluates an arithmetic expression. A tiny recursive-descent parser with a nesting bound.
pub fn evaluate(expression: &str) -> Result<f64, String> {
    let tokens: Vec<char> = expression.chars().collect();
    let mut parser = Parser { tokens, position: 0, depth: 0 };
    let value = parser.sum()?;
    if parser.peek().is_some() {
        return Err(format!(
            "unexpected {:?} at position {}",
            parser.tokens[parser.position], parser.position
        ));
    }
    if !value.is_finite() {
        return Err("the result is not a finite number (division by zero?)".into());
    }
    Ok(value)
}

struct Parser {
    tokens: Vec<char>,
    position: usize,
    depth: usize,
}

impl Parser {
    /// The next character that is not whitespace (whitespace separates, never joins, numbers).
    fn peek(&mut self) -> Option<char> {
        while self.tokens.get(self.position).is_some_and(|c| c.is_whitespace()) {
            self.position += 1;
        }
        self.tokens.get(self.position).copied()
    }

    fn sum(&mut self) -> Result<f64, String> {
        let mut value = self.product()?;
        while let Some(operator @ ('+' | '-')) = self.peek() {
            self.position += 1;
            let right = self.product()?;
            value = if operator == '+' { value + right } else { value - right };
        }
        Ok(value)
    }

    fn product(&mut self) -> Result<f64, String> {
        let mut value = self.factor()?;
        while let Some(operator @ ('*' | '/')) = self.peek() {
            self.position += 1;
            let right = self.factor()?;
            value = if operator == '*' { value * right } else { value / right };
        }
        Ok(value)
    }

    fn factor(&mut self) -> Result<f64, String> {
        match self.peek() {
            Some('-') => {
                self.position += 1;
                Ok(-self.factor()?)
            }
            Some('(') => {
                self.depth += 1;
                if self.depth > CALCULATOR_NESTING_MAX {
                    return Err(format!("parentheses nest deeper than {CALCULATOR_NESTING_MAX}"));
                }
                self.position += 1;
                let value = self.sum()?;
                if self.peek() != Some(')') {
                    return Err("a parenthesis is not closed".into());
                }
                self.position += 1;
                self.depth -= 1;
                Ok(value)
            }
            Some(c) if c.is_ascii_digit() || c == '.' => {
                let start = self.position;
                while self
                    .tokens
                    .get(self.position)
                    .is_some_and(|c| c.is_ascii_digit() || *c == '.')
                {
                    self.position += 1;
                }
                let text: String = self.tokens[start..self.position].iter().collect();
                text.parse().map_err(|_| format!("{text:?} is not a number"))
            }
            Some(c) => Err(format!("unexpected {c:?} at position {}", self.position)),
            None => Err("the expression ends too early".into()),
        }
    }
}

/// `slow`: waits the given seconds (at most [`SLOW_TOOL_SECONDS_MAX`]), reporting progress each
/// second; stops at once when the run is cancelled.
pub struct Slow;

impl Tool for Slow {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "slow".into(),
            description: "Waits a number of seconds, reporting progress; for demos and tests."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": { "seconds": { "type": "number" } }
            }),
        }
    }

    fn call(&self, call: ToolCall) -> ToolFuture {
        Box::pin(async move {
            let seconds = call
                .input
                .get("seconds")
                .and_then(Value::as_f64)
                .unwrap_or(2.0)
                .clamp(0.0, SLOW_TOOL_SECONDS_MAX);
            let total = Duration::from_secs_f64(seconds);
            let started = tokio::time::Instant::now();
            let mut elapsed_whole_seconds = 0u64;
            while started.elapsed() < total {
                let step = (total - started.elapsed()).min(Duration::from_secs(1));
                tokio::select! {
                    _ = call.cancel.cancelled() => return Err("cancelled".into()),
                    _ = tokio::time::sleep(step) => {}
                }
                elapsed_whole_seconds += 1;
                // Progress is best effort: a full queue drops a report, never blocks the tool.
                let _ = call.progress.try_send(json!({
                    "progress": format!("{}/{}", elapsed_whole_seconds.min(seconds.ceil() as u64), seconds.ceil() as u64)
                }));
            }
            Ok(json!(format!("waited {seconds} s")))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_calculator_follows_precedence_and_refuses_nonsense() {
        let cases: &[(&str, Result<f64, ()>)] = &[
            ("2*(3+4)", Ok(14.0)),
            ("1 + 2 * 3 - 4 / 2", Ok(5.0)),
            ("-(2.5 * 2)", Ok(-5.0)),
            ("1/0", Err(())),
            ("2 +", Err(())),
            ("(1", Err(())),
            ("abc", Err(())),
            ("1 2", Err(())),
        ];
        for (expression, expected) in cases {
            let result = evaluate(expression);
            match expected {
                Ok(value) => assert_eq!(result, Ok(*value), "{expression}"),
                Err(()) => assert!(result.is_err(), "{expression} gave {result:?}"),
            }
        }
        let deep = format!("{}1{}", "(".repeat(100), ")".repeat(100));
        assert!(evaluate(&deep).is_err());
    }
}
