//! Arbitrary bytes as a provider's SSE body, cut into arbitrary chunks, through the same SSE
//! framing and the Anthropic and OpenAI parsers the server uses. Nothing may panic; every event
//! is either parsed or refused with an error.
#![no_main]

use agentstream_server::provider::anthropic::AnthropicParser;
use agentstream_server::provider::http::SseParser;
use agentstream_server::provider::openai::OpenAiParser;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use libfuzzer_sys::fuzz_target;

fn run(parser: &mut dyn SseParser, data: &[u8]) {
    // The first byte picks the chunk size, so the framing is tested at every split.
    let Some((&split, body)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(split % 64) + 1;
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        body.chunks(chunk).map(|piece| Ok(piece.to_vec())).collect();
    let mut events = futures::stream::iter(chunks).eventsource();
    futures::executor::block_on(async {
        while let Some(event) = events.next().await {
            let Ok(event) = event else { return };
            if parser.parse(&event.event, &event.data).is_err() {
                return;
            }
        }
        let _ = parser.finish();
    });
}

fuzz_target!(|data: &[u8]| {
    run(&mut AnthropicParser::default(), data);
    run(&mut OpenAiParser::default(), data);
});
