//! The Durable Streams path past the router (`server/src/router/fast.rs`) answers exactly as the
//! router's route does. A path with a `%` escape still goes through the router, so one server
//! serves both: the same steps on `x1` (past the router) and on `%78%32` (the router, decoded to
//! `x2`) must give the same statuses, headers and bodies, once the names are swapped.

use crate::common;

use common::TestServer;
use reqwest::Method;

/// One request of the script: method, query, headers, body.
struct Step {
    method: Method,
    query: &'static str,
    headers: &'static [(&'static str, &'static str)],
    body: Vec<u8>,
}

fn step(
    method: Method,
    query: &'static str,
    headers: &'static [(&'static str, &'static str)],
    body: &str,
) -> Step {
    Step { method, query, headers, body: body.as_bytes().to_vec() }
}

const JSON: &[(&str, &str)] = &[("content-type", "application/json")];

fn script() -> Vec<Step> {
    let producer: &[(&str, &str)] = &[
        ("content-type", "application/json"),
        ("producer-id", "p"),
        ("producer-epoch", "0"),
        ("producer-seq", "0"),
    ];
    vec![
        step(Method::PUT, "", JSON, r#"[{"n":1}]"#),
        step(Method::PUT, "", JSON, ""),
        step(Method::POST, "", JSON, r#"[{"n":2},{"n":3}]"#),
        step(Method::POST, "", JSON, "{bad"),
        step(Method::POST, "", &[("content-type", "text/plain")], "text"),
        step(Method::POST, "", &[], "[1]"),
        step(Method::GET, "offset=-1", &[], ""),
        step(Method::GET, "offset=0000000000000000_0000000000000001", &[], ""),
        step(Method::GET, "offset=bogus", &[], ""),
        step(Method::GET, "offset=-1&live=long-poll&cursor=x", &[], ""),
        step(Method::HEAD, "", &[], ""),
        step(Method::PATCH, "", JSON, "[1]"),
        step(Method::POST, "", producer, r#"{"p":0}"#),
        step(Method::POST, "", producer, r#"{"p":0}"#),
        Step {
            method: Method::POST,
            query: "",
            headers: JSON,
            body: [b"[\"".as_slice(), &vec![b'x'; 9 * 1024 * 1024], b"\"]"].concat(),
        },
        step(
            Method::POST,
            "",
            &[("content-type", "application/json"), ("stream-closed", "true")],
            "",
        ),
        step(Method::POST, "", JSON, "[4]"),
        step(Method::GET, "offset=-1", &[], ""),
        step(Method::DELETE, "", &[], ""),
        step(Method::GET, "offset=-1", &[], ""),
        step(Method::HEAD, "", &[], ""),
    ]
}

/// An answer with the parts that differ between any two requests (the date, the request's id)
/// left out, and the second stream's names put back to the first's.
async fn answer(server: &TestServer, path: &str, step: &Step) -> String {
    let query = if step.query.is_empty() { String::new() } else { format!("?{}", step.query) };
    let mut request = server
        .http
        .request(step.method.clone(), server.url(&format!("/v1/streams/{path}{query}")))
        .body(step.body.clone());
    for (name, value) in step.headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("the server answers");
    let mut lines = vec![format!("{}", response.status())];
    let mut headers: Vec<String> = response
        .headers()
        .iter()
        .filter(|(name, _)| !["date", "x-request-id"].contains(&name.as_str()))
        .map(|(name, value)| format!("{name}: {}", value.to_str().unwrap_or("(not text)")))
        .collect();
    headers.sort();
    lines.extend(headers);
    lines.push(response.text().await.unwrap_or_default());
    // `x2` in base64 (in an ETag) is `eDI=`, `x1` is `eDE=`.
    lines.join("\n").replace("eDI=", "eDE=").replace("/x2", "/x1")
}

#[tokio::test]
async fn the_streams_path_past_the_router_answers_as_the_router_does() {
    let server = TestServer::start().await;
    for (index, step) in script().iter().enumerate() {
        let past = answer(&server, "x1", step).await;
        let routed = answer(&server, "%78%32", step).await;
        assert_eq!(past, routed, "step {index} ({} ?{})", step.method, step.query);
    }
    // Both were counted under the route's template.
    let metrics = server.get("/metrics").await.text().await.unwrap();
    let counted: u64 = metrics
        .lines()
        .filter(|line| {
            line.starts_with("agentstream_http_requests_total{route=\"/v1/streams/{*path}\"")
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    assert_eq!(counted, 2 * script().len() as u64, "{metrics}");
}
