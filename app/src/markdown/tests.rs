//! The renderer against the Markdown models write, against hostile input, and streamed token by
//! token. Data-driven: each case is an input and what its output must (not) hold.

use super::*;

/// Every tag in `html` is one the renderer writes, with only its attributes, and every link's
/// address is safe: the output holds no markup the input chose.
fn assert_only_allowed_markup(html: &str) {
    const TAGS: &[&str] = &[
        "p",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "blockquote",
        "ul",
        "ol",
        "li",
        "em",
        "strong",
        "del",
        "code",
        "pre",
        "a",
        "br",
        "hr",
        "div",
        "span",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
        "input",
        "button",
    ];
    const ATTRIBUTES: &[&str] =
        &["href", "title", "rel", "target", "class", "start", "type", "disabled", "checked"];
    let mut rest = html;
    while let Some(open) = rest.find('<') {
        let close = rest[open..].find('>').expect("every tag is closed") + open;
        let tag = &rest[open + 1..close];
        let tag = tag.strip_prefix('/').unwrap_or(tag);
        let name = tag.split(' ').next().unwrap();
        assert!(TAGS.contains(&name), "tag {name:?} in {html}");
        // Attributes: `name="value"` or a bare name; values never hold `"` (escaped).
        let mut attributes = &tag[name.len()..];
        while let Some(start) = attributes.find(|c: char| c != ' ') {
            attributes = &attributes[start..];
            let end = attributes.find(['=', ' ']).unwrap_or(attributes.len());
            let attribute = &attributes[..end];
            assert!(ATTRIBUTES.contains(&attribute), "attribute {attribute:?} in {html}");
            attributes = &attributes[end..];
            if let Some(value) = attributes.strip_prefix("=\"") {
                let value_end = value.find('"').expect("a closed value");
                if attribute == "href" {
                    let href = value[..value_end].replace("&amp;", "&");
                    assert!(url_is_safe(&href), "href {href:?} in {html}");
                }
                attributes = &value[value_end + 1..];
            }
        }
        rest = &rest[close + 1..];
    }
}

#[test]
fn what_models_write_renders() {
    let cases: &[(&str, &[&str])] = &[
        ("# Release notes", &["<h1>Release notes</h1>"]),
        ("**bold** and *it* and ~~gone~~", &["<strong>bold</strong>", "<em>it</em>", "<del>gone</del>"]),
        ("- one\n- two", &["<ul>", "<li>one</li>", "<li>two</li>"]),
        ("3. three\n4. four", &["<ol start=\"3\">", "<li>three</li>"]),
        ("- [x] done\n- [ ] open", &["<input type=\"checkbox\" disabled checked>", "<input type=\"checkbox\" disabled>"]),
        (
            "[link](https://example.com)",
            &["<a href=\"https://example.com\" rel=\"noopener noreferrer nofollow\" target=\"_blank\">link</a>"],
        ),
        ("see https://example.com/a_b.", &["<a href=\"https://example.com/a_b\"", ">https://example.com/a_b</a>."]),
        ("(https://example.com/x)", &["href=\"https://example.com/x\"", "</a>)"]),
        ("`let x = 1;`", &["<code>let x = 1;</code>"]),
        (
            "```rust\nfn main() {}\n```",
            &[
                "<span class=\"code-language\">rust</span>",
                "<button type=\"button\" class=\"copy-code\"",
                "<pre><code class=\"language-rust\"><span class=\"tok-keyword\">fn</span> main() {}\n</code></pre>",
            ],
        ),
        (
            "| a | b |\n|:--|--:|\n| 1 | 2 |",
            &["<table>", "<th class=\"left\">a</th>", "<th class=\"right\">b</th>", "<td class=\"left\">1</td>"],
        ),
        ("> quoted", &["<blockquote>", "<p>quoted</p>"]),
        ("a  \nb", &["a<br>b"]),
        ("one line\nthe next", &["<p>one line<br>the next</p>"]),
        ("---", &["<hr>"]),
        ("a & b < c", &["a &amp; b &lt; c"]),
        // Named entities: HTML 4.01's and `&apos;` (vendor/pulldown-cmark/VENDORED.md); a name
        // outside them stays as written, like any `&name;` CommonMark does not know.
        ("&copy; &hellip; &rarr; &nbsp;&apos;", &["<p>© … → \u{a0}&#39;</p>"]),
        ("&AElig; &zwnj;&amp; &zeta; &Aacute;", &["<p>Æ \u{200c}&amp; ζ Á</p>"]),
        ("&NotLessEqual; &bogus;", &["<p>&amp;NotLessEqual; &amp;bogus;</p>"]),
        ("&#169; &#x2192;", &["<p>© →</p>"]),
        // Reference links match their definition ignoring ASCII case (VENDORED.md: no Unicode
        // folding); a label that matches nothing stays text.
        ("[The Docs] and [the docs]\n\n[THE DOCS]: https://example.com/docs", &[
            "<p><a href=\"https://example.com/docs\" rel=\"noopener noreferrer nofollow\" \
             target=\"_blank\">The Docs</a> and <a href=\"https://example.com/docs\"",
            "target=\"_blank\">the docs</a></p>",
        ]),
        ("[nowhere]\n\n[elsewhere]: https://example.com", &["<p>[nowhere]</p>"]),
    ];
    for (markdown, wanted) in cases {
        let html = to_html(markdown);
        assert_only_allowed_markup(&html);
        for piece in *wanted {
            assert!(html.contains(piece), "{markdown:?} → {html}\nwanted {piece:?}");
        }
    }
}

