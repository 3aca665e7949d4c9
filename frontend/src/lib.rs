#![recursion_limit = "256"]
//! The browser entry point. The server sends every page as HTML; only its islands — the live
//! view, the run inspector, the history's timeline (`#[island]` in `app::pages`) — are
//! hydrated, each from the props the server wrote beside it. Everything else lives in `app`.

// The islands' entry points are exported by `app`; naming the crate links them in.
extern crate app;

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_islands();
}
