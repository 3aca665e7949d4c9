//! Arbitrary event sequences (JSON lines of `AgentEvent`, seqs renumbered to be a log) through the
//! Letta mapping in both cuts. Nothing may panic, and `seq_id` only goes up.
#![no_main]

use agentstream_server::surfaces::letta::mapping::{map_all, Cut, LettaItem};
use libfuzzer_sys::fuzz_target;

mod event_log;

fuzz_target!(|data: &[u8]| {
    let events = event_log::log_of(data);
    for cut in [Cut::Tokens, Cut::Steps] {
        let items = map_all(cut, &events);
        let mut last = 0;
        for item in &items {
            if let LettaItem::Message(message) = item {
                assert!(message.seq_id > last, "seq_id went back");
                last = message.seq_id;
            }
            let _ = item.to_json();
        }
    }
});