#[test]
fn hostile_input_stays_text() {
    let deep_list = format!("{}x", "- ".repeat(10_000));
    let deep_quote = format!("{}x", "> ".repeat(10_000));
    let deep_emphasis = format!("{}x{}", "*a ".repeat(5_000), " b*".repeat(5_000));
    let long_line = "word ".repeat(200_000);
    let nested_fences = "````\n```\n<script>alert(1)</script>\n```\n````";
    let cases: Vec<(&str, &[&str])> = vec![
        ("<script>alert(1)</script>", &["&lt;script&gt;alert(1)&lt;/script&gt;"]),
        ("<img src=x onerror=alert(1)>", &["&lt;img src=x onerror=alert(1)&gt;"]),
        ("a <b onmouseover=alert(1)>b</b>", &["&lt;b onmouseover=alert(1)&gt;"]),
        ("<div>\n*a*\n</div>", &["&lt;div&gt;"]),
        ("[x](javascript:alert(1))", &["x"]),
        ("[x](JaVaScRiPt:alert(1))", &["x"]),
        ("[x](<java\tscript:alert(1)>)", &["x"]),
        ("[x](&#106;avascript:alert(1))", &["x"]),
        ("[x](data:text/html;base64,PHNjcmlwdD4=)", &["x"]),
        ("[x](vbscript:msgbox(1))", &["x"]),
        ("<javascript:alert(1)>", &[]),
        ("[x]: javascript:alert(1)\n\n[x]", &[]),
        (
            "![pixel](https://tracker.example/p.png)",
            &["<span class=\"image\">pixel <a href=\"https://tracker.example/p.png\""],
        ),
        ("![x](javascript:alert(1))", &["<span class=\"image\">x</span>"]),
        (
            "[a](https://e.com \"t\\\" onclick=\\\"alert(1)\")",
            &["title=\"t&quot; onclick=&quot;alert(1)\""],
        ),
        ("```\"><script>x\nbody\n```", &["<pre><code>body\n</code></pre>"]),
        (nested_fences, &["&lt;script&gt;"]),
        (&deep_list, &["x"]),
        (&deep_quote, &["x"]),
        (&deep_emphasis, &["x"]),
        (&long_line, &["word word"]),
    ];
    for (markdown, wanted) in cases {
        let html = to_html(markdown);
        assert_only_allowed_markup(&html);
        assert!(!html.contains("<img"), "an image would be fetched: {html}");
        assert!(!html.contains("<script"), "{html}");
        assert!(
            !html.to_ascii_lowercase().contains("href=\"javascript")
                && !html.contains("href=\"data:")
                && !html.contains("href=\"vbscript:"),
            "{html}"
        );
        for piece in wanted {
            assert!(html.contains(piece), "{:.80} → {:.300}\nwanted {piece:?}", markdown, html);
        }
        let depth = html.matches("<ul>").count() + html.matches("<blockquote>").count();
        assert!(depth <= NESTING_DEPTH_MAX, "{depth} nested containers");
    }
}

#[test]
fn a_link_is_a_link_only_where_it_is_safe() {
    let cases = [
        ("https://example.com", true),
        ("http://example.com", true),
        ("mailto:a@example.com", true),
        ("/agents", true),
        ("#top", true),
        ("?q=1", true),
        ("page.html", true),
        ("javascript:alert(1)", false),
        (" JAVASCRIPT:alert(1)", false),
        ("java\tscript:alert(1)", false),
        ("java\u{0}script:alert(1)", false),
        ("data:text/html,x", false),
        ("vbscript:x", false),
        ("file:///etc/passwd", false),
        ("ftp://example.com", false),
    ];
    for (url, safe) in cases {
        assert_eq!(url_is_safe(url), safe, "{url:?}");
    }
}

