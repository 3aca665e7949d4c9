use super::*;

fn files(list: &[(&str, &str)]) -> Files {
    list.iter().map(|(file, text)| (file.to_string(), text.to_string())).collect()
}

fn arrows(graph: &Graph) -> Vec<String> {
    graph
        .arrows
        .iter()
        .flat_map(|(from, targets)| targets.iter().map(move |to| format!("{from} -> {to}")))
        .collect()
}

#[test]
fn comments_strings_and_chars_are_not_code() {
    let code = parse::code_only(
        "let a = \"crate::x\"; // crate::y\n/* crate::z /* nested */ */ let c = '\"'; let r = r#\"crate::w\"#; fn f<'a>(x: &'a str) {}",
    );
    assert!(!code.contains("crate::"), "{code}");
    assert!(code.contains("fn f<'a>(x: &'a str)"), "{code}");
    assert_eq!(code.lines().count(), 2);
}

#[test]
fn use_trees_expand_to_paths_and_bound_names() {
    let uses = parse::use_paths(
        "use crate::a::{b, c::{d as e, self}};\npub use super::f::G;\npub(crate) use x::*;\nfn g() { let used = 1; }",
    );
    let seen: Vec<(String, String, bool)> =
        uses.iter().map(|u| (u.segments.join("::"), u.bound.clone(), u.public)).collect();
    assert_eq!(
        seen,
        [
            ("crate::a::b".to_owned(), "b".to_owned(), false),
            ("crate::a::c::d".to_owned(), "e".to_owned(), false),
            ("crate::a::c".to_owned(), "c".to_owned(), false),
            ("super::f::G".to_owned(), "G".to_owned(), true),
            ("x::*".to_owned(), "*".to_owned(), true),
        ]
    );
}

#[test]
fn arrows_lead_through_re_exports_to_where_an_item_lives() {
    let graph = graph(&files(&[
        ("lib.rs", "pub mod agent; pub mod store;"),
        ("agent/mod.rs", "mod run; pub use run::Runs;"),
        ("agent/run.rs", "use crate::store::Store; pub struct Runs;"),
        ("store/mod.rs", "pub trait Store {}"),
        // Names `Runs` through the re-export, and the store through a bound module name.
        ("state.rs", "use crate::agent::Runs; use crate::store; fn f(s: &dyn store::Store) {}"),
        ("main.rs", "use crate::state::X;"),
    ]));
    assert_eq!(
        arrows(&graph),
        [
            "agent/mod.rs -> agent/run.rs",
            "agent/run.rs -> store/mod.rs",
            "state.rs -> agent/run.rs",
            "state.rs -> store/mod.rs",
        ]
    );
}

#[test]
fn circles_and_upward_arrows_are_found() {
    let graph = graph(&files(&[
        ("lib.rs", ""),
        ("config.rs", "use crate::http::DEFAULT;"),
        ("http/mod.rs", "pub const DEFAULT: u32 = 1; use crate::http::rest::f;"),
        ("http/rest.rs", "pub fn f() { super::DEFAULT; crate::config::g(); }"),
        ("store.rs", "fn h() { crate::config::g(); }"),
    ]));
    assert_eq!(
        circles(&graph),
        [vec!["config.rs".to_owned(), "http/mod.rs".to_owned(), "http/rest.rs".to_owned()]]
    );
    let floors = Floors(&[&["", "http"], &["store"], &["config"]]);
    assert_eq!(floors.upward(&graph), ["config.rs -> http/mod.rs"]);
    assert!(floors.unplaced(&graph).is_empty());
    assert_eq!(
        Floors(&[&["http"]]).unplaced(&graph),
        ["config".to_owned(), "store".to_owned()].into_iter().collect()
    );
}

#[test]
fn only_what_the_known_list_does_not_allow_is_new() {
    let known = ["circle server: a.rs b.rs c.rs".to_owned(), "up server: a.rs -> b.rs".to_owned()];
    let found = [
        // Smaller than a known circle: allowed (it is being taken apart).
        "circle server: a.rs b.rs".to_owned(),
        "circle server: a.rs d.rs".to_owned(),
        "circle app: a.rs b.rs".to_owned(),
        "up server: a.rs -> b.rs".to_owned(),
        "up server: b.rs -> a.rs".to_owned(),
    ];
    assert_eq!(
        new_findings(&found, &known),
        ["circle server: a.rs d.rs", "circle app: a.rs b.rs", "up server: b.rs -> a.rs"]
    );
}

#[test]
fn super_in_an_inline_module_is_the_file_itself() {
    let graph = graph(&files(&[
        ("lib.rs", "pub mod a; pub mod b;"),
        ("a.rs", "pub fn f() {} #[cfg(test)] mod tests { use super::*; fn t() { super::f(); super::super::b::g(); } }"),
        ("b.rs", "pub fn g() {}"),
    ]));
    assert_eq!(arrows(&graph), ["a.rs -> b.rs"]);
}

#[test]
fn naming_a_module_is_no_arrow_but_naming_through_it_is() {
    let graph = graph(&files(&[
        ("lib.rs", "pub mod store; pub mod state;"),
        ("store/mod.rs", "mod open; pub use open::open;"),
        ("store/open.rs", "pub fn open() {}"),
        ("state.rs", "use crate::store; fn f() { store::open(); }"),
    ]));
    assert_eq!(arrows(&graph), ["state.rs -> store/open.rs", "store/mod.rs -> store/open.rs"]);
}
