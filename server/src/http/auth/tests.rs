use super::*;

#[test]
fn hosts_are_loopback_or_allowed() {
    // (Host, allowed hosts, passes)
    let cases: [(Option<&str>, &[&str], bool); 12] = [
        (None, &[], false),
        (Some("127.0.0.1:3000"), &[], true),
        (Some("localhost:3000"), &[], true),
        (Some("LOCALHOST"), &[], true),
        (Some("[::1]:3000"), &[], true),
        (Some("127.8.9.10"), &[], true),
        (Some("evil.example:3000"), &[], false),
        (Some("evil.example"), &[], false),
        (Some("192.168.1.5:3000"), &[], false),
        (Some("agents.example.com"), &["agents.example.com"], true),
        (Some("Agents.Example.com:443"), &["agents.example.com"], true),
        (Some("other.example.com"), &["agents.example.com"], false),
    ];
    for (host, allowed, passes) in cases {
        let mut headers = HeaderMap::new();
        if let Some(host) = host {
            headers.insert(header::HOST, HeaderValue::from_str(host).unwrap());
        }
        let allowed: Vec<String> = allowed.iter().map(|host| host.to_string()).collect();
        assert_eq!(host_allowed(&headers, &allowed), passes, "{host:?} {allowed:?}");
    }
}

#[test]
fn cross_site_requests_are_told_apart() {
    // (Sec-Fetch-Site, Origin, same origin)
    let cases = [
        (None, None, true),
        (Some("same-origin"), None, true),
        (Some("none"), None, true),
        (Some("cross-site"), None, false),
        (Some("same-site"), None, false),
        (None, Some("http://127.0.0.1:3000"), true),
        (None, Some("https://evil.example"), false),
        (Some("cross-site"), Some("http://127.0.0.1:3000"), false),
    ];
    for (site, origin, same) in cases {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("127.0.0.1:3000"));
        if let Some(site) = site {
            headers.insert("sec-fetch-site", HeaderValue::from_static(site));
        }
        if let Some(origin) = origin {
            headers.insert(header::ORIGIN, HeaderValue::from_static(origin));
        }
        assert_eq!(same_origin_request(&headers), same, "{site:?} {origin:?}");
    }
}

#[test]
fn tokens_compare_whole() {
    assert!(same_secret(b"s3cret", b"s3cret"));
    assert!(!same_secret(b"s3cres", b"s3cret"));
    assert!(!same_secret(b"s3cre", b"s3cret"));
}

#[test]
fn credentials_are_found_where_clients_put_them() {
    let mut headers = HeaderMap::new();
    headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer abc"));
    headers.insert(header::COOKIE, HeaderValue::from_static("a=1; agentstream_token=xyz; b=2"));
    assert_eq!(bearer(&headers), Some("abc"));
    assert_eq!(cookie(&headers, TOKEN_COOKIE), Some("xyz"));
    assert_eq!(query_token(Some("since=3&token=a%2Bb+c")), Some("a+b c".to_owned()));
    assert_eq!(query_token(Some("since=3")), None);
}

#[test]
fn origins_must_match_the_host_or_be_allowed() {
    let mut headers = HeaderMap::new();
    headers.insert(header::HOST, HeaderValue::from_static("127.0.0.1:3000"));
    assert!(origin_allowed(&headers, &[]), "no Origin: not a browser");
    headers.insert(header::ORIGIN, HeaderValue::from_static("http://127.0.0.1:3000"));
    assert!(origin_allowed(&headers, &[]));
    headers.insert(header::ORIGIN, HeaderValue::from_static("https://evil.example"));
    assert!(!origin_allowed(&headers, &[]));
    assert!(origin_allowed(&headers, &["https://evil.example".to_owned()]));
}
