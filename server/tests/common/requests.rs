//! Requests sent the short way: the answer, its JSON, or its status with its JSON.

use serde_json::Value;

/// Sending a request in a test: a failure to connect or a body that does not parse fails the
/// test, so each request reads as what it asks.
pub trait RequestExt {
    /// Sends the request: the answer, whatever its status.
    fn sent(self) -> impl std::future::Future<Output = reqwest::Response> + Send;
    /// Sends the request and reads the answer's JSON body.
    fn answer<T: serde::de::DeserializeOwned>(self) -> impl std::future::Future<Output = T> + Send;
    /// Sends the request: the answer's status and JSON body (null when it has none).
    fn status_json(self) -> impl std::future::Future<Output = (u16, Value)> + Send;
    /// Sends the request: the answer's JSON body, `None` when it could not be sent or read
    /// (for polls that try again).
    fn json_if_any(self) -> impl std::future::Future<Output = Option<Value>> + Send;
}

impl RequestExt for reqwest::RequestBuilder {
    async fn sent(self) -> reqwest::Response {
        self.send().await.unwrap()
    }

    async fn answer<T: serde::de::DeserializeOwned>(self) -> T {
        self.sent().await.json().await.unwrap()
    }

    async fn status_json(self) -> (u16, Value) {
        let response = self.sent().await;
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn json_if_any(self) -> Option<Value> {
        self.send().await.ok()?.json().await.ok()
    }
}
