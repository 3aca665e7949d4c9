//! Arbitrary bytes as what clients send: a WebSocket text frame (`ClientMessage`) and the JSON
//! bodies of the REST and Letta endpoints. Parsing either succeeds or gives an error; a parsed
//! message survives a round trip.
#![no_main]

use app::protocol::{CancelRequest, ClientMessage, CreateAgentRequest, CreateRunRequest};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(message) = serde_json::from_slice::<ClientMessage>(data) {
        let again = serde_json::to_string(&message).expect("a parsed message serializes");
        let back: ClientMessage = serde_json::from_str(&again).expect("and parses again");
        assert_eq!(back, message);
    }
    let _ = serde_json::from_slice::<CreateAgentRequest>(data);
    let _ = serde_json::from_slice::<CreateRunRequest>(data);
    let _ = serde_json::from_slice::<CancelRequest>(data);
    let _ = agentstream_server::surfaces::letta::parse_request(data);
});
