//! Arbitrary bytes as the Claude Code CLI's stream-json output, line by line, through the parser
//! the claude-cli provider uses. Nothing may panic.
#![no_main]

use agentstream_server::provider::claude_cli::ClaudeCliParser;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut parser = ClaudeCliParser::default();
    for line in text.lines() {
        if parser.parse_line(line).is_err() {
            return;
        }
    }
});
