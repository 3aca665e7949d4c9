//! A message's text drawn as Markdown ([`crate::markdown`]): its blocks are kept between
//! tokens, and a block's element is made once per render of that block — finished blocks are
//! never touched again, only the open one at the end. The server draws the same blocks, so the
//! history page and the live view hold one DOM.

use leptos::prelude::*;
use uuid::Uuid;

use crate::markdown::{Block, Blocks};
use crate::timeline::{RunStatus, Timeline};

/// The body of a user, text or thinking message.
#[component]
pub(super) fn MarkdownBody(
    timeline: ReadSignal<Timeline>,
    message_id: Uuid,
    version: Memo<Option<u64>>,
) -> impl IntoView {
    let blocks = StoredValue::new(Blocks::default());
    // While its run goes on, the open block is drawn repaired (a cut `**` closed…); when the run
    // ends — an event of another message — it is drawn again as written.
    let finished = Memo::new(move |_| {
        timeline.with(|timeline| {
            timeline
                .message(message_id)
                .and_then(|message| message.run_id)
                .and_then(|run_id| timeline.run(run_id))
                .is_none_or(|run| run.status != RunStatus::Running)
        })
    });
    let list = move || -> Vec<Block> {
        let _ = version.get();
        let finished = finished.get();
        timeline.with_untracked(|timeline| {
            let Some(message) = timeline.message(message_id) else {
                return Vec::new();
            };
            blocks.update_value(|blocks| blocks.update(message.text(), finished));
            blocks.with_value(Blocks::list)
        })
    };
    let on_click = move |event: leptos::ev::MouseEvent| {
        #[cfg(feature = "hydrate")]
        copy_code(&event);
        #[cfg(not(feature = "hydrate"))]
        let _ = event;
    };
    view! {
        <div class="body markdown" on:click=on_click>
            <For each=list key=|block| (block.start, block.revision) let:block>
                <div class="block" inner_html=block.html.to_string()></div>
            </For>
        </div>
    }
}

/// A message's "Copy" button: its text as Markdown, as the log has it, to the clipboard.
#[component]
pub(super) fn CopyMessage(timeline: ReadSignal<Timeline>, message_id: Uuid) -> impl IntoView {
    let label = RwSignal::new("Copy");
    let copy = move |_| {
        let text = timeline.with_untracked(|timeline| {
            timeline
                .message(message_id)
                .map(|message| message.text().to_owned())
                .unwrap_or_default()
        });
        #[cfg(feature = "hydrate")]
        {
            let Some(window) = web_sys::window() else {
                return;
            };
            let written = window.navigator().clipboard().write_text(&text);
            leptos::task::spawn_local(async move {
                let copied = wasm_bindgen_futures::JsFuture::from(written).await.is_ok();
                label.set(if copied { "Copied" } else { "Copy failed" });
            });
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = (text, label);
    };
    view! {
        <button type="button" class="copy-message" title="Copy the message as Markdown" on:click=copy>
            {move || label.get()}
        </button>
    }
}

/// A click on a code block's copy button: the block's code — its text only, not the bar's
/// label — to the clipboard, and the button says whether it worked.
#[cfg(feature = "hydrate")]
fn copy_code(event: &leptos::ev::MouseEvent) {
    use wasm_bindgen::JsCast;
    let Some(button) = event
        .target()
        .and_then(|target| target.dyn_into::<web_sys::Element>().ok())
        .and_then(|element| element.closest("button.copy-code").ok().flatten())
    else {
        return;
    };
    let Some(code) = button
        .closest(".code")
        .ok()
        .flatten()
        .and_then(|block| block.query_selector("pre code").ok().flatten())
    else {
        return;
    };
    let text = code.text_content().unwrap_or_default();
    let Some(window) = web_sys::window() else {
        return;
    };
    let written = window.navigator().clipboard().write_text(&text);
    leptos::task::spawn_local(async move {
        let copied = wasm_bindgen_futures::JsFuture::from(written).await.is_ok();
        button.set_text_content(Some(if copied { "Copied" } else { "Copy failed" }));
    });
}
