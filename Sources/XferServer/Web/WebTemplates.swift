import Mustache
import XferCore

/// The web view's pages: mustache templates compiled once, every `{{value}}` HTML-escaped
/// (`<`, `>`, `&`, `"`, `'`); the one unescaped slot is the layout's `{{{body}}}`, which only
/// ever holds a page these templates rendered. Names are set in `<bdi>` so a right-to-left
/// mark in one cannot reorder the text around it. Nothing is fetched from anywhere but this
/// server (the CSP says so too).
enum WebTemplates {
    static let library: MustacheLibrary = {
        MustacheContentTypes.register(ScalarHTML(), named: ScalarHTML.name)
        var library = MustacheLibrary()
        for (name, text) in sources {
            // The templates are constants of this file: one that does not parse is a bug the
            // first test finds. Each escapes with ScalarHTML.
            try! library.register("{{% CONTENT_TYPE: \(ScalarHTML.name)}}" + text, named: name)
        }
        return library
    }()

    /// HTML escaping by Unicode scalar. swift-mustache's own escapes by `Character`, so a `"`
    /// followed by a combining mark (one grapheme, not equal to `"`) went out raw and could
    /// end an attribute value.
    struct ScalarHTML: MustacheContentType {
        static let name = "XFER_HTML"

        func escapeText(_ text: String) -> String { MarkupText.escaped(text, apostrophe: "&#39;") }
    }

    /// Renders `page` with `values`, inside the layout.
    static func render(_ page: String, _ values: [String: Any], layout: [String: Any]) -> String {
        let body = library.render(values, withTemplate: page) ?? ""
        var outer = layout
        outer["body"] = body
        return library.render(outer, withTemplate: "layout") ?? body
    }

