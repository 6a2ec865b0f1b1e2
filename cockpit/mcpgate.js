/* The mcpgate page of Cockpit: the gateway's D-Bus API (man:mcpgate-dbus(7))
 * and its backends' journal, live, as the logged-in user.
 *
 * Everything comes from signals: the manager's and each backend's
 * PropertiesChanged (through cockpit.dbus proxies), BackendNew and
 * BackendRemoved (backends a reload adds or removes), and
 * `journalctl -f`. Nothing is polled; a one-second timer only moves the
 * clocks (uptime, the plots' time axis) on, the clients' table is read
 * again (ListClients) when a signal says sessions or calls changed, and
 * the profiles' (ListProfiles) when the number of tools did.
 *
 * Nothing is read with more rights than the user has: the bus is opened
 * without superuser, so polkit decides every Start/Stop/Restart/Reload and
 * the gateway decides what private properties (StderrTail, LastError) the
 * user may see. */
"use strict";

(function () {
    const BUS_NAME = "org.mcpgate.Gateway1";
    const MANAGER_PATH = "/org/mcpgate/Gateway1";
    const MANAGER_IFACE = "org.mcpgate.Gateway1.Manager";
    const BACKEND_IFACE = "org.mcpgate.Gateway1.Backend";
    // The plots keep this much history (samples come with PropertiesChanged).
    const PLOT_SECONDS = 300;
    // The journal view keeps this many lines.
    const LOG_LINES = 200;
    // Members of this group (or root) get the management buttons; the
    // conventional group of the polkit rule in org.mcpgate.Gateway1.policy.
    const ADMIN_GROUP = "mcpgate-admin";
    // The clients' table is read again at most this often (ms), however
    // many signals say that sessions or calls changed.
    const CLIENTS_REFRESH = 2000;

    const state = {
        client: null,
        manager: null,
        backends: null,
        cards: {}, // path -> {el, fields, samples, name}
        admin: false,
        journalReader: true, // until cockpit.user() says otherwise
        userName: "",
        journal: null, // the running journalctl, if any
        journalName: "",
    };

    function $(id) { return document.getElementById(id); }

    function el(tag, attrs, children) {
        const e = document.createElement(tag);
        for (const k in attrs || {}) {
            if (k === "text")
                e.textContent = attrs[k];
            else if (k === "class")
                e.className = attrs[k];
            else
                e.setAttribute(k, attrs[k]);
        }
        for (const c of children || [])
            e.appendChild(c);
        return e;
    }

    // showMessage puts a result or a refusal where the operator sees it;
    // errors say what was refused and why, as the gateway said it.
    function showMessage(text, isError) {
        const m = $("message");
        m.textContent = text;
        m.className = isError ? "message error" : "message";
        m.hidden = false;
    }

    function errorText(what, err) {
        let reason = (err && (err.message || err.problem)) || String(err);
        if (err && err.name)
            reason += " (" + err.name + ")";
        return what + " refused: " + reason;
    }

    // Unknown counters come as the largest uint64, which the bridge may
    // hand over as -1.
    function unknown(n) {
        return n === undefined || n === null || n < 0 || n >= Number.MAX_SAFE_INTEGER;
    }

    function formatBytes(n) {
        if (!n || unknown(n))
            return "–";
        const units = ["B", "KiB", "MiB", "GiB", "TiB"];
        let i = 0;
        while (n >= 1024 && i < units.length - 1) {
            n /= 1024;
            i++;
        }
        return n.toFixed(i ? 1 : 0) + " " + units[i];
    }

    function formatCount(n) {
        if (unknown(n))
            return "–";
        return String(n);
    }

    function formatDuration(sec) {
        if (sec < 0)
            sec = 0;
        const d = Math.floor(sec / 86400);
        const h = Math.floor(sec % 86400 / 3600);
        const m = Math.floor(sec % 3600 / 60);
        const s = Math.floor(sec % 60);
        if (d)
            return d + "d " + h + "h";
        if (h)
            return h + "h " + m + "m";
        if (m)
            return m + "m " + s + "s";
        return s + "s";
    }

    /* The gateway. */

    function updateManager() {
        const m = state.manager;
        if (!m || !m.valid) {
            $("gw-status").textContent = "The gateway is not on the system bus (is mcpgate.service running?)";
            return;
        }
        $("gw-version").textContent = m.Version || "";
        $("gw-status").textContent = m.Status || "";
        $("gw-backends").textContent = formatCount(m.NBackends);
        $("gw-healthy").textContent = formatCount(m.NHealthyBackends);
        $("gw-tools").textContent = formatCount(m.NTools);
        if (m.NTools !== state.profilesTools) {
            state.profilesTools = m.NTools;
            listProfiles();
        }
        $("gw-sessions").textContent = formatCount(m.NSessions);
        $("gw-clients").textContent = formatCount(m.NClients);
        const listeners = m.Listeners || [];
        $("gw-listeners").textContent = listeners.length
            ? listeners.map(l => l[0] + " (" + l[1] + ", from " + l[2] + ")").join("; ")
            : "–";
        refreshClients();
    }

    function reload() {
        const button = $("reload");
        button.disabled = true;
        $("reload-result").textContent = "reloading…";
        state.manager.Reload()
            .then(() => {
                $("reload-result").textContent = "last reload: ok at " + new Date().toLocaleTimeString();
                listClients();
                listProfiles();
            })
            .catch(err => {
                $("reload-result").textContent = "last reload: failed at " + new Date().toLocaleTimeString();
                showMessage(errorText("Reload", err), true);
            })
            .finally(() => { button.disabled = false });
    }

    /* Backends. */

    const FIELDS = [
        ["pid", "PID"], ["unit", "Unit"], ["uptime", "In state for"], ["restarts", "Restarts"],
        ["calls", "Calls"], ["errors", "Errors"], ["inflight", "In flight"],
        ["breaker", "Breaker"], ["latency", "Check latency"], ["memory", "Memory"],
        ["tasks", "Tasks"], ["fallbacks", "Fallbacks"], ["pending", "Pending changes"],
    ];

    function makeCard(path, proxy) {
        const fields = {};
        const dl = el("dl", { class: "facts" });
        for (const [key, label] of FIELDS) {
            dl.appendChild(el("dt", { text: label }));
            fields[key] = el("dd", { "data-field": key });
            dl.appendChild(fields[key]);
        }
        const name = proxy.Name;
        const buttons = el("div", { class: "actions" });
        for (const verb of ["Start", "Stop", "Restart"]) {
            const b = el("button", { type: "button", "data-action": verb.toLowerCase(), text: verb });
            b.addEventListener("click", () => act(name, verb));
            buttons.appendChild(b);
        }
        const logButton = el("button", { type: "button", "data-action": "journal", text: "Journal" });
        logButton.addEventListener("click", () => followJournal(name));
        buttons.appendChild(logButton);
        const review = el("div", { class: "review", hidden: "" });
        for (const [verb, label] of [["diff", "Show diff"], ["approve", "Approve changes"], ["reject", "Reject changes"]]) {
            const b = el("button", { type: "button", "data-action": verb, text: label });
            b.addEventListener("click", () => reviewChanges(name, verb, card));
            review.appendChild(b);
        }
        const card = {
            name,
            fields,
            review,
            diff: el("pre", { class: "diff", hidden: "" }),
            samples: [],
            state: el("span", { class: "state", "data-field": "state" }),
            reason: el("div", { class: "reason muted", "data-field": "reason" }),
            plot: el("div", { class: "plot" }),
        };
        card.el = el("article", { class: "backend", "data-backend": name }, [
            el("h3", {}, [el("span", { class: "name", text: name }), card.state]),
            card.reason,
            dl,
            review,
            card.diff,
            card.plot,
            buttons,
        ]);
        state.cards[path] = card;
        return card;
    }

    function updateCard(path) {
        const proxy = state.backends[path];
        if (!proxy || !proxy.valid || !proxy.Name)
            return;
        let card = state.cards[path];
        if (!card) {
            card = makeCard(path, proxy);
            insertSorted($("backends"), card.el, card.name);
        }
        card.state.textContent = proxy.State;
        card.state.className = "state state-" + proxy.State;
        // LastError is private: a user who may not read it gets "".
        card.reason.textContent = proxy.LastError || "";
        const f = card.fields;
        f.pid.textContent = proxy.MainPID ? String(proxy.MainPID) : "–";
        f.unit.textContent = proxy.Unit || "–";
        f.restarts.textContent = formatCount(proxy.NRestarts);
        f.calls.textContent = formatCount(proxy.NCalls);
        f.errors.textContent = formatCount(proxy.NFailedCalls);
        f.inflight.textContent = formatCount(proxy.CallsInFlight) + " (+" + formatCount(proxy.CallsQueued) + " queued)";
        f.breaker.textContent = proxy.CircuitOpenTimestamp ? "open" : "closed";
        f.latency.textContent = proxy.LastCheckLatencyUSec ? (proxy.LastCheckLatencyUSec / 1000).toFixed(1) + " ms" : "–";
        f.memory.textContent = formatBytes(proxy.MemoryCurrent);
        f.tasks.textContent = formatCount(proxy.TasksCurrent);
        f.fallbacks.textContent = formatCount(proxy.NFallbacks);
        const pending = proxy.PendingChanges || [];
        f.pending.textContent = pending.length
            ? pending.map(p => p[0] + " " + p[1] + ": " + p[2] + (p[3] ? " (served)" : " (held back)")).join("; ")
            : "none";
        card.review.hidden = !pending.length;
        if (!pending.length)
            card.diff.hidden = true;
        if (card.last && card.last.calls !== proxy.NCalls)
            refreshClients(); // a call: its client was seen
        sample(card, proxy);
        tick(card, proxy);
    }

    // addBackend watches the backend object at path (once) and shows it.
    function addBackend(path) {
        if (state.backends[path])
            return;
        const proxy = state.client.proxy(BACKEND_IFACE, path);
        state.backends[path] = proxy;
        proxy.addEventListener("changed", () => updateCard(path));
        proxy.wait(() => updateCard(path));
    }

    // dropBackend forgets the backend object at path and takes its card away.
    function dropBackend(path) {
        delete state.backends[path];
        removeCard(path);
    }

    function insertSorted(parent, node, name) {
        for (const child of parent.children) {
            if (child.getAttribute("data-backend") > name) {
                parent.insertBefore(node, child);
                return;
            }
        }
        parent.appendChild(node);
    }

    function removeCard(path) {
        const card = state.cards[path];
        if (card) {
            card.el.remove();
            delete state.cards[path];
        }
    }

    // tick moves a card's clocks on: its uptime and its plot's time axis.
    function tick(card, proxy) {
        const since = proxy.StateChangeTimestamp;
        card.fields.uptime.textContent = proxy.MainPID && since
            ? formatDuration(Date.now() / 1000 - since / 1e6)
            : "–";
        drawPlot(card);
    }

    function act(name, verb) {
        const proxy = Object.values(state.backends).find(p => p.Name === name);
        if (!proxy)
            return Promise.resolve();
        showMessage(verb + " " + name + "…", false);
        return proxy[verb]()
            .then(() => showMessage(verb + " " + name + ": done", false))
            .catch(err => showMessage(errorText(verb + " " + name, err), true));
    }

    /* Integrity: pending changes are reviewed with ReviewChanges (open to
     * all), which gives each change's diff and ID, the version shown; an
     * approval or rejection names the IDs of the diff the page showed
     * (polkit's org.mcpgate.Gateway1.approve decides), so a change made
     * after the review stays pending and the gateway says so. */

    function reviewChanges(name, verb, card) {
        const proxy = Object.values(state.backends).find(p => p.Name === name);
        if (!proxy)
            return Promise.resolve();
        if (verb === "diff") {
            return proxy.ReviewChanges([])
                .then(changes => {
                    card.diff.textContent = changes.map(c => "# " + c[1] + ": " + c[5] + "\n# " + c[2] + "\n" + c[6]).join("\n");
                    card.diff.hidden = false;
                    card.reviewed = changes;
                })
                .catch(err => showMessage(errorText("Diff of " + name, err), true));
        }
        const what = (verb === "approve" ? "Approve" : "Reject") + " changes of " + name;
        const shown = card.reviewed || [];
        // What can be approved of what was shown; everything shown can be
        // rejected.
        const ids = shown.filter(c => verb !== "approve" || c[4]).map(c => c[2]);
        if (!ids.length) {
            showMessage(what + ": show the diff first; what is approved is what it shows", true);
            return Promise.resolve();
        }
        const method = verb === "approve" ? "ApproveChanges" : "RejectChanges";
        return proxy[method](ids)
            .then(decided => {
                card.reviewed = null;
                card.diff.hidden = true;
                showMessage(what + ": " + decided.join(", "), false);
            })
            .catch(err => {
                // Changed since it was shown: the review must start again.
                card.reviewed = null;
                card.diff.hidden = true;
                showMessage(errorText(what, err), true);
            });
    }

    /* Plots: calls and errors per second, from NCalls and NFailedCalls as
     * PropertiesChanged announces them. A change's increase is counted in
     * the bucket of PLOT_BUCKET seconds it arrived in, so that one call
     * does not look like a burst. */

    const PLOT_BUCKET = 10;

    function sample(card, proxy) {
        const now = Date.now() / 1000;
        const calls = proxy.NCalls || 0;
        const errors = proxy.NFailedCalls || 0;
        const last = card.last;
        card.last = { calls, errors };
        // The first reading is the baseline; a counter going down (the
        // gateway restarted) starts a new one.
        if (!last || calls < last.calls || errors < last.errors)
            return;
        if (calls === last.calls && errors === last.errors)
            return;
        card.samples.push({ t: now, calls: calls - last.calls, errors: errors - last.errors });
        while (card.samples.length && card.samples[0].t < now - PLOT_SECONDS)
            card.samples.shift();
    }

    // rates sums the increases per bucket, oldest first, as per-second rates
    // at each bucket's middle.
    function rates(samples, now, key) {
        const n = PLOT_SECONDS / PLOT_BUCKET;
        const sums = new Array(n).fill(0);
        for (const s of samples) {
            const i = n - 1 - Math.floor((now - s.t) / PLOT_BUCKET);
            if (i >= 0 && i < n)
                sums[i] += s[key];
        }
        return sums.map((v, i) => [now - PLOT_SECONDS + (i + 0.5) * PLOT_BUCKET, v / PLOT_BUCKET]);
    }

    function drawPlot(card) {
        const w = 300;
        const h = 60;
        const now = Date.now() / 1000;
        const calls = rates(card.samples, now, "calls");
        const errors = rates(card.samples, now, "errors");
        let peak = 0;
        for (const p of calls.concat(errors))
            peak = Math.max(peak, p[1]);
        const max = peak || 1;
        const line = pts => pts
            .map(p => ((p[0] - now + PLOT_SECONDS) / PLOT_SECONDS * w).toFixed(1) + "," +
                      (h - p[1] / max * (h - 4)).toFixed(1))
            .join(" ");
        const ns = "http://www.w3.org/2000/svg";
        const svg = document.createElementNS(ns, "svg");
        svg.setAttribute("viewBox", "0 0 " + w + " " + h);
        svg.setAttribute("preserveAspectRatio", "none");
        svg.setAttribute("role", "img");
        svg.setAttribute("aria-label", "calls and errors per second, last " + PLOT_SECONDS / 60 + " minutes");
        for (const [pts, cls] of [[calls, "calls"], [errors, "errors"]]) {
            const pl = document.createElementNS(ns, "polyline");
            pl.setAttribute("points", line(pts));
            pl.setAttribute("class", cls);
            svg.appendChild(pl);
        }
        const legend = el("div", { class: "legend muted" }, [
            el("span", { class: "calls", text: "calls/s" }),
            el("span", { class: "errors", text: "errors/s" }),
            el("span", { text: "peak " + peak.toFixed(peak < 10 ? 2 : 0) + "/s, last " + PLOT_SECONDS / 60 + " min" }),
        ]);
        card.plot.replaceChildren(svg, legend);
    }

    /* The journal of one backend, followed. */

    // logsLocation is where Cockpit's Logs page shows the same journal:
    // every priority, matched on the backend's field.
    function logsLocation(name) {
        return "/system/logs#/?priority=debug&MCPGATE_BACKEND=" + encodeURIComponent(name);
    }

    function followJournal(name) {
        if (state.journal)
            state.journal.close();
        state.journalName = name;
        $("log-link").setAttribute("href", logsLocation(name));
        $("log-section").hidden = false;
        $("log-name").textContent = name;
        const log = $("log");
        log.replaceChildren();
        let buffer = "";
        const proc = cockpit.spawn(["journalctl", "--follow", "--output=json", "--lines=50",
            "--no-pager", "MCPGATE_BACKEND=" + name], { err: "out" });
        // stderr goes into the view, so that journalctl's complaints show.
        // journald decides what the user reads; say so to those who may
        // not read the system journal, rather than show an empty view.
        if (!state.journalReader)
            appendLogText(log, "Only members of adm and systemd-journal read the system journal; " +
                "journalctl shows " + (state.userName || "you") + " no entries of mcpgate's backends.", 4);
        state.journal = proc;
        proc.stream(data => {
            buffer += data;
            const lines = buffer.split("\n");
            buffer = lines.pop();
            for (const line of lines)
                if (line)
                    appendLogLine(log, line);
        });
        proc.catch(err => {
            if (state.journal === proc && err.problem !== "cancelled")
                appendLogText(log, "journalctl: " + (err.message || err.problem), 3);
        });
    }

    function appendLogLine(log, line) {
        let entry;
        try {
            entry = JSON.parse(line);
        } catch (e) {
            appendLogText(log, line, 6);
            return;
        }
        const usec = Number(entry.__REALTIME_TIMESTAMP || 0);
        const when = usec ? new Date(usec / 1000).toLocaleTimeString() : "";
        let msg = entry.MESSAGE;
        if (Array.isArray(msg)) // journalctl gives binary data as bytes
            msg = new TextDecoder().decode(new Uint8Array(msg));
        appendLogText(log, when + " " + (entry.SYSLOG_IDENTIFIER || "") + ": " + msg, Number(entry.PRIORITY || 6));
    }

    function appendLogText(log, text, priority) {
        log.appendChild(el("div", { class: "p" + priority, text }));
        while (log.childElementCount > LOG_LINES)
            log.firstElementChild.remove();
        log.scrollTop = log.scrollHeight;
    }

    /* Clients, from ListClients: open to every user, as the
     * configuration's files are, and without secrets. Tokens are issued
     * (CreateToken) and revoked (RevokeToken) as polkit's
     * org.mcpgate.Gateway1.tokens allows; a new token is shown once, here,
     * and kept nowhere by the page. */

    function formatSeen(usec) {
        if (!usec)
            return "–";
        const when = new Date(usec / 1000);
        return when.toLocaleString() + " (" + formatDuration(Date.now() / 1000 - usec / 1e6) + " ago)";
    }

    function cell(label, text) {
        return el("td", { "data-label": label, text });
    }

    function clientRow(c) {
        const [name, identity, policy, sessions, seen, tokens] = c;
        const tokenCell = el("td", { "data-label": "Issued tokens", "data-field": "tokens" });
        const list = el("div", { class: "actions" });
        for (const id of tokens) {
            const revoke = el("button", { type: "button", "data-action": "revoke", "data-token": id, text: "Revoke " + id });
            revoke.addEventListener("click", () => revokeToken(name, id));
            list.appendChild(revoke);
        }
        const create = el("button", { type: "button", "data-action": "create-token", text: "Create token" });
        create.addEventListener("click", () => createToken(name));
        list.appendChild(create);
        tokenCell.appendChild(list);
        const tr = el("tr", { "data-client": name }, [
            cell("Name", name), cell("Identity", identity), cell("May use", policy),
            el("td", { "data-label": "Sessions", "data-field": "sessions", text: String(sessions) }),
            el("td", { "data-label": "Last seen", "data-field": "seen", text: formatSeen(seen) }),
            tokenCell,
        ]);
        return tr;
    }

    function listClients() {
        const body = $("clients").tBodies[0];
        state.clientsListed = Date.now();
        if (!state.manager.valid || !state.manager.ListClients)
            return Promise.resolve();
        return state.manager.ListClients()
            .then(clients => {
                const rows = clients.map(clientRow);
                if (!rows.length)
                    rows.push(el("tr", {}, [el("td", { colspan: "6", class: "muted", text: "no clients configured" })]));
                body.replaceChildren(...rows);
            })
            .catch(err => {
                body.replaceChildren(el("tr", {}, [el("td", { colspan: "6", class: "muted",
                    text: "ListClients: " + (err.message || err.problem) })]));
            });
    }

    /* Profiles, from ListProfiles: the endpoint (name "") and each
     * [profiles.NAME], with the tools it serves and the bytes of its
     * tools/list. Read again when the catalog's size changes and after a
     * reload. */

    function profileRow(p) {
        const [name, description, search, tools, bytes] = p;
        return el("tr", { "data-profile": name }, [
            cell("Profile", name || "(the endpoint itself)"),
            cell("Mode", search ? "search" : "list"),
            el("td", { "data-label": "Tools", "data-field": "tools", text: String(tools) }),
            el("td", { "data-label": "tools/list", "data-field": "bytes", text: formatBytes(bytes) }),
            cell("Description", description || "–"),
        ]);
    }

    function listProfiles() {
        const body = $("profiles").tBodies[0];
        if (!state.manager.valid || !state.manager.ListProfiles)
            return Promise.resolve();
        return state.manager.ListProfiles()
            .then(profiles => body.replaceChildren(...profiles.map(profileRow)))
            .catch(err => {
                body.replaceChildren(el("tr", {}, [el("td", { colspan: "5", class: "muted",
                    text: "ListProfiles: " + (err.message || err.problem) })]));
            });
    }

    // refreshClients reads the clients again after a signal, at most once
    // per CLIENTS_REFRESH.
    function refreshClients() {
        if (state.clientsTimer || !state.manager || !state.manager.valid)
            return;
        const wait = Math.max(0, (state.clientsListed || 0) + CLIENTS_REFRESH - Date.now());
        state.clientsTimer = window.setTimeout(() => {
            state.clientsTimer = null;
            listClients();
        }, wait);
    }

    function createToken(name) {
        showMessage("Create a token for " + name + "…", false);
        // cockpit's proxies resolve with every out argument.
        return state.manager.CreateToken(name)
            .then((token, id) => {
                $("message").hidden = true;
                $("token-client").textContent = name;
                $("token-id").textContent = id;
                $("token-value").value = token;
                $("token-copied").textContent = "";
                $("token-once").hidden = false;
                $("token-value").select();
                listClients();
            })
            .catch(err => showMessage(errorText("Create a token for " + name, err), true));
    }

    function revokeToken(name, id) {
        showMessage("Revoke token " + id + " of " + name + "…", false);
        return state.manager.RevokeToken(name, id)
            .then(() => {
                showMessage("Revoked token " + id + " of " + name + ": it is refused from its next request on", false);
                listClients();
            })
            .catch(err => showMessage(errorText("Revoke token " + id + " of " + name, err), true));
    }

    // copyToken puts the token on the clipboard: the Clipboard API where the
    // page is a secure context, else the selection and the copy command.
    function copyToken() {
        const input = $("token-value");
        const done = () => { $("token-copied").textContent = "copied" };
        if (navigator.clipboard && window.isSecureContext) {
            return navigator.clipboard.writeText(input.value).then(done)
                .catch(() => { input.select(); $("token-copied").textContent = "select it and copy it by hand" });
        }
        input.select();
        if (document.execCommand("copy"))
            done();
        else
            $("token-copied").textContent = "select it and copy it by hand";
        return Promise.resolve();
    }

    // forgetToken takes the token off the page: it is shown once.
    function forgetToken() {
        $("token-value").value = "";
        $("token-once").hidden = true;
    }

    /* Who is looking. */

    function setAccess(user) {
        const groups = user.groups || [];
        state.admin = user.id === 0 || groups.indexOf(ADMIN_GROUP) >= 0;
        state.journalReader = user.id === 0 || groups.indexOf("adm") >= 0 || groups.indexOf("systemd-journal") >= 0;
        state.userName = user.name;
        document.body.classList.toggle("read-only", !state.admin);
        $("access").textContent = state.admin
            ? "Logged in as " + user.name + ", who manages the gateway (polkit decides each change)."
            : "Read-only: " + user.name + " is not in " + ADMIN_GROUP + "; polkit refuses changes " +
              "unless org.mcpgate.Gateway1.manage is granted.";
    }

    function init() {
        state.client = cockpit.dbus(BUS_NAME, { bus: "system" });
        state.manager = state.client.proxy(MANAGER_IFACE, MANAGER_PATH);
        state.manager.addEventListener("changed", updateManager);
        state.manager.wait(() => {
            updateManager();
            listClients();
        });
        // The backends come from ListBackends, then BackendNew (a reload
        // added one) and BackendRemoved, each with a proxy of its own.
        // Not client.proxies(BACKEND_IFACE, MANAGER_PATH): the Python bridge
        // of Cockpit 294 and later (Debian trixie's) watches a path
        // namespace only through org.freedesktop.DBus.ObjectManager, which
        // the gateway does not offer, and would show no backend at all.
        state.backends = {};
        state.client.subscribe({ interface: MANAGER_IFACE, path: MANAGER_PATH, member: "BackendNew" },
            (path, iface, signal, args) => addBackend(args[1]));
        state.client.subscribe({ interface: MANAGER_IFACE, path: MANAGER_PATH, member: "BackendRemoved" },
            (path, iface, signal, args) => dropBackend(args[1]));
        state.manager.wait(() => {
            if (!state.manager.valid)
                return;
            state.manager.ListBackends()
                .then(list => list.forEach(([, path]) => addBackend(path)))
                .catch(err => showMessage(errorText("ListBackends", err), true));
        });
        state.client.addEventListener("close", (ev, options) => {
            $("gw-status").textContent = "Disconnected from the bus: " + (options.problem || "closed");
        });
        $("reload").addEventListener("click", reload);
        $("log-link").addEventListener("click", ev => {
            ev.preventDefault();
            cockpit.jump(logsLocation(state.journalName));
        });
        $("token-copy").addEventListener("click", copyToken);
        $("token-done").addEventListener("click", forgetToken);
        cockpit.user().then(setAccess);
        window.setInterval(() => {
            for (const path in state.cards) {
                const proxy = state.backends[path];
                if (proxy && proxy.valid)
                    tick(state.cards[path], proxy);
            }
        }, 1000);
    }

    document.addEventListener("DOMContentLoaded", init);
}());
