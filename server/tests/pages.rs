//! The server-rendered pages answer with the status their text says.
use crate::common;

use common::TestServer;
use uuid::Uuid;

async fn page(server: &TestServer, path: &str) -> (u16, String) {
    let response = server.get(path).await;
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

#[tokio::test]
async fn an_agent_that_is_not_there_is_a_404_page() {
    let (server, agent_id) = TestServer::start().await.with_agent().await;
    let (status, body) = page(&server, &format!("/agents/{agent_id}/history")).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("history"), "{body}");

    for path in
        [format!("/agents/{}/history", Uuid::new_v4()), format!("/agents/{}", Uuid::new_v4())]
    {
        let (status, body) = page(&server, &path).await;
        assert_eq!(status, 404, "{path}: {body}");
        assert!(body.contains("does not exist"), "{path}: {body}");
    }
    for path in ["/agents/not-a-uuid/history", "/agents/not-a-uuid"] {
        let (status, body) = page(&server, path).await;
        assert_eq!(status, 404, "{path}: {body}");
        assert!(body.contains("not an agent id"), "{path}: {body}");
    }

    // A deleted agent's history is gone too.
    let deleted = server.delete(&format!("/v1/agents/{agent_id}")).await;
    assert!(deleted.status().is_success(), "{}", deleted.status());
    let (status, _) = page(&server, &format!("/agents/{agent_id}/history")).await;
    assert_eq!(status, 404);
}