    static let sources: [String: String] = [
        "layout": """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="referrer" content="same-origin">
        <title>{{title}} · xfer</title>
        <link rel="stylesheet" href="/web/static/app.css">
        <link rel="icon" href="/web/static/icon.svg" type="image/svg+xml">
        <script src="/web/static/app.js" defer></script>
        </head>
        <body{{#events}} data-events="{{events}}"{{/events}}>
        <header class="bar">
        <a class="brand" href="/web/">xfer</a>
        {{#signedIn}}
        <a href="/web/shares" id="shares-link">Share links</a>
        <span class="who">Signed in as <bdi>{{account}}</bdi></span>
        <form method="post" action="/web/signout" class="inline"><input type="hidden" name="csrf" value="{{csrf}}"><button type="submit" id="signout">Sign out</button></form>
        {{/signedIn}}
        </header>
        <main id="main">
        {{{body}}}
        </main>
        <footer class="foot">xfer {{version}}</footer>
        </body>
        </html>
        """,
        "signin": """
        <section class="card narrow">
        <h1>Sign in</h1>
        <p>Paste an account token (<code>xfer account create</code> or <code>xfer token new</code> prints one). It is exchanged for a session; the token itself is never kept in the browser.</p>
        {{#error}}<p class="error" role="alert">{{error}}</p>{{/error}}
        <form method="post" action="/web/signin" id="signin-form">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <label for="token">Account token</label>
        <input type="password" id="token" name="token" autocomplete="off" required maxlength="256">
        <button type="submit" id="signin">Sign in</button>
        </form>
        </section>
        """,
        "containers": """
        <h1>Containers</h1>
        <section class="usage">
        <label for="quota">Storage: {{used}} of {{quota}}</label>
        <meter id="quota" min="0" max="{{quotaBytes}}" value="{{usedBytes}}" high="{{highBytes}}">{{used}}</meter>
        </section>
        {{^containers}}<p class="empty">No containers yet: <code>xfer push</code> or <code>xfer sync</code> makes one.</p>{{/containers}}
        <ul class="containers">
        {{#containers}}
        <li>{{#encrypted}}<span class="badge" title="End-to-end encrypted">encrypted</span> <bdi>{{name}}</bdi>{{/encrypted}}{{^encrypted}}<a href="{{href}}"><bdi>{{name}}</bdi></a>{{/encrypted}}{{#shared}} <span class="badge" title="Shared between accounts">{{role}}</span>{{/shared}}</li>
        {{/containers}}
        </ul>
        """,
        "encrypted": """
        <h1><bdi>{{container}}</bdi></h1>
        <p class="note">This container is end-to-end encrypted. The server holds only sealed names and sealed bytes, so there is nothing it can show here: read it with <code>xfer pull</code> on a device that holds its key.</p>
        """,
        "folder": """
        <nav class="crumbs" aria-label="Folder">{{#crumbs}}<a href="{{href}}"><bdi>{{name}}</bdi></a><span class="sep">/</span>{{/crumbs}}<bdi>{{here}}</bdi></nav>
        <form method="get" action="{{searchAction}}" class="search" role="search">
        <input type="search" name="name" id="search" placeholder="Search names, e.g. *.pdf" value="" maxlength="255">
        <select name="kind" aria-label="Kind"><option value="">any kind</option><option value="file">files</option><option value="package">packages</option></select>
        <button type="submit">Search</button>
        </form>
        <p class="links"><a href="{{deletedHref}}" id="deleted-link">Recently Deleted</a> · <a href="{{kvHref}}" id="kv-link">Key-value store</a></p>
        <details class="tools"><summary>Upload or new folder</summary>
        <form method="post" action="{{uploadAction}}" enctype="multipart/form-data" class="row" id="upload-form">
        <input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="folder" value="{{folder}}">
        <input type="file" name="file" id="upload-file" multiple required> <button type="submit" id="upload">Upload</button>
        </form>
        <form method="post" action="{{mkdirAction}}" class="row" id="mkdir-form">
        <input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="folder" value="{{folder}}">
        <input type="text" name="name" id="mkdir-name" placeholder="New folder name" required maxlength="255"> <button type="submit" id="mkdir">Create folder</button>
        </form>
        </details>
        {{> table}}
        {{#moreHref}}<p><a href="{{moreHref}}" id="more">More…</a></p>{{/moreHref}}
        {{^rows}}<p class="empty">This folder is empty.</p>{{/rows}}
        """,
        "search": """
        <nav class="crumbs"><a href="{{containerHref}}"><bdi>{{container}}</bdi></a><span class="sep">/</span>Search</nav>
        <form method="get" action="{{searchAction}}" class="search" role="search">
        <input type="search" name="name" id="search" value="{{name}}" placeholder="Search names, e.g. *.pdf" maxlength="255">
        <select name="kind" aria-label="Kind"><option value="">any kind</option><option value="file"{{#isFile}} selected{{/isFile}}>files</option><option value="package"{{#isPackage}} selected{{/isPackage}}>packages</option></select>
        <button type="submit">Search</button>
        </form>
        <p class="summary" id="summary">{{summary}}</p>
        {{> table}}
        {{#moreHref}}<p><a href="{{moreHref}}" id="more">More…</a></p>{{/moreHref}}
        """,
        "deleted": """
        <nav class="crumbs"><a href="{{containerHref}}"><bdi>{{container}}</bdi></a><span class="sep">/</span>Recently Deleted</nav>
        <h1>Recently Deleted</h1>
        <p class="note">Deleted documents keep their versions until the server's garbage collection removes them; open one to download what it held.</p>
        {{> table}}
        {{^rows}}<p class="empty">Nothing was deleted.</p>{{/rows}}
        {{#moreHref}}<p><a href="{{moreHref}}" id="more">More…</a></p>{{/moreHref}}
        """,
        "table": """
        {{#hasRows}}
        <table class="listing" id="listing">
        <thead><tr><th>Name</th><th>Kind</th><th class="num">Size</th><th>Modified</th><th>Device</th></tr></thead>
        <tbody>
        {{/hasRows}}
        {{#rows}}
        <tr data-path="{{path}}"><td class="name"><a href="{{href}}"><bdi>{{name}}</bdi></a>{{#note}} <span class="badge">{{note}}</span>{{/note}}{{#restore}}
        <form method="post" action="{{restoreAction}}" class="inline"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="path" value="{{path}}"><input type="hidden" name="version" value="{{version}}"><input type="hidden" name="base" value="{{base}}"><button type="submit" class="small restore">Restore</button></form>{{/restore}}</td><td>{{kind}}</td><td class="num">{{size}}</td><td>{{#modified}}<time datetime="{{modifiedISO}}">{{modified}}</time>{{/modified}}</td><td><bdi>{{device}}</bdi></td></tr>
        {{/rows}}
        {{#hasRows}}
        </tbody>
        </table>
        {{/hasRows}}
        """,
        "item": """
        <nav class="crumbs" aria-label="Folder">{{#crumbs}}<a href="{{href}}"><bdi>{{name}}</bdi></a><span class="sep">/</span>{{/crumbs}}<bdi>{{here}}</bdi></nav>
        <h1><bdi>{{name}}</bdi></h1>
        {{#deleted}}<p class="note">This document was deleted. Its earlier versions are listed below.</p>{{/deleted}}
        {{#conflicts}}<p class="warning" id="conflict-note">This document has unresolved conflicting versions ({{conflicts}}): each is listed below. Choose the one to keep (the others stay in history), or use <code>xfer resolve</code>.</p>{{/conflicts}}
        {{#symlink}}<p>A symbolic link to <code><bdi>{{symlink}}</bdi></code>.</p>{{/symlink}}
        <dl class="facts">
        <dt>Kind</dt><dd>{{kind}}</dd>
        <dt>Size</dt><dd>{{size}}</dd>
        <dt>Modified</dt><dd>{{modified}}</dd>
        <dt>Version</dt><dd>{{version}}</dd>
        {{#device}}<dt>Written by</dt><dd><bdi>{{device}}</bdi></dd>{{/device}}
        {{#files}}<dt>Files</dt><dd>{{files}}</dd>{{/files}}
        </dl>
        {{#downloadHref}}<p><a class="button" href="{{downloadHref}}" id="download" download>{{downloadLabel}}</a></p>{{/downloadHref}}
        {{#actions}}
        <section class="tools">
        <form method="post" action="{{renameAction}}" class="row" id="rename-form">
        <input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="path" value="{{path}}"><input type="hidden" name="base" value="{{base}}">
        <input type="text" name="name" id="rename-name" value="{{name}}" required maxlength="255" aria-label="New name"> <button type="submit" id="rename">Rename</button>
        </form>
        <details class="tools" id="share-tools"><summary>Share a link</summary>
        <form method="post" action="{{shareAction}}" class="row" id="share-form">
        <input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="path" value="{{path}}"><input type="hidden" name="base" value="{{base}}">
        <label class="inline-label">Expires <select name="days" id="share-days"><option value="1">in a day</option><option value="7" selected>in a week</option><option value="30">in 30 days</option><option value="0">never</option></select></label>
        <label class="inline-label"><input type="checkbox" name="pin" value="1"> this version only</label>
        <input type="password" name="password" id="share-password" placeholder="Password (optional)" autocomplete="new-password" maxlength="1024">
        <button type="submit" id="share">Make link</button>
        </form>
        </details>
        <form method="post" action="{{deleteAction}}" class="row" id="delete-form">
        <input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="path" value="{{path}}"><input type="hidden" name="base" value="{{base}}">
        <button type="submit" id="delete" class="danger">Delete</button> <span class="note">Deleted documents stay in Recently Deleted until the server's garbage collection.</span>
        </form>
        </section>
        {{/actions}}
        <h2>Versions</h2>
        <table class="listing" id="versions">
        <thead><tr><th>Version</th><th>State</th><th class="num">Size</th><th>Modified</th><th>Device</th><th></th></tr></thead>
        <tbody>
        {{#versions}}
        <tr data-version="{{version}}"><td>{{version}}</td><td>{{state}}</td><td class="num">{{size}}</td><td>{{modified}}</td><td><bdi>{{device}}</bdi></td><td>{{#href}}<a href="{{href}}" download>Download</a>{{/href}}{{#restore}}
        <form method="post" action="{{restoreAction}}" class="inline"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="path" value="{{path}}"><input type="hidden" name="version" value="{{version}}"><input type="hidden" name="base" value="{{base}}"><button type="submit" class="small restore">Restore</button></form>{{/restore}}{{#keep}}
        <form method="post" action="{{resolveAction}}" class="inline"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="path" value="{{path}}"><input type="hidden" name="keep" value="{{version}}"><input type="hidden" name="base" value="{{base}}"><button type="submit" class="small keep">Keep this version</button></form>{{/keep}}</td></tr>
        {{/versions}}
        </tbody>
        </table>
        {{#hasEntries}}
        <h2>Contents</h2>
        <table class="listing" id="contents">
        <thead><tr><th>Path</th><th class="num">Size</th></tr></thead>
        <tbody>
        {{/hasEntries}}
        {{#entries}}
        <tr><td><bdi>{{path}}</bdi></td><td class="num">{{size}}</td></tr>
        {{/entries}}
        {{#hasEntries}}
        </tbody>
        </table>
        {{/hasEntries}}
        {{#entriesLeft}}<p class="note">…and {{entriesLeft}} more entries.</p>{{/entriesLeft}}
        """,
        "kv": """
        <nav class="crumbs"><a href="{{containerHref}}"><bdi>{{container}}</bdi></a><span class="sep">/</span>Key-value store</nav>
        <h1>Key-value store</h1>
        <p class="note">{{keys}} of {{maximumKeys}} keys, {{used}} of {{limit}}. Read only here: apps write it, and <code>xfer kv</code>.</p>
        {{^hasEntries}}<p class="empty">No keys.</p>{{/hasEntries}}
        {{#hasEntries}}
        <table class="listing" id="kv">
        <thead><tr><th>Key</th><th>Value</th><th>Written</th><th>Device</th></tr></thead>
        <tbody>
        {{/hasEntries}}
        {{#entries}}
        <tr><td class="name"><bdi>{{key}}</bdi></td><td class="name"><code>{{value}}</code></td><td>{{modified}}</td><td><bdi>{{device}}</bdi></td></tr>
        {{/entries}}
        {{#hasEntries}}
        </tbody>
        </table>
        {{/hasEntries}}
        """,
        "shared": """
        <nav class="crumbs"><a href="{{containerHref}}"><bdi>{{container}}</bdi></a><span class="sep">/</span><a href="{{itemHref}}"><bdi>{{name}}</bdi></a></nav>
        <h1>Share link</h1>
        <p>Anyone with this link can download <bdi>{{name}}</bdi>{{#pinned}} (version {{pinned}} only){{/pinned}}{{#password}} after giving its password{{/password}}, without an account. It expires {{expires}}. Copy it now: it is shown only once.</p>
        <p><input type="text" readonly id="share-url" value="{{url}}" class="wide"></p>
        <p><a href="/web/shares">All share links</a></p>
        """,
        "shares": """
        <h1>Share links</h1>
        {{^hasLinks}}<p class="empty">No share links. Make one from a document's page.</p>{{/hasLinks}}
        {{#hasLinks}}
        <table class="listing" id="share-list">
        <thead><tr><th>Document</th><th>Shows</th><th>Made</th><th>Expires</th><th></th></tr></thead>
        <tbody>
        {{/hasLinks}}
        {{#links}}
        <tr data-id="{{id}}"><td class="name"><a href="{{href}}"><bdi>{{container}}: {{path}}</bdi></a>{{#password}} <span class="badge">password</span>{{/password}}{{#expired}} <span class="badge">expired</span>{{/expired}}</td><td>{{version}}</td><td>{{created}}</td><td>{{expires}}</td>
        <td><form method="post" action="/web/shares/revoke" class="inline"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="id" value="{{id}}"><button type="submit" class="small danger revoke">Revoke</button></form></td></tr>
        {{/links}}
        {{#hasLinks}}
        </tbody>
        </table>
        {{/hasLinks}}
        """,
        "share": """
        <section class="card narrow">
        <h1><bdi>{{name}}</bdi></h1>
        <dl class="facts">
        <dt>Kind</dt><dd>{{kind}}</dd>
        <dt>Size</dt><dd>{{size}}</dd>
        <dt>Modified</dt><dd>{{modified}}</dd>
        {{#files}}<dt>Files</dt><dd>{{files}}</dd>{{/files}}
        {{#expires}}<dt>Link expires</dt><dd>{{expires}}</dd>{{/expires}}
        </dl>
        <p><a class="button" href="{{downloadHref}}" id="download" download>{{downloadLabel}}</a></p>
        <p class="note">Shared with you through xfer. This link shows this document only, read only.</p>
        </section>
        """,
        "share-password": """
        <section class="card narrow">
        <h1><bdi>{{name}}</bdi></h1>
        <p>This link is protected by a password.</p>
        {{#error}}<p class="error" role="alert">{{error}}</p>{{/error}}
        <form method="post" action="{{action}}">
        <label for="password">Password</label>
        <input type="password" id="password" name="password" required maxlength="1024">
        <button type="submit" id="unlock">Open</button>
        </form>
        </section>
        """,
        "error": """
        <section class="card narrow">
        <h1>{{heading}}</h1>
        <p class="error" role="alert">{{message}}</p>
        <p><a href="/web/">Back to your containers</a></p>
        </section>
        """
    ]