#[test]
fn code_is_coloured_by_its_language() {
    let cases: &[(&str, &str, &str)] = &[
        ("rust", "let s = \"a\"; // c", "<span class=\"tok-keyword\">let</span> s = <span class=\"tok-string\">&quot;a&quot;</span>; <span class=\"tok-comment\">// c</span>"),
        ("py", "def f(): return 42", "<span class=\"tok-keyword\">def</span> f(): <span class=\"tok-keyword\">return</span> <span class=\"tok-number\">42</span>"),
        ("ts", "const x = `a${b}`;", "<span class=\"tok-keyword\">const</span> x = <span class=\"tok-string\">`a${b}`</span>;"),
        ("json", "{\"a\": true, \"b\": 1.5}", "{<span class=\"tok-string\">&quot;a&quot;</span>: <span class=\"tok-keyword\">true</span>, <span class=\"tok-string\">&quot;b&quot;</span>: <span class=\"tok-number\">1.5</span>}"),
        ("bash", "echo a#b # note", "echo a#b <span class=\"tok-comment\"># note</span>"),
        ("sql", "SELECT id FROM t -- x", "<span class=\"tok-keyword\">SELECT</span> id <span class=\"tok-keyword\">FROM</span> t <span class=\"tok-comment\">-- x</span>"),
        ("rust", "x2 = v1_0; /* open", "x2 = v1_0; <span class=\"tok-comment\">/* open</span>"),
        ("elixir", "<b>", "&lt;b&gt;"),
    ];
    for (language, code, wanted) in cases {
        let mut out = String::new();
        highlight(Language::of(language), code, &mut out);
        assert_eq!(out, *wanted, "{language}: {code}");
    }
}

#[test]
fn a_cut_token_is_drawn_whole() {
    let cases: &[(&str, &str)] = &[
        ("plain text", "plain text"),
        ("this is **bol", "this is **bol**"),
        ("this is *it", "this is *it*"),
        ("2 * 3 is six", "2 * 3 is six"),
        ("***both", "***both***"),
        ("a ~~gone", "a ~~gone~~"),
        ("some `code", "some `code`"),
        ("`a` and **b", "`a` and **b**"),
        ("snake_case and _it", "snake_case and _it_"),
        ("* item *a", "* item *a*"),
        ("see [the docs](https://exa", "see the docs"),
        ("First **", "First "),
        ("- two with `", "- two with "),
        ("a **b** c", "a **b** c"),
        ("see [the do", "see "),
        ("see [done](https://e.com) ok", "see [done](https://e.com) ok"),
        ("first\n\nsecond **b", "first\n\nsecond **b**"),
        ("text\n``", "text\n"),
        ("text\n```py", "text\n"),
        ("```rust\nfn main() {", "```rust\nfn main() {"),
        ("```rust\nfn main() {}\n``", "```rust\nfn main() {}\n"),
        ("| a | b |", "| a | b |\n|---|---|"),
        ("| a | b |\n|--", "| a | b |\n|---|---|"),
        ("| a | b |\n|---|---|", "| a | b |\n|---|---|"),
    ];
    for (tail, wanted) in cases {
        assert_eq!(repair(tail), *wanted, "{tail:?}");
    }
}

const STREAMED: &str = "# Plan\n\nFirst **bold** words\n#hashtag goes on\n***really*** too and a [link](https://example.com).\n\n\
- one\n- two with `code`\n\n```rust\nfn main() {\n    println!(\"hi\");\n}\n```\n\n\
| a | b |\n|---|---|\n| 1 | 2 |\n\n> a quote\n\nThe end, see https://example.com/x.";

/// Fed one character at a time, the blocks end where one render of the whole text does, a
/// finished block never changes after it is finished, and no prefix shows a raw fence.
#[test]
fn a_streamed_message_ends_as_the_whole_one_and_finished_blocks_stay() {
    let mut blocks = Blocks::default();
    let mut finished: Vec<Block> = Vec::new();
    for end in (1..=STREAMED.len()).filter(|end| STREAMED.is_char_boundary(*end)) {
        blocks.update(&STREAMED[..end], false);
        let list = blocks.list();
        let (done, _open) = list.split_at(list.len().saturating_sub(1));
        assert!(
            done.starts_with(&finished) || finished.starts_with(done),
            "a finished block changed at {end}"
        );
        if done.len() > finished.len() {
            finished = done.to_vec();
        }
        let html = blocks.html();
        assert!(!html.contains("```"), "a raw fence at {end}: {html}");
        assert_only_allowed_markup(&html);
    }
    blocks.update(STREAMED, true);
    assert_eq!(blocks.html(), Blocks::of(STREAMED).html());
    assert!(blocks.list().len() >= 7, "{:?}", blocks.list());
}

#[test]
fn a_text_that_changed_instead_of_growing_is_rendered_again() {
    let mut blocks = Blocks::default();
    blocks.update("first\n\nsecond\n\nthird", false);
    blocks.update("other\n\nsecond", true);
    assert_eq!(blocks.html(), Blocks::of("other\n\nsecond").html());
}