    /// The icon: two arrows, one up, one down.
    static let icon = """
        <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#0066cc"/>\
        <path d="M11 24V9m-5 5 5-5 5 5M21 8v15m-5-5 5 5 5-5" stroke="#fff" stroke-width="2.6" fill="none" stroke-linecap="round" stroke-linejoin="round"/></svg>
        """

    /// The one stylesheet.
    static let css = """
        :root { color-scheme: light dark; --fg: #1d1d1f; --bg: #fbfbfd; --muted: #6e6e73; --line: #d2d2d7; --accent: #0066cc; --card: #fff; }
        @media (prefers-color-scheme: dark) { :root { --fg: #f5f5f7; --bg: #161617; --muted: #a1a1a6; --line: #3a3a3c; --accent: #2997ff; --card: #1d1d1f; } }
        * { box-sizing: border-box; }
        body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
        a { color: var(--accent); text-decoration: none; } a:hover { text-decoration: underline; }
        .bar { display: flex; align-items: center; gap: 1rem; padding: .6rem 1.2rem; border-bottom: 1px solid var(--line); background: var(--card); }
        .brand { font-weight: 700; font-size: 1.1rem; color: var(--fg); margin-right: auto; }
        .who { color: var(--muted); }
        main { max-width: 72rem; margin: 0 auto; padding: 1rem 1.2rem 3rem; }
        h1 { font-size: 1.5rem; margin: .6rem 0 1rem; overflow-wrap: anywhere; }
        h2 { font-size: 1.15rem; margin-top: 2rem; }
        .card { background: var(--card); border: 1px solid var(--line); border-radius: 12px; padding: 1.2rem 1.5rem; }
        .narrow { max-width: 30rem; margin: 3rem auto; }
        label { display: block; margin: .6rem 0 .3rem; color: var(--muted); }
        input[type=password], input[type=search], select { font: inherit; padding: .45rem .6rem; border: 1px solid var(--line); border-radius: 8px; background: var(--bg); color: var(--fg); }
        input[type=password] { width: 100%; }
        button, .button { font: inherit; padding: .45rem 1rem; border-radius: 8px; border: 1px solid var(--accent); background: var(--accent); color: #fff; cursor: pointer; display: inline-block; }
        .inline { display: inline; margin: 0; }
        .search { display: flex; gap: .5rem; margin: 1rem 0; flex-wrap: wrap; } .search input { flex: 1 1 18rem; }
        .listing { width: 100%; border-collapse: collapse; }
        .listing th, .listing td { text-align: left; padding: .45rem .6rem; border-bottom: 1px solid var(--line); vertical-align: top; }
        .listing th { color: var(--muted); font-weight: 500; }
        .listing td.name { overflow-wrap: anywhere; max-width: 36rem; }
        .num { text-align: right !important; font-variant-numeric: tabular-nums; white-space: nowrap; }
        .crumbs { color: var(--muted); overflow-wrap: anywhere; } .crumbs .sep { margin: 0 .35rem; }
        .badge { font-size: .75rem; padding: .1rem .45rem; border-radius: 999px; border: 1px solid var(--line); color: var(--muted); }
        .containers { list-style: none; padding: 0; } .containers li { padding: .55rem 0; border-bottom: 1px solid var(--line); overflow-wrap: anywhere; }
        .usage meter { width: 100%; max-width: 30rem; height: 1rem; }
        .error { color: #d70015; } .warning { color: #b25000; } .note, .empty, .summary, .foot { color: var(--muted); }
        .facts { display: grid; grid-template-columns: max-content 1fr; gap: .3rem 1rem; } .facts dt { color: var(--muted); } .facts dd { margin: 0; overflow-wrap: anywhere; }
        .foot { text-align: center; padding: 2rem; font-size: .8rem; }
        .tools { margin: 1rem 0; } .tools summary { cursor: pointer; color: var(--accent); }
        .row { display: flex; gap: .5rem; align-items: center; margin: .6rem 0; flex-wrap: wrap; }
        input[type=text] { font: inherit; padding: .45rem .6rem; border: 1px solid var(--line); border-radius: 8px; background: var(--bg); color: var(--fg); min-width: 16rem; }
        button.small { padding: .15rem .6rem; font-size: .85rem; margin-left: .5rem; }
        .inline-label { display: inline-flex; gap: .3rem; align-items: center; margin: 0; color: var(--fg); }
        input.wide { width: 100%; font: inherit; padding: .45rem .6rem; }
        button.danger { background: #d70015; border-color: #d70015; }
        .live { position: fixed; right: 1rem; bottom: 1rem; font-size: .8rem; color: var(--muted); }
        """

    /// The one script: live updates. A page that names an event stream (`data-events`) reads
    /// it; on a change it fetches itself again and swaps its main part in, so what another
    /// device pushed appears without a reload. Nothing else runs; every page works without it.
    static let script = """
        "use strict";
        (function () {
          var url = document.body.getAttribute("data-events");
          if (!url || !window.EventSource) return;
          var busy = false, again = false;
          function refresh() {
            if (busy) { again = true; return; }
            busy = true;
            fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
              .then(function (r) { return r.ok ? r.text() : null; })
              .then(function (text) {
                if (text) {
                  var page = new DOMParser().parseFromString(text, "text/html");
                  var fresh = page.getElementById("main"), main = document.getElementById("main");
                  if (fresh && main) { main.replaceWith(fresh); document.body.setAttribute("data-updated", String(Date.now())); }
                }
              })
              .catch(function () {})
              .then(function () { busy = false; if (again) { again = false; refresh(); } });
          }
          var source = new EventSource(url);
          source.addEventListener("change", refresh);
        })();
        """
}
